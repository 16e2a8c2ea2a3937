// Per-thread scratch for the conv CPU kernels: one zeroed buffer per OpenMP
// thread, allocated in prepare (outside the timed call). Internal to kernels/conv.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/common/buffer.h"

namespace dlb {

class ThreadScratch {
 public:
  explicit ThreadScratch(std::int64_t floats_per_thread) : threads_(omp_get_max_threads()) {
    for (int t = 0; t < threads_; ++t) {
      buffers_.emplace_back(static_cast<std::size_t>(floats_per_thread));
      std::fill(buffers_.back().span().begin(), buffers_.back().span().end(), 0.0f);
    }
  }
  // The thread count the run's parallel regions use (num_threads), so that
  // omp_get_thread_num() always has its buffer.
  int threads() const { return threads_; }
  float* of(int thread) { return buffers_[static_cast<std::size_t>(thread)].data(); }

 private:
  int threads_;
  std::vector<HostBuffer<float>> buffers_;
};

// Splits `items` of work into `threads` contiguous ranges: the range of `thread`.
inline std::pair<std::int64_t, std::int64_t> thread_range(std::int64_t items, int thread, int threads) {
  return {items * thread / threads, items * (thread + 1) / threads};
}

}  // namespace dlb
