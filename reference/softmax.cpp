#include "reference/softmax.h"

#include <cmath>
#include <limits>

#include "kernels/common/error.h"

namespace dlb::ref {
namespace {

// NaN-propagating row max (std::max would skip a NaN after the first element).
double row_max(const float* x, std::int64_t cols) {
  double m = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < cols; ++j) {
    const double v = x[j];
    if (std::isnan(v)) return v;
    if (v > m) m = v;
  }
  return m;
}

template <bool kLog>
void softmax_rows(std::span<const float> x, std::int64_t cols, std::span<double> y) {
  DLB_REQUIRE(cols >= 1, "softmax reference: cols must be >= 1");
  DLB_REQUIRE(x.size() == y.size() && x.size() % static_cast<std::size_t>(cols) == 0,
              "softmax reference: x and y must both be [rows, cols]");
  const auto rows = static_cast<std::int64_t>(x.size()) / cols;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double* yr = y.data() + r * cols;
    const double m = row_max(xr, cols);
    double s = 0.0;
    for (std::int64_t j = 0; j < cols; ++j) {
      yr[j] = std::exp(xr[j] - m);
      s += yr[j];
    }
    const double log_s = std::log(s);
    for (std::int64_t j = 0; j < cols; ++j) yr[j] = kLog ? (xr[j] - m) - log_s : yr[j] / s;
  }
}

}  // namespace

void softmax(std::span<const float> x, std::int64_t cols, std::span<double> y) { softmax_rows<false>(x, cols, y); }

void log_softmax(std::span<const float> x, std::int64_t cols, std::span<double> y) {
  softmax_rows<true>(x, cols, y);
}

}  // namespace dlb::ref
