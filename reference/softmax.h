// Reference row-wise softmax and log-softmax in double precision, plain
// loops: x [rows, cols] row-major fp32, y the same shape in double.
//
//   softmax      y_ij = exp(x_ij - m_i) / s_i,  m_i = max_j x_ij,  s_i = sum_j exp(x_ij - m_i)
//   log-softmax  y_ij = (x_ij - m_i) - log(s_i)
//
// Special values go through that formula with IEEE arithmetic, the max
// included: a NaN anywhere in a row is the row's max, so the whole row is
// NaN; a row of only -inf has max -inf and x - max = NaN: the row is NaN
// (0/0); a +inf entry gives inf - inf = NaN: the row is NaN; -inf entries
// with a finite max give exp(-inf) = 0 (log-softmax: -inf). Rows are
// independent (computed in parallel over rows, one thread per row).
#pragma once

#include <cstdint>
#include <span>

namespace dlb::ref {

void softmax(std::span<const float> x, std::int64_t cols, std::span<double> y);
void log_softmax(std::span<const float> x, std::int64_t cols, std::span<double> y);

}  // namespace dlb::ref
