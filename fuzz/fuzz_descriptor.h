// What the descriptor fuzz targets share (bench/descriptor.h): any text
// either parses into a shape inside the family's limits that reads back the
// same from its own descriptor(), or throws dlb::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bench/descriptor.h"
#include "kernels/common/error.h"

namespace dlb::fuzz {

template <class Parse, class InLimits>
int check_descriptor(const std::uint8_t* data, std::size_t size, Parse parse, InLimits in_limits) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto shape = parse(text);
    if (!in_limits(shape)) __builtin_trap();
    if (!(parse(shape.descriptor()) == shape)) __builtin_trap();
  } catch (const dlb::Error&) {
  }
  return 0;
}

}  // namespace dlb::fuzz
