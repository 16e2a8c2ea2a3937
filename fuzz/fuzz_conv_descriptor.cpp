// The --conv descriptor parser (kernels/conv/conv_shape.cpp): any text either
// parses into shapes that pass validate_conv_shape, or throws dlb::Error.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/common/error.h"
#include "kernels/conv/conv.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& shape : dlb::parse_conv_descriptors(text)) {
      dlb::validate_conv_shape(shape);
      // What the benchmark derives from a shape must not overflow.
      if (shape.y_size() <= 0 || shape.flops() <= 0) __builtin_trap();
      if (dlb::parse_conv_descriptor(shape.descriptor()).descriptor() != shape.descriptor()) __builtin_trap();
    }
  } catch (const dlb::Error&) {
  }
  return 0;
}
