// A training step run by code other than train.cpp's im2col step, behind
// nn::TrainStep (train.h): TrainStep forwards every call to it. Internal to
// kernels/nn.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/nn/train/train.h"

namespace dlb::nn {

struct TrainBackend {
  virtual ~TrainBackend() = default;
  virtual double forward(const float* x, const std::uint8_t* labels) = 0;
  virtual void backward() = 0;
  virtual void update() = 0;
  virtual std::int64_t batch() const = 0;
  virtual const Sgd& sgd() const = 0;
  virtual const std::vector<TrainParam>& params() const = 0;
  // In train.h's layout (PyTorch's). param_to_write: the caller may change
  // the values; the next forward, backward or update reads them.
  virtual std::span<const float> param(std::size_t i) = 0;
  virtual std::span<float> param_to_write(std::size_t i) = 0;
  virtual std::span<const float> grad(std::size_t i) = 0;
  virtual std::span<const float> velocity(std::size_t i) = 0;
  virtual std::span<const float> log_probs() const = 0;
  // A batch-norm layer's running statistics (train.h); empty for another layer.
  virtual std::span<const float> running_mean(std::size_t layer) const = 0;
  virtual std::span<const float> running_var(std::size_t layer) const = 0;
  virtual TrainMemory memory() const = 0;
};

// Backward's gradient buffers, shared between layers whose gradients are
// not live at once (train.cpp's and train_onednn.cpp's steps): layer j's
// output gradient is written first at step first_write[j] (-1: no buffer)
// and last read at step read[j], the steps being layer indices run from the
// last down. Greedy, latest first write first: a buffer is taken again once
// its occupant's last read comes before (is a larger step than) the
// newcomer's first write. Returns each layer's buffer (or -1) and sets
// `buffers` to how many there are.
std::vector<int> share_gradient_buffers(const std::vector<int>& first_write, const std::vector<int>& read,
                                        std::size_t& buffers);

// The loss on the logits [batch, classes]: log-softmax (sums in double,
// shifted by each row's max) into log_probs [batch, classes], and the mean
// negative log-likelihood of the labels, which the caller has checked
// (each < classes).
double log_softmax_nll(const float* logits, const std::uint8_t* labels, std::int64_t batch, std::int64_t classes,
                       float* log_probs);

#if DLB_HAVE_ONEDNN
// TrainImpl::onednn: oneDNN's training primitives (train_onednn.cpp).
std::unique_ptr<TrainBackend> make_onednn_train_step(const Network& net, std::int64_t batch, Sgd sgd);
#endif

}  // namespace dlb::nn
