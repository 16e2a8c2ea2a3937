// A --shapes batch file (bench/descriptor.cpp): any text either parses into
// at least one problem, each of which its family's parser reads back the
// same, or throws dlb::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bench/descriptor.h"
#include "kernels/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dlb::bench;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const Descriptors d = parse_shapes_file(text, "fuzz.txt");
    if (d.empty()) __builtin_trap();
    for (const auto& s : d.conv)
      if (dlb::parse_conv_descriptor(s.descriptor()).descriptor() != s.descriptor()) __builtin_trap();
    for (const auto& s : d.softmax)
      if (!(parse_softmax_descriptor(s.descriptor()) == s)) __builtin_trap();
    for (const auto& s : d.gemm)
      if (!(parse_gemm_descriptor(s.descriptor()) == s)) __builtin_trap();
    for (const auto& s : d.daxpy)
      if (!(parse_daxpy_descriptor(s.descriptor()) == s)) __builtin_trap();
    for (const auto& s : d.copy)
      if (!(parse_copy_descriptor(s.descriptor()) == s)) __builtin_trap();
    for (const auto& s : d.net)
      if (!(parse_net_descriptor(s.descriptor()) == s)) __builtin_trap();
  } catch (const dlb::Error&) {
  }
  return 0;
}
