// Per-thread scratch for the conv CPU kernels (kernels/common/thread_scratch.h)
// and the split of their work among the threads. Internal to kernels/conv.
#pragma once

#include <cstdint>
#include <utility>

#include "kernels/common/thread_scratch.h"

namespace dlb {

// Splits `items` of work into `threads` contiguous ranges: the range of `thread`.
inline std::pair<std::int64_t, std::int64_t> thread_range(std::int64_t items, int thread, int threads) {
  return {items * thread / threads, items * (thread + 1) / threads};
}

}  // namespace dlb
