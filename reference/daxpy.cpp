#include "reference/daxpy.h"

#include <cmath>

#include "kernels/common/error.h"

namespace dlb::ref {

void daxpy(double a, std::span<const double> x, std::span<double> y) {
  DLB_REQUIRE(x.size() == y.size(), "daxpy: x and y differ in length");
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::fma(a, x[i], y[i]);
}

}  // namespace dlb::ref
