// A CPU training step on the walk (train_walk.h): what every such step does
// the same way, written once. The order of a step (forward, with the labels
// checked and the input set, then backward, then the update, each refusing
// to run out of that order), the loss's two halves on plain logits, and the
// profile are this class's. A backend supplies only what differs: its
// TrainLayers functions (each layer's calls in every direction), where its
// input goes, its parameters and its update. On it: the im2col and own
// steps (train.cpp), oneDNN's (train_onednn.cpp) and the recipe's naive one
// (examples/train_backend.cpp). Internal to kernels/nn and its examples.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_walk.h"

namespace dlb::nn {

class WalkedStep : public TrainStep, protected TrainLayers {
 public:
  double forward(const float* x, const std::uint8_t* labels) final;
  void backward() final;
  void update() final;
  std::vector<std::pair<std::string, double>> profile(const float* x, const std::uint8_t* labels,
                                                      int steps) final;

  std::int64_t batch() const final { return batch_; }
  const Sgd& sgd() const final { return sgd_; }
  const std::vector<TrainParam>& params() const final { return params_; }
  std::span<const float> log_probs() const final { return log_probs_; }

 protected:
  // `who` names the step in its errors ("training step", "training step
  // cpu_naive"). Throws dlb::Error for a batch below 1 or a network
  // train_flow refuses.
  WalkedStep(const Network& net, std::int64_t batch, Sgd sgd, std::string who);

  // The last line of a backend's constructor, once its buffers are made:
  // the walk calls its functions and keeps their calls.
  void walk() { walk_ = walk_train(net_, flow_, *this); }

  // The loss's halves for a backend's loss(), on the logits plain
  // [batch, classes] (classes: the logits layer's out_size): forward, the
  // log-softmax into log_probs and the mean NLL of the step's labels;
  // backward, (softmax - onehot) / batch into dlogits.
  void loss_forward(const float* logits);
  void loss_backward(float* dlogits) const;

  // What differs between the backends. set_input: before each forward, x
  // as forward got it. before_call: before each forward, backward and
  // update (oneDNN writes back parameters changed through param()).
  // gradients_changed: after each backward (oneDNN drops its plain copies).
  // apply_sgd: SGD with momentum over every parameter (train.h).
  virtual void set_input(const float* x) = 0;
  virtual void before_call() {}
  virtual void gradients_changed() {}
  virtual void apply_sgd() = 0;
  // A backend that splits its calls' time by the kind of work in them
  // (profile's op_us.<kind>): time_parts(true) before the profiled steps,
  // (false) after; parts(steps), each kind's time per step in microseconds.
  virtual void time_parts(bool /*on*/) {}
  virtual std::vector<std::pair<std::string, double>> parts(int /*steps*/) const { return {}; }

  const Network& net_;
  std::int64_t batch_;
  Sgd sgd_;
  std::string who_;
  std::vector<TrainParam> params_;
  TrainFlow flow_;  // the walk's analysis of the network: logits, readers, first writers
  TrainWalk walk_;  // the calls, made once by walk()
  const std::uint8_t* labels_ = nullptr;
  std::vector<float> log_probs_;  // [batch, classes]
  double loss_ = 0;

 private:
  bool forward_done_ = false, backward_done_ = false;
};

// A step that keeps every parameter, its gradient and its momentum as one
// plain vector each, in PyTorch's layout (the im2col, own and naive steps).
class PlainParamsStep : public WalkedStep {
 public:
  std::span<const float> param(std::size_t i) const final { return p_.at(i); }
  std::span<float> param(std::size_t i) final { return p_.at(i); }
  std::span<const float> grad(std::size_t i) const final { return g_.at(i); }
  std::span<const float> velocity(std::size_t i) const final { return v_.at(i); }

 protected:
  // The parameters copied from the network, gradients and momentum zero.
  PlainParamsStep(const Network& net, std::int64_t batch, Sgd sgd, std::string who);
  void apply_sgd() final;
  // The three vectors' bytes into weights, gradients and optimizer.
  void count_params(TrainMemory& m) const;
  // Parameter i's values (i: an index of params(), as a layer holds it).
  float* p(int i) { return p_[static_cast<std::size_t>(i)].data(); }
  float* g(int i) { return g_[static_cast<std::size_t>(i)].data(); }

  std::vector<std::vector<float>> p_, g_, v_;  // per parameter
};

}  // namespace dlb::nn
