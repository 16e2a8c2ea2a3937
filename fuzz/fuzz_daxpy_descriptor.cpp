// --daxpy=n:N, with the K, M, G suffixes (bench/descriptor.cpp).
#include "fuzz/fuzz_descriptor.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlb::bench;
  return dlb::fuzz::check_descriptor(data, size, parse_daxpy_descriptor, [](const DaxpyShape& s) {
    return s.n >= 1 && s.n <= kMaxIntDimension;
  });
}
