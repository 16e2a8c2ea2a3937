#include "bench/cases/gemm_case.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "kernels/common/random.h"
#include "kernels/gemm/quant.h"
#include "reference/gemm.h"

namespace dlb {
namespace {

constexpr std::uint64_t kSeedA = 61, kSeedB = 62;

std::int64_t positive(std::int64_t v, const char* name) {
  DLB_REQUIRE(v >= 1, std::string("gemm: ") + name + " must be >= 1, got " + std::to_string(v));
  return v;
}

std::size_t elements(std::int64_t rows, std::int64_t cols) {
  return static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
}

bool takes_f32(GemmPrecision p) { return p == GemmPrecision::f32 || p == GemmPrecision::tf32; }
bool takes_16bit(GemmPrecision p) { return p == GemmPrecision::bf16 || p == GemmPrecision::f16; }

}  // namespace

GemmCase::GemmCase(const GemmVariant& variant, std::int64_t m, std::int64_t n, std::int64_t k)
    : variant_(variant),
      precision_(variant.precision),
      m_(positive(m, "m")),
      n_(positive(n, "n")),
      k_(positive(k, "k")),
      ctx_(variant.device),
      a_(elements(m, k), takes_f32(precision_) ? variant.device : Device::cpu),
      b_(elements(k, n), takes_f32(precision_) ? variant.device : Device::cpu),
      a16_(takes_16bit(precision_) ? elements(m, k) : 0, variant.device),
      b16_(takes_16bit(precision_) ? elements(k, n) : 0, variant.device),
      a16_values_(a16_.size()),
      b16_values_(b16_.size()),
      a_u8_(precision_ == GemmPrecision::s8 ? elements(m, k) : 0, Device::cpu),
      a_s8_(precision_ == GemmPrecision::s8 && variant.device == Device::gpu ? elements(m, k) : 0, variant.device),
      b_s8_(precision_ == GemmPrecision::s8 ? elements(k, n) : 0, variant.device),
      c_scale_(precision_ == GemmPrecision::s8 ? static_cast<std::size_t>(n) : 0, variant.device),
      c_(elements(m, n), variant.device) {
  fill_random(a_.host(), kSeedA);
  fill_random(b_.host(), kSeedB);
  GemmArgs args;
  args.m = m;
  args.n = n;
  args.k = k;
  args.c = c_.data();
  args.implementation = &implementation_;

  switch (precision_) {
    case GemmPrecision::f32:
    case GemmPrecision::tf32:
      a_.upload();
      b_.upload();
      args.a = a_.data();
      args.b = b_.data();
      break;
    case GemmPrecision::bf16:
    case GemmPrecision::f16: {
      const bool bf16 = precision_ == GemmPrecision::bf16;
      const auto round = bf16 ? round_to_bf16 : round_to_f16;
      const auto widen = bf16 ? bf16_to_float : f16_to_float;
      round(a_.host(), a16_.host());
      round(b_.host(), b16_.host());
      std::transform(a16_.host().begin(), a16_.host().end(), a16_values_.span().begin(), widen);
      std::transform(b16_.host().begin(), b16_.host().end(), b16_values_.span().begin(), widen);
      a16_.upload();
      b16_.upload();
      args.a16 = a16_.data();
      args.b16 = b16_.data();
      break;
    }
    case GemmPrecision::s8: {
      DLB_REQUIRE(k <= kGemmS8MaxK, "gemm s8: k = " + std::to_string(k) + " exceeds " + std::to_string(kGemmS8MaxK) +
                                        ", beyond which int32 sums of u8 x s8 products may overflow");
      // Activations per tensor, weights per output channel: the usual choice.
      const AffineU8 a_params = calibrate_u8(a_.host());
      quantize_u8(a_.host(), a_params, a_u8_.host());
      a_zero_point_ = a_params.zero_point;
      const std::vector<float> b_scales = calibrate_s8_columns(b_.host(), k, n);
      quantize_s8_columns(b_.host(), k, n, b_scales, b_s8_.host());
      for (std::size_t j = 0; j < b_scales.size(); ++j) c_scale_.host()[j] = a_params.scale * b_scales[j];
      b_s8_.upload();
      c_scale_.upload();
      args.a_zero_point = a_zero_point_;
      args.b_s8 = b_s8_.data();
      args.c_scale = c_scale_.data();
      if (variant.device == Device::gpu) {
        std::transform(a_u8_.host().begin(), a_u8_.host().end(), a_s8_.host().begin(),
                       [](std::uint8_t q) { return static_cast<std::int8_t>(q - 128); });
        a_s8_.upload();
        args.a_s8 = a_s8_.data();
      } else {
        args.a_u8 = a_u8_.data();
      }
      break;
    }
  }
  run_ = variant.prepare(args, ctx_.exec());
}

std::vector<std::int64_t> GemmCase::checked_rows() const {
  const bool full = static_cast<double>(m_) * static_cast<double>(n_) * static_cast<double>(k_) <=
                    static_cast<double>(kFullCheckMacs);
  return ref::spread_rows(m_, full ? m_ : kSpotRows);
}

std::vector<double> GemmCase::expected_rows(const std::vector<std::int64_t>& rows) {
  switch (precision_) {
    case GemmPrecision::f32:
    case GemmPrecision::tf32:
      return ref::gemm_rows(a_.host().data(), b_.host().data(), n_, k_, rows);
    case GemmPrecision::bf16:
    case GemmPrecision::f16:
      return ref::gemm_rows(a16_values_.data(), b16_values_.data(), n_, k_, rows);
    case GemmPrecision::s8:
      break;
  }
  // s8: the exact integer sums through the output stage, in fp32 as the
  // variants do it: one conversion, one multiply.
  const auto sums = ref::gemm_rows_u8s8(a_u8_.host().data(), a_zero_point_, b_s8_.host().data(), n_, k_, rows);
  std::vector<double> expected(sums.size());
  for (std::size_t e = 0; e < sums.size(); ++e) {
    DLB_REQUIRE(std::llabs(sums[e]) <= std::numeric_limits<std::int32_t>::max(), "gemm s8: an int32 sum overflows");
    max_abs_sum_ = std::max<std::int64_t>(max_abs_sum_, std::llabs(sums[e]));
    const float scale = c_scale_.host()[e % static_cast<std::size_t>(n_)];
    expected[e] = static_cast<double>(static_cast<float>(sums[e]) * scale);
  }
  return expected;
}

ref::Comparison GemmCase::validate() {
  const auto rows = checked_rows();
  poison_nan(c_.host());
  c_.upload();
  run_();
  ctx_.synchronize();
  c_.download();

  std::vector<float> got;
  got.reserve(rows.size() * static_cast<std::size_t>(n_));
  std::vector<bool> checked(static_cast<std::size_t>(m_), false);
  for (auto r : rows) {
    const auto row = c_.host().subspan(static_cast<std::size_t>(r * n_), static_cast<std::size_t>(n_));
    got.insert(got.end(), row.begin(), row.end());
    checked[static_cast<std::size_t>(r)] = true;
  }
  ref::Comparison comparison = ref::compare(std::span<const float>(got), expected_rows(rows), variant_.tolerance);

  // Rows outside the check must at least have been written.
  std::size_t unwritten = 0;
  for (std::int64_t i = 0; i < m_; ++i) {
    if (checked[static_cast<std::size_t>(i)]) continue;
    const auto row = c_.host().subspan(static_cast<std::size_t>(i * n_), static_cast<std::size_t>(n_));
    unwritten += static_cast<std::size_t>(std::count_if(row.begin(), row.end(), [](float v) { return std::isnan(v); }));
  }
  if (unwritten > 0) {
    comparison.ok = false;
    comparison.mismatches += unwritten;
    comparison.first += (comparison.first.empty() ? "" : "; ") + std::to_string(unwritten) +
                        " elements outside the checked rows never written (still NaN)";
  }

  if (takes_f32(precision_)) {
    err_vs_f32_ = comparison.max_rel_err;  // the reference above is the fp32 problem itself
  } else {
    const auto f32_rows = ref::gemm_rows(a_.host().data(), b_.host().data(), n_, k_, rows);
    err_vs_f32_ =
        ref::compare(std::span<const float>(got), f32_rows, std::numeric_limits<double>::infinity()).max_rel_err;
  }
  return comparison;
}

}  // namespace dlb
