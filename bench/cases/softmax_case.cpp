#include "bench/cases/softmax_case.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "bench/cases/checked_run.h"
#include "kernels/common/random.h"
#include "reference/softmax.h"

namespace dlb {
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
// exp(y)) within `tolerance`; the failures are added to c.
void check_row_sums(ref::Comparison& c, std::span<const float> y, std::span<const double> expected, std::int64_t cols,
                    SoftmaxKind kind, double tolerance) {
  std::size_t rows_off = 0;
  std::string example;
  for (std::size_t begin = 0; begin < y.size(); begin += static_cast<std::size_t>(cols)) {
    if (std::isnan(expected[begin])) continue;  // a NaN row is NaN throughout
    double sum = 0.0;
    for (std::size_t j = begin; j < begin + static_cast<std::size_t>(cols); ++j)
      sum += kind == SoftmaxKind::softmax ? static_cast<double>(y[j]) : std::exp(static_cast<double>(y[j]));
    if (!(std::abs(sum - 1.0) <= tolerance)) {
      if (++rows_off == 1) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "row %zu sums to %.9g", begin / static_cast<std::size_t>(cols), sum);
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
      y_(checked_elements(rows, cols), variant.device, y_offset),
      expected_(checked_elements(rows, cols)) {
  fill_input(x_.host(), rows, cols, input);
  if (kind == SoftmaxKind::softmax) {
    ref::softmax(x_.host(), cols, expected_.span());
  } else {
    ref::log_softmax(x_.host(), cols, expected_.span());
  }
  x_.upload();
  run_ = variant.prepare(SoftmaxArgs{rows, cols, x_.data(), y_.data()}, ctx_.exec());
}

ref::Comparison SoftmaxCase::validate() {
  return checked_run(run_, ctx_, y_, [&](std::span<const float> y) {
    auto c = ref::compare_rows(y, expected_.span(), static_cast<std::size_t>(cols_), variant_.tolerance);
    check_row_sums(c, y, expected_.span(), cols_, kind_, variant_.tolerance);
    return c;
  });
}

}  // namespace dlb
