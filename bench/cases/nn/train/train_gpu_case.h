// One network's GPU training step at one batch size (kernels/nn/train/train_gpu.h;
// its launches one by one, or the whole step as one CUDA graph: nn::GpuLaunch), with
// the batch copied from the host each step in one of three ways:
//   pageable  cudaMemcpyAsync from pageable host memory on the step's
//             stream, before the step (the driver stages it: the call
//             returns once the data is staged)
//   pinned    cudaMemcpyAsync from page-locked memory on the step's stream,
//             before the step
//   overlap   from page-locked memory on a second stream, the next batch
//             into a second device buffer while the step runs (double
//             buffering, as a loader with pin_memory and non_blocking
//             copies); the step waits only for what is left of the copy
// The committed weights, the first `batch` Fashion-MNIST training images and
// their labels (no augmentation): each step copies and trains on the same
// batch. Validation (before any timing) copies the batch the case's way, runs
// forward and backward once and compares every parameter's gradient with the
// double-precision reference (reference/nn/train/train.h) within the row's bound
// (nn::TrainVariant::tolerance); the reference is computed once per network
// and batch in a process.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/device_bytes.h"
#include "kernels/common/gpu.h"
#include "kernels/nn/train/train_gpu.h"
#include "kernels/nn/train/train_variants.h"
#include "reference/compare.h"

namespace dlb {

enum class H2d { pageable, pinned, overlap };
const char* h2d_name(H2d mode);

class GpuTrainCase {
 public:
  // `row`: a GPU row of nn::train_variants(), which outlives the case.
  GpuTrainCase(std::string_view network, std::int64_t batch, H2d mode, const nn::TrainVariant& row);
  ref::Comparison validate();
  const ExecContext& context() const { return ctx_; }
  nn::GpuTrainStep& step() { return *step_; }
  std::int64_t batch() const { return batch_; }
  H2d mode() const { return mode_; }

  // What one timed step's events measured, in seconds.
  struct Times {
    double h2d = 0;          // the copy itself (overlap: on the second stream)
    double h2d_exposed = 0;  // the step's stream from its start to the batch being there
    // Each phase's events; none where the step is one graph launch (the
    // profile's counters split it).
    bool phases = true;
    double forward = 0, backward = 0, optimizer = 0;
    double total = 0;        // the step's stream, start to end
  };
  // One step: the batch in (the case's way), forward, backward, update;
  // waits for it and returns its events' times.
  Times run();
  // Where a step's time goes, per layer and part (nn::GpuTrainStep::profile:
  // `steps` steps launched call by call with an event at every mark, the
  // stream held while each is enqueued), on the batch the case's steps
  // read; for after the timed loop, never inside it. Waits.
  std::vector<std::pair<std::string, double>> profile(int steps);
  // The arithmetic of one step, as the CPU cases count it (nn::train_step_flops).
  double flops_per_step() const;
  // The device buffers of the input: one batch (two for overlap).
  std::int64_t input_bytes() const;
  // Device memory the case took at its peak, from setting it up to the end
  // of its first validation step, counted from this process's own device
  // allocations (kernels/common/device_bytes.h): the step's buffers and
  // workspaces and the input buffers; not what the cuDNN and cuBLAS
  // handles allocate inside themselves, nor the CUDA context. Other
  // processes on the GPU do not change it.
  std::int64_t measured_bytes() const { return measured_bytes_; }

 private:
  void copy_next(cudaStream_t stream, int into);  // the batch into device buffer `into`

  ExecContext ctx_;
  const nn::Network& net_;
  std::int64_t batch_;
  H2d mode_;
  const nn::TrainVariant& row_;
  std::vector<float> x_;                 // pageable
  std::vector<std::uint8_t> labels_;
  PinnedBuffer<float> x_pinned_;
  PinnedBuffer<std::uint8_t> labels_pinned_;
  DeviceBuffer<float> x_dev_[2];
  DeviceBuffer<std::uint8_t> labels_dev_[2];
  Stream copy_stream_;
  Event copy_start_[2], copy_done_[2];  // overlap: around the copy into each device buffer, on copy_stream_
  std::vector<Event> marks_;            // on the step's stream: start, batch in, forward, backward, update
  int current_ = 0;                     // overlap: the device buffer the next step reads
  std::unique_ptr<nn::GpuTrainStep> step_;
  std::unique_ptr<DeviceBytePeak> watch_;  // from the constructor to the first validate()
  std::int64_t measured_bytes_ = 0;
};

}  // namespace dlb
