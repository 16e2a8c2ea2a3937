// Per-thread scratch for the CPU kernels (the conv kernels' transformed
// tiles, partial sums, padded copies): one zeroed buffer per OpenMP thread,
// allocated when a kernel is made (outside the timed call).
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/buffer.h"

namespace dlb {

// Kernels that never run at once (a network's layers, a training step's
// calls) may share one: each reserves what it needs when it is made, and
// the buffers are as large as the largest need, not the sum of them.
class ThreadScratch {
 public:
  explicit ThreadScratch(std::int64_t floats_per_thread = 0) : threads_(omp_get_max_threads()) {
    buffers_.resize(static_cast<std::size_t>(threads_));
    reserve(floats_per_thread);
  }
  // Grows every thread's buffer to at least `floats_per_thread` (zeroed);
  // the pointers of() gave before are then invalid. Not while a kernel runs.
  void reserve(std::int64_t floats_per_thread) {
    if (floats_per_thread <= floats_) return;
    floats_ = floats_per_thread;
    for (auto& b : buffers_) {
      b = HostBuffer<float>(static_cast<std::size_t>(floats_));
      std::fill(b.span().begin(), b.span().end(), 0.0f);
    }
  }
  // The thread count the run's parallel regions use (num_threads), so that
  // omp_get_thread_num() always has its buffer.
  int threads() const { return threads_; }
  float* of(int thread) { return buffers_[static_cast<std::size_t>(thread)].data(); }
  // Every thread's buffer together, in bytes.
  std::int64_t bytes() const { return threads_ * floats_ * static_cast<std::int64_t>(sizeof(float)); }

 private:
  int threads_;
  std::int64_t floats_ = 0;
  std::vector<HostBuffer<float>> buffers_;
};

}  // namespace dlb
