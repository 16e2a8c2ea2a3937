#include "bench/cases/daxpy_case.h"

#include <algorithm>

#include "kernels/common/random.h"
#include "reference/daxpy.h"

namespace dlb {

namespace {
constexpr double kAlpha = 1.0 / 3.0;  // not a power of two: the product rounds
constexpr std::uint64_t kSeedX = 11, kSeedY = 12;

std::size_t checked_length(std::int64_t n) {
  DLB_REQUIRE(n >= 0, "daxpy: n must be >= 0, got " + std::to_string(n));
  return static_cast<std::size_t>(n);
}
}  // namespace

DaxpyCase::DaxpyCase(const DaxpyVariant& variant, std::int64_t n, std::size_t x_offset,
                     std::size_t y_offset)
    : variant_(variant),
      n_(n),
      ctx_(variant.device),
      x_(checked_length(n), variant.device, x_offset),
      y_(checked_length(n), variant.device, y_offset),
      y0_(checked_length(n)),
      expected_(checked_length(n)) {
  fill_random(x_.host(), kSeedX);
  fill_random(y0_.span(), kSeedY);
  std::copy(y0_.span().begin(), y0_.span().end(), expected_.span().begin());
  ref::daxpy(kAlpha, x_.host(), expected_.span());
  x_.upload();
  run_ = variant.prepare(DaxpyArgs{n, kAlpha, x_.data(), y_.data()}, ctx_.exec());
}

ref::Comparison DaxpyCase::validate() {
  std::copy(y0_.span().begin(), y0_.span().end(), y_.host().begin());
  y_.upload();
  run_();
  ctx_.synchronize();
  y_.download();
  return ref::compare(std::span<const double>(y_.host()), expected_.span(), variant_.tolerance);
}

}  // namespace dlb
