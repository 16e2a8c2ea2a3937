// A training step's memory as the training cases report it (issue 35): the
// step's own accounting of its buffers (nn::TrainStep::memory, each part
// the sum of the sizes it allocated) and the peak of the host heap measured
// while a step is made and run (alloc_counter.h).
#pragma once

#include <cstdint>

#include "kernels/nn/train/train_variants.h"

namespace benchmark {
class State;
}

namespace dlb::bench {

// The most the process's live heap bytes rose above where they stood while
// a fresh step of `net` at `batch` (the committed weights, nn::Sgd{}) was
// built and ran `steps` steps on x and labels, its buffers freed at the
// end: the step's buffers (what TrainStep::memory accounts for) plus what
// its calls allocate and free on their way (Eigen's GEMM packing blocks,
// oneDNN's inner product's packing, libgomp's and the libraries' own
// first-use allocations), each chunk at its usable size. -1 where the
// counting allocator is not in the binary (alloc_counting). Meant for a
// point where no other thread allocates (the OpenMP threads the step itself
// uses aside). `accounted`, where given: that step's own accounting
// (TrainStep::memory), which is what the peak measures: a step that picks
// its kernels by timing them (cpu_onednn_wino) may pick others than a step
// made before it, with other scratchpads.
std::int64_t measured_step_peak(const nn::Network& net, std::int64_t batch, const nn::TrainVariant& row, const float* x,
                                const std::uint8_t* labels, int steps = 2, nn::TrainMemory* accounted = nullptr);

// The memory counters of a CPU training case, their names stable (the
// tables and PyTorch's peers read them): peak_bytes (m.total()),
// weights_bytes, activations_bytes (kept by forward for backward),
// gradients_bytes, optimizer_bytes (momentum), workspace_bytes (everything
// else the step holds: backward's gradient buffers, im2col and its
// gradient, partial sums, oneDNN's scratchpad and workspaces), and
// peak_measured_bytes (measured_step_peak; left out where it is -1).
void set_memory_counters(benchmark::State& state, const nn::TrainMemory& m, std::int64_t measured);

}  // namespace dlb::bench
