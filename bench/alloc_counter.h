// Heap allocations of the whole process, counted (alloc_counter.cpp): what a
// pass allocates (alloc_counts), and what the heap holds at once (the live
// bytes and their peak: alloc_live_bytes, alloc_peak_bytes).
#pragma once

#include <cstdint>

namespace dlb::bench {

struct AllocCounts {
  std::uint64_t bytes = 0;  // requested, summed over every allocation
  std::uint64_t calls = 0;  // malloc, calloc, realloc and the aligned forms
};

// False where the counting allocator is not in the binary (sanitizer
// builds, which bring their own malloc): then every function below
// returns zeros.
bool alloc_counting();
AllocCounts alloc_counts();

// The bytes of the chunks allocated through the counter and not yet freed,
// each by its usable size (malloc_usable_size: the request rounded up to
// glibc's 16-byte granule, or to the page for a chunk glibc maps on its
// own), so that an allocation and its free cancel exactly. Signed: a chunk
// freed here that was not allocated here (none is known) would show as a
// drop, not wrap around.
std::int64_t alloc_live_bytes();
// The largest alloc_live_bytes since the last alloc_peak_restart (or the
// start of the process), kept across threads: every allocation that raises
// the live bytes raises the peak to them (an atomic maximum).
std::int64_t alloc_peak_bytes();
// Starts the peak again at the live bytes of now, and returns them. Meant
// for a point where no other thread allocates: an allocation racing with
// the restart may or may not count in the new peak.
std::int64_t alloc_peak_restart();

}  // namespace dlb::bench
