// Quantization (kernels/gemm/quant.h): calibration, round trips, zero,
// degenerate tensors, bad input, the bf16/fp16 rounding, and why weights are
// quantized per output channel.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/random.h"
#include "kernels/gemm/quant.h"
#include "reference/gemm.h"

namespace dlb {
namespace {

// |dequantize(quantize(x)) - x| in exact arithmetic is at most scale/2. In
// fp32, x / scale (|x / scale| <= 255) and the addition of the zero point
// each round by at most 2^-16 of a step, and the dequantizing product by
// 2^-24 of its value: the bound below, and nothing looser.
double round_trip_bound(double scale, double x) { return scale * (0.5 + 0x1p-14) + 0x1p-23 * (std::abs(x) + scale); }

std::vector<float> random_tensor(std::size_t n, std::uint64_t seed, FillSpec spec = {}) {
  std::vector<float> x(n);
  fill_random(x, seed, spec);
  return x;
}

std::vector<float> round_trip_u8(const std::vector<float>& x, AffineU8 params) {
  std::vector<std::uint8_t> q(x.size());
  std::vector<float> back(x.size());
  quantize_u8(x, params, q);
  dequantize_u8(q, params, back);
  return back;
}

void expect_u8_round_trip(const std::vector<float>& x) {
  const AffineU8 p = calibrate_u8(x);
  ASSERT_GT(p.scale, 0.0f);
  ASSERT_TRUE(std::isfinite(p.scale));
  ASSERT_GE(p.zero_point, 0);
  ASSERT_LE(p.zero_point, 255);
  const auto back = round_trip_u8(x, p);
  for (std::size_t i = 0; i < x.size(); ++i)
    ASSERT_LE(std::abs(back[i] - x[i]), round_trip_bound(p.scale, x[i])) << "x[" << i << "] = " << x[i];
  // Zero is exactly representable.
  EXPECT_EQ(round_trip_u8({0.0f}, p)[0], 0.0f);
}

template <class F>
void expect_error(F&& f, const std::string& fragment) {
  try {
    f();
    FAIL() << "no error; expected one mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- uint8

TEST(QuantU8, RandomDataWithOutliersRoundTripsWithinHalfAStep) {
  expect_u8_round_trip(random_tensor(100000, 1));
}

TEST(QuantU8, RangeIsWidenedToIncludeZero) {
  const auto positive = random_tensor(1000, 2, {.lo = 2.0, .hi = 5.0, .outlier_fraction = 0.0});
  const AffineU8 p = calibrate_u8(positive);
  EXPECT_EQ(p.zero_point, 0);
  expect_u8_round_trip(positive);
  const auto negative = random_tensor(1000, 3, {.lo = -5.0, .hi = -2.0, .outlier_fraction = 0.0});
  EXPECT_EQ(calibrate_u8(negative).zero_point, 255);
  expect_u8_round_trip(negative);
}

TEST(QuantU8, ZeroPointFromTheRange) {
  // [-1, 3]: step 4/255, zero at 1 / (4/255) = 63.75 steps above -1 -> 64.
  const AffineU8 p = calibrate_u8(std::vector<float>{-1.0f, 0.5f, 3.0f});
  EXPECT_FLOAT_EQ(p.scale, 4.0f / 255.0f);
  EXPECT_EQ(p.zero_point, 64);
}

TEST(QuantU8, ConstantTensors) {
  expect_u8_round_trip(std::vector<float>(100, 3.0f));
  expect_u8_round_trip(std::vector<float>(100, -0.25f));
  const std::vector<float> zeros(100, 0.0f);
  const AffineU8 p = calibrate_u8(zeros);
  EXPECT_EQ(p.scale, 1.0f);  // not 0: nothing divides by zero
  EXPECT_EQ(p.zero_point, 0);
  for (float v : round_trip_u8(zeros, p)) EXPECT_EQ(v, 0.0f);
}

TEST(QuantU8, OneOutlier) {
  auto x = random_tensor(1000, 4, {.lo = -0.01, .hi = 0.01, .outlier_fraction = 0.0});
  x[517] = 1.0e4f;
  expect_u8_round_trip(x);
}

TEST(QuantU8, TinyRangeDoesNotDivideByZero) {
  const std::vector<float> x{1.0e-44f, -3.0e-45f, 0.0f};  // subnormal: range / 255 underflows
  expect_u8_round_trip(x);
  EXPECT_TRUE(std::isnormal(calibrate_u8(x).scale));
}

TEST(QuantU8, EmptyTensor) {
  const AffineU8 p = calibrate_u8(std::vector<float>{});
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.zero_point, 0);
}

TEST(QuantU8, BadInputIsAClearError) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  expect_error([&] { calibrate_u8(std::vector<float>{1.0f, nan}); }, "non-finite value");
  expect_error([&] { calibrate_u8(std::vector<float>{inf}); }, "at index 0");
  std::vector<std::uint8_t> q(2);
  expect_error([&] { quantize_u8(std::vector<float>{1.0f, -inf}, AffineU8{}, q); }, "non-finite value");
  expect_error([&] { quantize_u8(std::vector<float>{1.0f}, AffineU8{}, q); }, "differ in length");
}

// ---------------------------------------------------------------- int8

TEST(QuantS8, PerTensorRoundTripRangeAndZero) {
  const auto x = random_tensor(100000, 5);
  const float scale = calibrate_s8(x);
  std::vector<std::int8_t> q(x.size());
  std::vector<float> back(x.size());
  quantize_s8(x, scale, q);
  dequantize_s8(q, scale, back);
  int lowest = 0, highest = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(std::abs(back[i] - x[i]), round_trip_bound(scale, x[i])) << "x[" << i << "] = " << x[i];
    lowest = std::min<int>(lowest, q[i]);
    highest = std::max<int>(highest, q[i]);
  }
  EXPECT_GE(lowest, -kS8Max);  // symmetric: -128 never appears
  EXPECT_TRUE(lowest == -kS8Max || highest == kS8Max);  // the largest |x| uses the full range
  std::vector<std::int8_t> zero_q(1);
  quantize_s8(std::vector<float>{0.0f}, scale, zero_q);
  EXPECT_EQ(zero_q[0], 0);
}

TEST(QuantS8, DegenerateTensors) {
  EXPECT_EQ(calibrate_s8(std::vector<float>(10, 0.0f)), 1.0f);
  EXPECT_EQ(calibrate_s8(std::vector<float>{}), 1.0f);
  EXPECT_FLOAT_EQ(calibrate_s8(std::vector<float>(10, -2.54f)), 0.02f);
  EXPECT_TRUE(std::isnormal(calibrate_s8(std::vector<float>{1.0e-44f})));
  expect_error([] { calibrate_s8(std::vector<float>{std::numeric_limits<float>::quiet_NaN()}); }, "non-finite");
}

TEST(QuantS8Columns, EachColumnGetsItsOwnScale) {
  constexpr std::int64_t k = 300, n = 7;
  auto b = random_tensor(k * n, 6);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] *= static_cast<float>(1 << (i % n));  // column j spans 2^j
  const auto scales = calibrate_s8_columns(b, k, n);
  ASSERT_EQ(scales.size(), static_cast<std::size_t>(n));
  std::vector<std::int8_t> q(b.size());
  std::vector<float> back(b.size());
  quantize_s8_columns(b, k, n, scales, q);
  dequantize_s8_columns(q, k, n, scales, back);
  for (std::int64_t j = 0; j < n; ++j) {
    float max_abs = 0.0f;
    for (std::int64_t p = 0; p < k; ++p) max_abs = std::max(max_abs, std::abs(b[p * n + j]));
    EXPECT_FLOAT_EQ(scales[j], max_abs / 127.0f) << "column " << j;
  }
  for (std::size_t i = 0; i < b.size(); ++i)
    ASSERT_LE(std::abs(back[i] - b[i]), round_trip_bound(scales[i % n], b[i])) << "b[" << i << "]";
}

TEST(QuantS8Columns, ShapeMismatchIsAClearError) {
  const std::vector<float> b(12, 1.0f);
  expect_error([&] { calibrate_s8_columns(b, 5, 3); }, "not k*n = 5*3");
  std::vector<std::int8_t> q(12);
  expect_error([&] { quantize_s8_columns(b, 4, 3, std::vector<float>(2, 1.0f), q); }, "scales per column");
}

// Per-channel weights are more accurate where output channels differ in
// range. The error is taken per output column (max_i |C - C_f32| over
// max_i |C_f32| in column j), worst column: over the whole of C one max-norm
// is set by the widest columns, whose step is the same either way, and would
// hide exactly what per-channel quantization fixes, the narrow columns.
TEST(QuantS8Columns, PerChannelBeatsPerTensorOnColumnsOfDifferentRanges) {
  constexpr std::int64_t m = 16, k = 256, n = 32;
  const auto a = random_tensor(m * k, 7, {.outlier_fraction = 0.0});
  auto b = random_tensor(k * n, 8, {.outlier_fraction = 0.0});
  for (std::size_t i = 0; i < b.size(); ++i) b[i] *= static_cast<float>(1 << (i % n % 8));  // ranges 1 .. 128

  const AffineU8 a_params = calibrate_u8(a);
  std::vector<std::uint8_t> a_q(a.size());
  quantize_u8(a, a_params, a_q);
  const auto rows = ref::spread_rows(m, m);
  const auto exact = ref::gemm_rows(a.data(), b.data(), n, k, rows);

  // Worst column error of the dequantized int8 product with these B scales.
  auto worst_column_error = [&](const std::vector<float>& b_scales) {
    std::vector<std::int8_t> b_q(b.size());
    quantize_s8_columns(b, k, n, b_scales, b_q);
    const auto sums = ref::gemm_rows_u8s8(a_q.data(), a_params.zero_point, b_q.data(), n, k, rows);
    double worst = 0.0;
    for (std::int64_t j = 0; j < n; ++j) {
      double err = 0.0, ref_max = 0.0;
      for (std::int64_t i = 0; i < m; ++i) {
        const double c = static_cast<double>(sums[i * n + j]) * a_params.scale * b_scales[j];
        err = std::max(err, std::abs(c - exact[i * n + j]));
        ref_max = std::max(ref_max, std::abs(exact[i * n + j]));
      }
      worst = std::max(worst, err / ref_max);
    }
    return worst;
  };
  const double per_tensor = worst_column_error(std::vector<float>(n, calibrate_s8(b)));
  const double per_channel = worst_column_error(calibrate_s8_columns(b, k, n));
  RecordProperty("per_tensor_worst_column_error", std::to_string(per_tensor));
  RecordProperty("per_channel_worst_column_error", std::to_string(per_channel));
  // The narrowest columns are 128x narrower than the widest: per tensor they
  // get a step 128x too coarse. Demand a clear factor, not a coin toss.
  EXPECT_LT(per_channel * 8.0, per_tensor) << "per channel " << per_channel << ", per tensor " << per_tensor;
}

// ---------------------------------------------------------------- bf16, fp16

std::uint16_t bf16_bits(float x) {
  std::uint16_t out = 0;
  round_to_bf16(std::span<const float>(&x, 1), std::span<std::uint16_t>(&out, 1));
  return out;
}

std::uint16_t f16_bits(float x) {
  std::uint16_t out = 0;
  round_to_f16(std::span<const float>(&x, 1), std::span<std::uint16_t>(&out, 1));
  return out;
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(bf16_bits(1.0f + 0x1p-8f), 0x3f80);           // halfway, to even (down)
  EXPECT_EQ(bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);       // halfway, to even (up)
  EXPECT_EQ(bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above halfway
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // overflows to +inf
  EXPECT_TRUE(std::isnan(bf16_to_float(bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_to_float(0x3fc0), 1.5f);
}

TEST(F16, RoundsToNearestEven) {
  EXPECT_EQ(f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f16_bits(1.0f + 0x1p-11f), 0x3c00);      // halfway, to even
  EXPECT_EQ(f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(f16_bits(70000.0f), 0x7c00);             // beyond 65504: +inf
  EXPECT_EQ(f16_bits(0x1p-24f), 0x0001);             // smallest subnormal
  EXPECT_TRUE(std::isnan(f16_to_float(f16_bits(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f16_to_float(0x3e00), 1.5f);
}

TEST(ReducedFloats, LengthMismatchIsAClearError) {
  std::vector<std::uint16_t> out(1);
  expect_error([&] { round_to_bf16(std::vector<float>{1.0f, 2.0f}, out); }, "differ in length");
  expect_error([&] { round_to_f16(std::vector<float>{}, out); }, "differ in length");
}

}  // namespace
}  // namespace dlb
