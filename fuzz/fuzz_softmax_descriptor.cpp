// --softmax=rows:R/cols:C (bench/descriptor.cpp).
#include "fuzz/fuzz_descriptor.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlb::bench;
  return dlb::fuzz::check_descriptor(data, size, parse_softmax_descriptor, [](const SoftmaxShape& s) {
    return s.rows >= 1 && s.rows <= kMaxIntDimension && s.cols >= 1 && s.cols <= kMaxIntDimension &&
           s.host_bytes() > 0.0;
  });
}
