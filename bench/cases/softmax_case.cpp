#include "bench/cases/softmax_case.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>
#include <algorithm>

#include "bench/cases/checked_run.h"
#include "bench/cases/last_problem.h"
#include "kernels/common/random.h"
#include "reference/softmax.h"

namespace dlb {

struct SoftmaxCase::Problem {
  std::vector<float> x;          // [rows, cols], the seeded input
  std::vector<double> expected;  // its reference output
};

namespace {

constexpr std::uint64_t kSeedX = 51, kSeedSign = 52;
constexpr float kInf = std::numeric_limits<float>::infinity();

std::size_t checked_elements(std::int64_t rows, std::int64_t cols) {
  DLB_REQUIRE(rows >= 1 && cols >= 1, "softmax: rows and cols must be >= 1, got rows " + std::to_string(rows) +
                                          ", cols " + std::to_string(cols));
  return static_cast<std::size_t>(rows * cols);
}

// Writes `pattern` over one random row (r is its index in the matrix).
void plant(std::span<float> row, SoftmaxInput pattern, std::int64_t r) {
  const std::size_t cols = row.size();
  switch (pattern) {
    case SoftmaxInput::large_magnitude:
      for (std::size_t j = 0; j < cols; ++j) {
        const double sign = unit_random(kSeedSign, static_cast<std::uint64_t>(r) * cols + j) < 0.5 ? -1.0 : 1.0;
        row[j] = static_cast<float>(sign * 1e4 + 4.0 * row[j]);  // row[j] in [-1, 1) or an outlier
      }
      break;
    case SoftmaxInput::masked:
      for (std::size_t j = 1; j < cols; j += 3) row[j] = -kInf;
      break;
    case SoftmaxInput::one_unmasked:
      for (std::size_t j = 0; j < cols; ++j)
        if (j != cols / 2) row[j] = -kInf;
      break;
    case SoftmaxInput::all_equal:
      for (float& v : row) v = row[0];
      break;
    case SoftmaxInput::all_masked:
      for (float& v : row) v = -kInf;
      break;
    case SoftmaxInput::nan:
      row[cols / 3] = std::numeric_limits<float>::quiet_NaN();
      break;
    case SoftmaxInput::random:
    case SoftmaxInput::mixed:
      break;
  }
}

void fill_input(std::span<float> x, std::int64_t rows, std::int64_t cols, SoftmaxInput input) {
  fill_random(x, kSeedX);
  const auto row = [&](std::int64_t r) { return x.subspan(static_cast<std::size_t>(r * cols), static_cast<std::size_t>(cols)); };
  if (input == SoftmaxInput::mixed) {
    if (rows < 16) return;
    const SoftmaxInput first_rows[] = {SoftmaxInput::large_magnitude, SoftmaxInput::masked,
                                       SoftmaxInput::one_unmasked, SoftmaxInput::all_equal};
    for (std::int64_t r = 0; r < 4; ++r) plant(row(r), first_rows[r], r);
    return;
  }
  for (std::int64_t r = 0; r < rows; r += 2) plant(row(r), input, r);
}

// Rows whose reference is a number must sum to 1 (log-softmax: the sum of
// exp(y)) within a bound; the failures are added to c.
//
// softmax: `tolerance`, the variant's (each output within it, relative to
// the row's largest, and at most 1 in all).
// log-softmax: every fp32 algorithm forms y_j = x_j - c with
// c = max + log(sum) an fp32 number (whether as x_j - c or as
// (x_j - max) - log(sum)), so the log-probabilities near 0, which carry the
// sum, are off by up to u * |c| from the rounding of c and u * |y_j| from the
// subtraction (u = 2^-24), and sum exp(y_j) by e^delta - 1 ~ delta. |c| is
// at most the row's largest finite |x_j| plus log(cols): the bound is
// tolerance + 2u (max|x_j| + log(cols)). For rows of +-1e4 this is 1.2e-3
// (cuDNN's log-softmax sums to 0.9996-0.9998 there, 6e-8 elementwise); for
// the random rows (|x| <= 64) it adds 8e-6 to the tolerance.
void check_row_sums(ref::Comparison& c, std::span<const float> y, std::span<const float> x,
                    std::span<const double> expected, std::int64_t cols, SoftmaxKind kind, double tolerance) {
  constexpr double kUnitRoundoff = 0x1p-24;
  const auto n = static_cast<std::size_t>(cols);
  std::size_t rows_off = 0;
  std::string example;
  for (std::size_t begin = 0; begin < y.size(); begin += n) {
    if (std::isnan(expected[begin])) continue;  // a NaN row is NaN throughout
    double sum = 0.0;
    double magnitude = 0.0;  // the row's largest finite |x_j|
    for (std::size_t j = begin; j < begin + n; ++j) {
      sum += kind == SoftmaxKind::softmax ? static_cast<double>(y[j]) : std::exp(static_cast<double>(y[j]));
      if (std::isfinite(x[j])) magnitude = std::max(magnitude, std::abs(static_cast<double>(x[j])));
    }
    const double bound = kind == SoftmaxKind::softmax
                             ? tolerance
                             : tolerance + 2.0 * kUnitRoundoff * (magnitude + std::log(static_cast<double>(n)));
    if (!(std::abs(sum - 1.0) <= bound)) {
      if (++rows_off == 1) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "row %zu sums to %.9g, bound %.3g", begin / n, sum, bound);
        example = buf;
      }
    }
  }
  if (rows_off == 0) return;
  c.ok = false;
  c.mismatches += rows_off;
  c.first += (c.first.empty() ? "" : "; ") + std::to_string(rows_off) + " rows do not sum to 1 (" + example + ")";
}

}  // namespace

const char* softmax_input_name(SoftmaxInput input) {
  switch (input) {
    case SoftmaxInput::random: return "random";
    case SoftmaxInput::mixed: return "mixed";
    case SoftmaxInput::large_magnitude: return "large_magnitude";
    case SoftmaxInput::masked: return "masked";
    case SoftmaxInput::one_unmasked: return "one_unmasked";
    case SoftmaxInput::all_equal: return "all_equal";
    case SoftmaxInput::all_masked: return "all_masked";
    case SoftmaxInput::nan: return "nan";
  }
  return "unknown";
}

SoftmaxCase::SoftmaxCase(const SoftmaxVariant& variant, SoftmaxKind kind, std::int64_t rows, std::int64_t cols,
                         SoftmaxInput input, std::size_t x_offset, std::size_t y_offset)
    : variant_(variant),
      kind_(kind),
      rows_(rows),
      cols_(cols),
      ctx_(variant.device),
      x_(checked_elements(rows, cols), variant.device, x_offset),
      y_(checked_elements(rows, cols), variant.device, y_offset) {
  const std::string key = std::string(softmax_op_name(kind)) + " " + std::to_string(rows) + "x" +
                          std::to_string(cols) + " " + softmax_input_name(input);
  problem_ = last_problem<Problem>(key, [&] {
    Problem p{std::vector<float>(checked_elements(rows, cols)), std::vector<double>(checked_elements(rows, cols))};
    fill_input(p.x, rows, cols, input);
    if (kind == SoftmaxKind::softmax) {
      ref::softmax(p.x, cols, p.expected);
    } else {
      ref::log_softmax(p.x, cols, p.expected);
    }
    return p;
  });
  std::copy(problem_->x.begin(), problem_->x.end(), x_.host().begin());
  x_.upload();
  run_ = variant.prepare(SoftmaxArgs{rows, cols, x_.data(), y_.data()}, ctx_.exec());
}

std::span<const double> SoftmaxCase::expected() const { return problem_->expected; }

ref::Comparison SoftmaxCase::validate() {
  return checked_run(run_, ctx_, y_, [&](std::span<const float> y) {
    auto c = ref::compare_rows(y, problem_->expected, static_cast<std::size_t>(cols_), variant_.tolerance);
    check_row_sums(c, y, problem_->x, problem_->expected, cols_, kind_, variant_.tolerance);
    return c;
  });
}

}  // namespace dlb
