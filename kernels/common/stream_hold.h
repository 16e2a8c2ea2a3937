// What a GPU call is timed with, as the benchmark times a GPU case
// (bench/gpu_timer.cpp) and as the searches that pick a library algorithm by
// timing it must time it too (conv_cudnn.cpp, the fused and training
// engines): what they time must be what the case times. Include only from
// code built with CUDA.
//
// The hold: a one-thread kernel holds the stream until the host has
// enqueued the start event, the call and the stop event, so that the events
// bracket the GPU's work and not the host's issuing of it (cuDNN's and
// cuBLAS's host work, launch overhead). Without it the start event fires as
// soon as it is enqueued on an idle stream. Its flags live in mapped pinned
// memory, one pair per process: one hold at a time.
//
// The read-through: reading a buffer twice the size of L2 evicts what the
// last call left in the cache; the reads leave clean lines, so the
// write-back of the last call's dirty lines happens there, outside the
// timing, not during the next timed call (a memset would leave L2 full of
// dirty lines).
#pragma once

#include <cstddef>
#include <functional>

struct CUstream_st;

namespace dlb {

// Enqueues the hold on `stream`; release_stream() lets it go. The hold gives
// up by itself after about a second of GPU clock, and stream_hold_timed_out()
// (read after the stream has passed it) then says so.
void hold_stream(CUstream_st* stream);
void release_stream();
bool stream_hold_timed_out();

// Seconds between two events around `call` (which enqueues work on
// `stream` and must not wait for it), with the stream held while it is
// enqueued. Synchronous. dlb::Error if the host took over a second to
// enqueue the call (the hold's timeout).
double time_held_call(CUstream_st* stream, const std::function<void()>& call);

// Reads all of `buffer` (device memory, `bytes` a multiple of 16) on
// `stream` and writes one word to *sink only if the data says so (it never
// does: the buffer is zeroed once), so the reads cannot be optimized away.
void launch_read_through(const void* buffer, std::size_t bytes, int* sink, CUstream_st* stream);

}  // namespace dlb
