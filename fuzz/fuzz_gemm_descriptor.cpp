// --gemm=m:M/n:N/k:K (bench/descriptor.cpp).
#include "fuzz/fuzz_descriptor.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlb::bench;
  return dlb::fuzz::check_descriptor(data, size, parse_gemm_descriptor, [](const GemmShape& s) {
    for (const std::int64_t v : {s.m, s.n, s.k})
      if (v < 1 || v > kMaxIntDimension) return false;
    return s.host_bytes() > 0.0;
  });
}
