#include "reference/gemm.h"

#include <algorithm>

namespace dlb::ref {

std::vector<double> gemm_rows(const float* a, const float* b, std::int64_t n, std::int64_t k,
                              std::span<const std::int64_t> rows) {
  std::vector<double> c(rows.size() * static_cast<std::size_t>(n), 0.0);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    double* crow = c.data() + r * static_cast<std::size_t>(n);
    const float* arow = a + rows[r] * k;
    for (std::int64_t p = 0; p < k; ++p) {
      const double av = arow[p];
      const float* brow = b + p * n;
      for (std::int64_t j = 0; j < n; ++j) crow[j] += av * static_cast<double>(brow[j]);
    }
  }
  return c;
}

std::vector<std::int64_t> gemm_rows_u8s8(const std::uint8_t* a, std::int32_t a_zero_point, const std::int8_t* b,
                                         std::int64_t n, std::int64_t k, std::span<const std::int64_t> rows) {
  std::vector<std::int64_t> c(rows.size() * static_cast<std::size_t>(n), 0);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::int64_t* crow = c.data() + r * static_cast<std::size_t>(n);
    const std::uint8_t* arow = a + rows[r] * k;
    for (std::int64_t p = 0; p < k; ++p) {
      const std::int64_t av = static_cast<std::int64_t>(arow[p]) - a_zero_point;
      const std::int8_t* brow = b + p * n;
      for (std::int64_t j = 0; j < n; ++j) crow[j] += av * brow[j];
    }
  }
  return c;
}

std::vector<std::int64_t> spread_rows(std::int64_t m, std::int64_t count) {
  std::vector<std::int64_t> rows;
  if (m <= 0 || count <= 0) return rows;
  if (count >= m) {
    for (std::int64_t i = 0; i < m; ++i) rows.push_back(i);
    return rows;
  }
  for (std::int64_t i = 0; i < count; ++i) rows.push_back(count == 1 ? 0 : i * (m - 1) / (count - 1));
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace dlb::ref
