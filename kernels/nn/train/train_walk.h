// The training direction of the walk (infer/walk.h is the inference
// direction): one piece of code owns the loop over the layers, in order
// forward and from the logits down backward, what each layer's backward
// writes (which gradient, written or added to), the loss at the end and the
// order of the calls. A training backend supplies only what differs: one
// function per layer kind that prepares that layer in every direction and
// returns its calls, as the inference backends' one function per kind
// returns the call of that layer. by_kind (model/network.h) is the switch;
// adding a layer kind adds one function to each training backend, both
// directions at once.
//
// The directions are benchdnn's: forward training (the output, keeping what
// backward needs), backward data (bwd_d: the input's gradient, and the
// residual's) and backward weights (bwd_w: the parameters' gradients). A
// backend that makes both backward gradients in one pass over the data (the
// im2col step's chunk loop, benchdnn's BWD_DW) gives that pass as
// `backward`, and the profile names it so.
//
// The backends on it: the im2col and own-kernel step (train.cpp), oneDNN's
// primitives (train_onednn.cpp), the GPU schedule and its host twin
// (train_plan.cpp). Internal to kernels/nn.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/variant.h"
#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train_params.h"

namespace dlb::nn {

// What the walk works out once from the network, for every backend: which
// layer the logits are (the last before a final log_softmax, which is the
// loss), who reads each output, and per layer what its backward writes.
struct TrainFlow {
  std::size_t logits = 0;
  // Per layer up to the logits: how many layers read its output (as input
  // or residual); whether its output's gradient is needed (it, or a layer
  // it reads, has parameters); the backward step that writes that gradient
  // first, backward running from the logits down (its reader of the
  // largest index; logits + 1 for the logits, written by the loss; -1:
  // not needed).
  std::vector<int> readers;
  std::vector<bool> needed;
  std::vector<int> first_write;
};
// Throws dlb::Error for a network that is only a log_softmax.
TrainFlow train_flow(const Network& net);

// What a layer's functions are handed: its place, and what its backward
// writes: its input's gradient (need_dx: the input is a layer whose
// gradient is needed), added to what a later reader wrote there
// (add_to_input) or written; the same for its residual.
struct TrainIo {
  std::size_t index = 0;
  bool need_dx = false;
  bool add_to_input = false;
  bool need_dres = false;
  bool add_to_residual = false;
};

// A layer's calls, one per direction, made once at prepare time; an empty
// one has nothing to do (a max pool that its conv runs, a layer whose
// input's gradient is not needed).
struct TrainCalls {
  Run forward;           // forward training
  Run backward;          // bwd_w and bwd_d in one pass (BWD_DW)
  Run backward_weights;  // bwd_w: the parameters' gradients (and, first, what both need: ReLU's mask, the join, batch-norm's backward)
  Run backward_data;     // bwd_d: the input's gradient (and the residual's)
};

// A layer's calls in the three directions, its backward data kept only
// where io says its input's gradient is needed.
TrainCalls layer_calls(const TrainIo& io, Run forward, Run backward_data, Run backward_weights = {});

// A training backend: one function per layer kind, called once per layer
// of that kind in network order at prepare time, and the loss. log_softmax
// is never asked of it: a network's log_softmax is its last layer, and the
// loss (trainable_params refuses one elsewhere).
class TrainLayers {
 public:
  virtual ~TrainLayers() = default;
  virtual TrainCalls conv(const Layer& l, const TrainIo& io) = 0;
  virtual TrainCalls fc(const Layer& l, const TrainIo& io) = 0;
  virtual TrainCalls max_pool(const Layer& l, const TrainIo& io) = 0;
  virtual TrainCalls global_avg_pool(const Layer& l, const TrainIo& io) = 0;
  // The loss on the logits layer's output: forward, log-softmax and the
  // mean negative log-likelihood; backward_data, its gradient
  // (softmax - onehot) / batch into the logits' gradient.
  virtual TrainCalls loss(const TrainIo& logits) = 0;
};

// A step's calls in the walk's order.
struct TrainWalk {
  std::vector<TrainCalls> layers;  // per layer up to the logits
  TrainCalls loss;

  // Every layer's forward in order, then the loss's.
  void forward() const;
  // The loss's gradient, then every layer's backward from the logits down
  // (each: backward, backward_weights, backward_data).
  void backward() const;
  // The step's calls one at a time, each with its counter name
  // ("layer_us.<i>.forward", ".backward", ".backward_weights",
  // ".backward_data"; the loss's as the layer after the logits), in the
  // order forward() then backward() runs them: what a profile times.
  std::vector<std::pair<std::string, Run>> timed_calls() const;
};

// Walks `net` once: by_kind on every layer up to the logits, then the loss.
TrainWalk walk_train(const Network& net, const TrainFlow& flow, TrainLayers& backend);

// TrainStep::profile's counters for a CPU step on the walk: `steps` whole
// steps, each of w.timed_calls() timed alone on the host clock, then
// `update` (timed as update_us); per counter the median over the steps, in
// microseconds, with profiled_us (the medians' sum) and profile_steps.
// The step's input must be set. Throws dlb::Error for steps below 1.
std::vector<std::pair<std::string, double>> profile_walk(const TrainWalk& w, int steps, const Run& update);

// Backward's gradient buffers, shared between layers whose gradients are
// not live at once (every step on the walk): layer j's
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

// Throws dlb::Error naming the first image whose label is not a class of
// `net` (every step checks a batch's labels on the host; the GPU kernels
// cannot throw).
void check_labels(const Network& net, const std::uint8_t* labels, std::int64_t batch);

// The loss's gradient on the logits, (softmax - onehot) / batch, from the
// log-probabilities [batch, classes] into dy.
void nll_gradient(const float* log_probs, const std::uint8_t* labels, std::int64_t batch, std::int64_t classes,
                  float* dy);

// SGD with momentum (train.h) over n contiguous parameters, their
// gradients and momentum buffers: v = momentum v + (g + weight_decay p);
// p -= lr v. Threads over the elements where n is large.
void sgd_update(float* p, const float* g, float* v, std::int64_t n, const Sgd& sgd);

}  // namespace dlb::nn
