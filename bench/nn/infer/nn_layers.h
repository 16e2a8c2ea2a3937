// Per-layer timing of a prepared network backend (nn_layers.cpp): what the
// <net>_layer cases measure and what --trace writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cases/nn/infer/nn_case.h"
#include "bench/trace.h"
#if DLB_HAVE_CUDA
#include "kernels/common/cuda_resources.h"
#endif

namespace dlb::bench {

// Runs the layer calls of a prepared case one by one, timing each the way
// the device allows (nn_layers.cpp says how). The case outlives the timer.
class LayerTimer {
 public:
  explicit LayerTimer(const NetCase& c);
  // One whole pass; returns when the device has finished it.
  PassTimes pass();

 private:
  const NetCase& c_;
#if DLB_HAVE_CUDA
  std::vector<Event> events_;  // GPU: before the first layer and after each
#endif
};

// --trace=FILE was given.
bool tracing();
// --trace given, but no case will run: removes the empty file registration
// made to check that it can be written.
void drop_trace();
// Whether the case (its name, with or without Google Benchmark's suffix)
// writes the trace when it is the first such case to run: the network cases
// (nn.cpp) and the layer cases.
bool writes_trace(std::string_view case_name);
// Writes the trace of one case (the first that asks; later calls do nothing).
void write_trace(const nn::NetVariant& variant, std::string_view network, std::int64_t batch,
                 const std::string& case_name);

}  // namespace dlb::bench
