#include "reference/copy.h"

#include <cmath>

#include "kernels/common/error.h"

namespace dlb::ref {

void scale_shift(float a, float b, std::span<const float> x, std::span<double> out) {
  DLB_REQUIRE(x.size() == out.size(), "scale_shift: x and out differ in length");
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = std::fma(double{a}, double{x[i]}, double{b});
}

}  // namespace dlb::ref
