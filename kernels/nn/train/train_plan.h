// The GPU training step's schedule (train_gpu.h), apart from the device:
// where every buffer of the step lives (one arena each for the parameters,
// their gradients, the momentum buffers, the kept activations, the pool
// routes), and the sequence of operations of forward, backward and the
// update, expressed as calls on a TrainOps backend. The GPU backend
// (train_gpu.cpp) runs them as cuDNN and cuBLAS calls and own kernels
// (train_gpu_kernels.cu); the host twin (TwinTrainStep, below) runs the own
// kernels' arithmetic (train_gpu_math.h) over every element on the host
// and the library calls as plain fp32 loops, so that the CPU tests check
// the schedule and the kernels' arithmetic of a whole step without a GPU.
//
// The schedule, for layers in execution order each reading an earlier
// one's output (or the input): conv (+bias) (+batch-norm in training mode)
// (+residual join) (+ReLU), max_pool, global_avg_pool, fc (+ReLU) and a
// final log_softmax (what trainable_params accepts: mnist_cnn, mnist_lenet,
// resnet20):
//   forward   conv: the library's convolution, then BiasAct (bias, the
//             join's add and ReLU in one pass); with batch-norm: the
//             convolution into the layer's z (its bias there by BiasAct),
//             BnStats (the batch's statistics, the running statistics'
//             update), BnApply (scale, shift, the join's add, ReLU); fc: the
//             library's GEMM, then BiasAct; max_pool with routes;
//             global_avg_pool; the loss: LogSoftmaxNll per row
//   backward  NllGrad; then from the last layer down: conv and fc: ReluBack
//             (unless the pool above already masked), AddGrad (the join:
//             the gradient also flows to the joined layer), with
//             batch-norm BnBackStats (dgamma, dbeta and the means) and
//             BnBackData (dz, in place), the weight gradient (library),
//             BiasGrad, the input gradient (library, not for a layer
//             reading the input); max_pool: MaxPoolBack, a gather that
//             applies the ReLU mask of the layer below in the same pass;
//             global_avg_pool: AvgPoolBack. Where several layers read one
//             output (resnet20's forks), the first of them in backward
//             order writes its gradient and the others add to it (the
//             library's beta = 1, AddGrad's add): only a conv or the join
//             may add, a pool or an fc sharing its input is refused by name.
//             Each layer's output gradient has one of a few buffers
//             (dbuf_count(), as the CPU step shares its buffers: layers whose
//             gradients are not live at the same time share one)
//   update    Sgd over the whole parameter arena in one pass (the padding
//             between tensors is zero in all three arenas and stays zero)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_gpu_math.h"
#include "kernels/nn/train/train_walk.h"

namespace dlb::nn {

// Where a step's time goes (the profile: GpuTrainStep::profile,
// TwinTrainStep::profile). The plan marks each stretch of a phase's
// operations with the layer and the part of it they do; `end` closes a
// phase (forward, backward, update). A layer's parts, in the order the
// plan runs them:
//   forward              conv/fc: the library's call and BiasAct (bias,
//                        join, ReLU; with batch-norm only the bias); a
//                        pool's kernel; the log_softmax layer: the loss
//                        (LogSoftmaxNll)
//   batch_norm           BnStats and BnApply (scale, shift, the join's
//                        add, ReLU)
//   backward_data        the gradient through the layer to its input:
//                        before batch-norm's backward, the ReLU mask and
//                        the join's gradient (ReluBack, AddGrad); after the
//                        weights, the library's data gradient; a pool's
//                        backward; the log_softmax layer: NllGrad. Marked
//                        for every conv and fc, also where nothing runs
//                        (the first layer's data gradient; a mask the
//                        pool above applies): about 0 there
//   batch_norm_backward  BnBackStats and BnBackData
//   backward_weights     the library's weight gradient and BiasGrad
//   update               Sgd over the whole parameter arena (the layer is
//                        the last one's: the update is no layer's)
enum class TrainPart : int { forward, batch_norm, backward_data, batch_norm_backward, backward_weights, update, end };
const char* train_part_name(TrainPart part);
// A profile's counter of one part: "layer_us.<i>.<part>" (i the index of
// the network's layer, as the layer profiles' layer:<i> and gpu_onekernel's
// layer_us.<i>), "update_us" for the update.
std::string train_part_counter(std::size_t layer, TrainPart part);

// One mark of a profiled step: the time (us, from any fixed origin) at
// which the stretch of `part` of `layer` starts (or a phase ends).
struct TrainStamp {
  std::size_t layer = 0;
  TrainPart part = TrainPart::end;
  double us = 0;
};
// The counters of profiled steps (each the same sequence of marks): per
// layer and part (train_part_counter) the median over the steps of its
// time, a stretch lasting to the next mark and a part's stretches in one
// step added; "profiled_us", the median of a step's stretches together
// (the phases' ends to the next phase's start are not in it), and
// "profile_steps". In layer order, each layer's parts in TrainPart's
// order, then update_us. Throws dlb::Error for no steps, steps whose marks
// differ, a step that does not end with `end`, or times out of order.
std::vector<std::pair<std::string, double>> train_profile_counters(std::span<const std::vector<TrainStamp>> steps);

// What a backend runs. Pointers are into the backend's memory (device or
// host); layer i of the network, l its description; batch from the plan.
class TrainOps {
 public:
  virtual ~TrainOps() = default;
  // The operations from here to the next mark are `part` of layer `layer`
  // (TrainPart; `end`: the phase ends). Backends that do not profile
  // ignore it.
  virtual void mark(std::size_t layer, TrainPart part) {
    (void)layer;
    (void)part;
  }
  // Convolution without bias: y = conv(x, w); dw = the filter gradient
  // from x and dy; dx = the data gradient from w and dy (overwritten).
  virtual void conv_forward(std::size_t i, const Layer& l, const float* x, const float* w, float* y) = 0;
  virtual void conv_backward_filter(std::size_t i, const Layer& l, const float* x, const float* dy, float* dw) = 0;
  virtual void conv_backward_data(std::size_t i, const Layer& l, const float* w, const float* dy, float* dx,
                                  bool accumulate) = 0;
  // fc: y [batch, k] = x [batch, in] W^T; dW [k, in] = dY^T X; dX = dY W.
  virtual void fc_forward(std::size_t i, const Layer& l, const float* x, const float* w, float* y) = 0;
  virtual void fc_backward_weights(std::size_t i, const Layer& l, const float* x, const float* dy, float* dw) = 0;
  virtual void fc_backward_data(std::size_t i, const Layer& l, const float* w, const float* dy, float* dx,
                                bool accumulate) = 0;
  // accumulate: dx += the data gradient (another reader's gradient is already there).
  // The own kernels: one element function of train_gpu_math.h over `count` elements.
  virtual void run(const tg::BiasAct& p) = 0;
  virtual void run(const tg::MaxPool& p) = 0;
  virtual void run(const tg::MaxPoolBack& p) = 0;
  virtual void run(const tg::ReluBack& p) = 0;
  virtual void run(const tg::AvgPool& p) = 0;
  virtual void run(const tg::AvgPoolBack& p) = 0;
  virtual void run(const tg::LogSoftmaxNll& p) = 0;
  virtual void run(const tg::NllGrad& p) = 0;
  virtual void run(const tg::BiasGrad& p) = 0;  // one block per channel (kBiasGradThreads)
  virtual void run(const tg::Sgd& p) = 0;
  virtual void run(const tg::BnStats& p) = 0;      // one block per slice of a channel (kBnThreads)
  virtual void run(const tg::BnApply& p) = 0;
  virtual void run(const tg::BnBackStats& p) = 0;  // one block per slice of a channel (kBnThreads)
  virtual void run(const tg::BnBackData& p) = 0;
  virtual void run(const tg::AddGrad& p) = 0;
};

// The base pointers of the step's memory, as the backend allocated it with
// the plan's sizes.
struct TrainArenas {
  float* params = nullptr;     // TrainPlan::param_floats()
  float* grads = nullptr;      // the same layout
  float* velocity = nullptr;   // the same layout
  float* acts = nullptr;       // act_floats(): every layer's output (and z where batch-norm), the log-probabilities
  std::uint8_t* routes = nullptr;  // route_bytes(): the max pools' routes
  double* loss = nullptr;      // batch: each row's negative log-likelihood
  float* dbuf = nullptr;       // dbuf_count() x dbuf_floats(): backward's gradients
  float* bn = nullptr;         // bn_floats(): each batch-norm layer's statistics [kBnStats, k]
  float* running = nullptr;    // running_floats(): each batch-norm layer's running mean and var [2, k]
  double* bn_parts = nullptr;  // bn_part_doubles(): the slices' sums of one batch-norm layer at a time
};

class TrainPlan {
 public:
  // Throws dlb::Error for a batch below 1 or what trainable_params rejects.
  TrainPlan(const Network& net, std::int64_t batch);

  const Network& network() const { return net_; }
  std::int64_t batch() const { return batch_; }
  const std::vector<TrainParam>& params() const { return params_; }
  std::int64_t classes() const { return net_.layers[logits_].out_size(); }

  // Sizes of the arenas, in elements. Each tensor starts at a multiple of
  // kAlign floats (128 bytes: what cuDNN and cuBLAS read fastest).
  static constexpr std::int64_t kAlign = 32;
  std::int64_t param_floats() const { return param_floats_; }
  std::int64_t param_offset(std::size_t j) const { return param_offset_.at(j); }
  std::int64_t act_floats() const { return act_floats_; }
  std::int64_t route_bytes() const { return route_bytes_; }
  std::int64_t dbuf_floats() const { return dbuf_floats_; }
  std::int64_t dbuf_count() const { return dbuf_count_; }
  std::int64_t bn_floats() const { return bn_floats_; }
  std::int64_t running_floats() const { return running_floats_; }
  // The batch-norm sums' scratch: [2, k, slices] doubles for the layer that
  // needs the most (tg::bn_slices; 0 where no layer has more than one
  // slice). The layers' sums run one after another on the step's stream, so
  // they share it.
  std::int64_t bn_part_doubles() const { return bn_part_doubles_; }
  // The slices of layer i's batch-norm sums (tg::bn_slices of batch * plane; 0 without batch-norm).
  std::int64_t bn_slices(std::size_t i) const { return bn_slices_.at(i); }
  // Where layer i's output (or, for a pool, its routes; with batch-norm,
  // the conv's output z, its statistics, its running statistics) is in its
  // arena; -1 for none.
  std::int64_t out_offset(std::size_t i) const { return out_offset_.at(i); }
  std::int64_t z_offset(std::size_t i) const { return z_offset_.at(i); }
  std::int64_t bn_offset(std::size_t i) const { return bn_offset_.at(i); }
  std::int64_t running_offset(std::size_t i) const { return running_offset_.at(i); }
  // The parameter index of layer i's weight (-1: none).
  int weight_param(std::size_t i) const { return weight_of_.at(i); }
  std::int64_t route_offset(std::size_t i) const { return route_offset_.at(i); }
  std::int64_t logp_offset() const { return logp_offset_; }
  std::size_t logits_layer() const { return logits_; }
  // The parameters' initial values in the arena's layout (zeros between tensors).
  std::vector<float> initial_params() const;
  // The running statistics' initial values (the network's; mean 0 and var 1
  // where it has none) in their arena's layout.
  std::vector<float> initial_running() const;
  // The bytes of the plan's own buffers (the backend adds its workspace).
  TrainMemory memory() const;

  // x: [batch, c, h, w], labels: [batch] (checked by the caller:
  // check_labels), both in the backend's memory, valid until backward is
  // enqueued. Enqueue forward (the loss into arenas.loss), backward, update.
  void forward(TrainOps& ops, const TrainArenas& a, const float* x, const std::uint8_t* labels) const;
  void backward(TrainOps& ops, const TrainArenas& a, const float* x, const std::uint8_t* labels) const;
  void update(TrainOps& ops, const TrainArenas& a, const Sgd& sgd) const;

 private:
  const float* input_of(const TrainArenas& a, const float* x, std::size_t i) const;
  float* out(const TrainArenas& a, std::size_t i) const { return a.acts + out_offset_[i]; }
  float* grad_of(const TrainArenas& a, int layer) const {
    return a.dbuf + dbuf_of_[static_cast<std::size_t>(layer)] * dbuf_floats_;
  }
  float* param(float* arena, int j) const { return j < 0 ? nullptr : arena + param_offset_[static_cast<std::size_t>(j)]; }
  // The layer the loss is marked on (the log_softmax layer; the logits' where there is none).
  std::size_t loss_layer() const {
    return net_.layers.back().kind == LayerKind::log_softmax ? net_.layers.size() - 1 : logits_;
  }
  void assign_gradient_buffers();
  struct Layers;  // its functions for the training walk (train_walk.h)

  const Network& net_;
  std::int64_t batch_;
  std::vector<TrainParam> params_;
  TrainFlow flow_;
  std::vector<int> weight_of_, bias_of_, gamma_of_, beta_of_;  // per layer: parameter index or -1
  std::vector<std::int64_t> param_offset_, out_offset_, route_offset_, z_offset_, bn_offset_, running_offset_, bn_slices_;
  std::vector<std::int64_t> dbuf_of_;  // per layer: the buffer of its output's gradient
  std::vector<char> pool_masks_;  // per layer: the max pool reading it applies its ReLU mask in its backward
  std::int64_t param_floats_ = 0, act_floats_ = 0, route_bytes_ = 0, dbuf_floats_ = 0, dbuf_count_ = 0;
  std::int64_t bn_floats_ = 0, running_floats_ = 0, bn_part_doubles_ = 0, logp_offset_ = 0;
  std::size_t logits_ = 0;
};


// The GPU step's host twin: the plan on host memory, the own kernels'
// arithmetic (train_gpu_math.h) run over every element in order, the
// convolutions and GEMMs as plain fp32 loops (sums in the order of their
// loops: within the same bound, nn::gradient_tolerance, as cuDNN's and
// cuBLAS's sums). Single-threaded; for the tests.
class TwinTrainStep {
 public:
  TwinTrainStep(const Network& net, std::int64_t batch, Sgd sgd);
  ~TwinTrainStep();
  // x, labels: host memory. Returns the mean loss.
  double forward(const float* x, const std::uint8_t* labels);
  void backward();
  void update();
  const TrainPlan& plan() const;
  std::span<const float> param(std::size_t j) const;
  std::span<const float> grad(std::size_t j) const;
  std::span<const float> velocity(std::size_t j) const;
  std::span<const float> log_probs() const;
  // A layer's batch-norm running statistics (empty without batch-norm).
  std::span<const float> running_mean(std::size_t layer) const;
  std::span<const float> running_var(std::size_t layer) const;
  // `steps` whole steps (forward, backward, update: they change the
  // parameters) on x and labels with every mark stamped by the host's
  // steady clock, and their counters (train_profile_counters), as
  // GpuTrainStep::profile reports the GPU's.
  std::vector<std::pair<std::string, double>> profile(const float* x, const std::uint8_t* labels, int steps);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlb::nn
