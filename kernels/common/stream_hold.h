// One call timed on a GPU stream as the benchmark times a GPU case
// (bench/gpu_timer.cpp, without the L2 flush): a one-thread kernel holds the
// stream until the host has enqueued the start event, the call and the stop
// event, so that the events bracket the GPU's work and not the host's
// issuing of it (cuDNN's host work, launch overhead). For the searches that
// pick a library algorithm by timing it (conv_cudnn.cpp): what they time
// must be what the case times. Include only from code built with CUDA.
#pragma once

#include <functional>

struct CUstream_st;

namespace dlb {

// Seconds between two events around `call` (which enqueues work on
// `stream` and must not wait for it), with the stream held while it is
// enqueued. Synchronous. dlb::Error if the host took over a second to
// enqueue the call (the hold's timeout).
double time_held_call(CUstream_st* stream, const std::function<void()>& call);

}  // namespace dlb
