// The kernels the GPU timer enqueues around a timed call (gpu_timer.cpp).
#pragma once

#include <cstddef>

struct CUstream_st;

namespace dlb::bench {

// Holds `stream` until the host writes a non-zero value to *release (mapped
// pinned memory), or `timeout_cycles` GPU clock cycles pass; then writes 1 to
// *timed_out if it was the timeout that ended it.
void launch_hold(const volatile int* release, int* timed_out, long long timeout_cycles, CUstream_st* stream);

// Reads all of `buffer` (device memory, `bytes` a multiple of 16) and writes
// one word to *sink only if the data says so (it never does): the reads
// cannot be optimized away, and they evict what was in L2 without leaving
// dirty lines behind for the timed call to write back.
void launch_read_through(const void* buffer, std::size_t bytes, int* sink, CUstream_st* stream);

}  // namespace dlb::bench
