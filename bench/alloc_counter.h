// Heap allocations of the whole process, counted (alloc_counter.cpp): what a
// pass allocates, as opposed to what it holds (peak_bytes).
#pragma once

#include <cstdint>

namespace dlb::bench {

struct AllocCounts {
  std::uint64_t bytes = 0;  // requested, summed over every allocation
  std::uint64_t calls = 0;  // malloc, calloc, realloc and the aligned forms
};

// False where the counting allocator is not in the binary (sanitizer
// builds, which bring their own malloc).
bool alloc_counting();
AllocCounts alloc_counts();

}  // namespace dlb::bench
