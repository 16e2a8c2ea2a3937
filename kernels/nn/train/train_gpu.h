// The fp32 training step on the GPU (issue 35): the schedule of
// train_plan.h on device memory, with
//   - convolutions by cuDNN: forward, backward data, backward filter, each
//     algorithm chosen by timing on the step's own buffers among those that
//     keep the fp32 bound (CUDNN_FMA_MATH on the descriptor: no TF32; no
//     tensor-op algorithm; backward: deterministic algorithms (the
//     non-deterministic ones only where none runs, said in algorithms()),
//     no nonfused Winograd on filters other than 3x3, as the forward's
//     cudnn_fp32_tolerance), as the inference rows' gpu_cudnn chooses its
//     forward algorithms (cudnn_search_fp32_algorithm);
//   - fc layers by cublasSgemm with CUBLAS_PEDANTIC_MATH (no TF32, no
//     reduced-precision reductions): forward, weight and input gradients;
//   - own kernels (train_gpu_kernels.cu) for the rest, one thread per
//     element of train_gpu_math.h's functions, which the CPU tests run on
//     the host over whole steps (TwinTrainStep): bias + ReLU, max pool with
//     routes and its gather backward (with the ReLU mask of the conv below),
//     ReLU backward, global average pool and its backward, log-softmax +
//     NLL per row, its gradient, bias gradients (a block per channel),
//     batch-norm in training mode (the batch's statistics with sums in
//     double, a block per slice of a channel and a kernel combining the
//     slices in order; normalize, scale, shift, the residual
//     join's add and ReLU in one pass; backward's sums and dz; the running
//     statistics' update), the residual join's gradient, SGD with momentum
//     over the whole parameter arena in one pass.
// Every call only enqueues on the step's stream, except where it says it
// waits. The loss stays on the device (per row) until loss() asks for it.
//
// Supported: what trainable_params accepts (mnist_cnn, mnist_lenet,
// resnet20 with batch-norm in training mode, identity and projection
// joins, as the CPU step); others throw dlb::Error naming the layer.
//
// Built with CUDA and cuDNN only; unverified on hardware until a GPU run
// (docs/training.md lists what the next device run checks).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train.h"

struct CUstream_st;

namespace dlb::nn {

// How a step's work reaches the GPU: every call launched one by one
// (eager), or captured once into CUDA graphs and replayed without the
// host's per-launch cost: step() as one graph (forward, backward and update
// in one launch), forward(), backward() and update() called apart as one
// graph per phase. A graph is made per input (x, labels) it is given (two
// inputs for double buffering: two graphs): the first call for an input runs
// eagerly and waits, then captures the graph the later calls launch.
enum class GpuLaunch { eager, graph };

class GpuTrainStep {
 public:
  // Allocates everything the step holds on the device, copies the network's
  // parameters there, chooses the cuDNN algorithms (timing them: synchronous).
  // Throws dlb::Error for an unsupported network or a batch below 1.
  GpuTrainStep(const Network& net, std::int64_t batch, Sgd sgd, CUstream_st* stream,
               GpuLaunch launch = GpuLaunch::eager);
  ~GpuTrainStep();
  GpuTrainStep(const GpuTrainStep&) = delete;
  GpuTrainStep& operator=(const GpuTrainStep&) = delete;

  // x: device [batch, c, h, w]; labels: device [batch], each checked on the
  // host beforehand (check_labels in train_plan.h: a kernel cannot throw; a
  // label out of range gives a NaN loss, never an out-of-bounds read). Both
  // must stay valid until backward() has run on the stream (with graphs:
  // as long as the step, which keeps graphs that read them).
  void forward(const float* x, const std::uint8_t* labels);
  void backward();  // throws if no forward came before
  void update();    // throws if no backward came before
  // forward, backward and update; with GpuLaunch::graph one graph launch.
  void step(const float* x, const std::uint8_t* labels);
  // With GpuLaunch::graph: makes step()'s graph for this input now, so that
  // a timed loop starts with it, and leaves the step as it was: the eager
  // first call a capture needs trains, and the parameters, momentum and
  // batch-norm running statistics it changed are put back (waits). x and
  // labels as for forward(); their values do not matter. Eager: nothing.
  void prepare(const float* x, const std::uint8_t* labels);
  GpuLaunch launch() const;
  // The mean loss of the last forward (waits for the stream).
  double loss() const;
  // Enqueues a copy of the last forward's loss per row ([batch] doubles;
  // their mean, summed in row order, is loss()) into `host`, which must
  // stay valid until the stream has run it (page-locked, for the copy not
  // to wait). Does not wait: an epoch keeps every step's losses this way.
  void copy_loss_rows(double* host) const;
  // Overwrites trainable tensor i (params() order) with `values`, which
  // must have its size (waits). The momentum buffers are left as they are.
  void set_param(std::size_t i, std::span<const float> values);
  // Where the step's time goes, for outside any timed loop: `steps` whole
  // steps on x and labels (they change the parameters, as steps do), each
  // launched call by call whatever the GpuLaunch (a graph has no marks),
  // the stream held (stream_hold.h) until the whole step is enqueued, a
  // CUDA event recorded at every mark of the plan (TrainPart: a layer's
  // forward, batch_norm, backward_data, batch_norm_backward,
  // backward_weights; the update), and their counters
  // (train_profile_counters: layer_us.<i>.<part>, update_us, profiled_us,
  // profile_steps). Waits. Throws dlb::Error for steps below 1 or where the
  // host took longer than the hold's second to enqueue a step.
  std::vector<std::pair<std::string, double>> profile(const float* x, const std::uint8_t* labels, int steps);

  std::int64_t batch() const;
  CUstream_st* stream() const;
  const std::vector<TrainParam>& params() const;
  // A tensor's values, gradient, momentum buffer, copied to the host (waits).
  std::vector<float> param(std::size_t i) const;
  std::vector<float> grad(std::size_t i) const;
  std::vector<float> velocity(std::size_t i) const;
  // A conv layer's batch-norm running statistics as the forwards so far
  // left them (waits); empty for a layer without batch-norm.
  std::vector<float> running_mean(std::size_t layer) const;
  std::vector<float> running_var(std::size_t layer) const;
  // The last forward's log-probabilities, [batch, classes] (waits).
  std::vector<float> log_probs() const;
  // The step's own device buffers as TrainMemory splits them (workspace:
  // backward's gradient buffers, batch-norm's slice sums and the largest
  // cuDNN workspace).
  TrainMemory memory() const;
  // Device memory the constructor took at its peak, counted from this
  // process's own allocations (kernels/common/device_bytes.h): its buffers,
  // the cuDNN workspace and the algorithm search's temporary workspaces;
  // not what the cuDNN and cuBLAS handles allocate inside themselves.
  // Other processes on the GPU do not change it.
  std::int64_t measured_bytes() const;
  // The cuDNN algorithms chosen, per conv layer: "conv1 fwd IMPLICIT_PRECOMP_GEMM, bwd data 1, bwd filter 1; ...".
  std::string algorithms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlb::nn
