#include "kernels/gemm/quant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/common/error.h"

namespace dlb {
namespace {

// A scale below the smallest normal float would make x / scale overflow or,
// flushed to zero, divide by zero; a tensor that tiny gets this one (its
// values still quantize within range: the range is below 255 * scale).
constexpr float kMinScale = std::numeric_limits<float>::min();

void require_finite(float v, std::size_t index, const char* what) {
  if (!std::isfinite(v))
    throw_error(std::string(what) + ": non-finite value " + std::to_string(v) + " at index " +
                    std::to_string(index),
                __FILE__, __LINE__);
}

void require_same_length(std::size_t a, std::size_t b, const char* what) {
  if (a != b)
    throw_error(std::string(what) + ": input and output differ in length (" + std::to_string(a) + " and " +
                    std::to_string(b) + ")",
                __FILE__, __LINE__);
}

// round(v) clamped to [lo, hi], in float so that an out-of-range v never
// meets an undefined float-to-int conversion.
int round_clamped(float v, float lo, float hi) { return static_cast<int>(std::clamp(std::nearbyint(v), lo, hi)); }

float symmetric_scale(float max_abs) {
  return max_abs == 0.0f ? 1.0f : std::max(max_abs / static_cast<float>(kS8Max), kMinScale);
}

void require_matrix(std::size_t size, std::int64_t k, std::int64_t n, const char* what) {
  if (k < 0 || n < 0 || size != static_cast<std::size_t>(k) * static_cast<std::size_t>(n))
    throw_error(std::string(what) + ": B has " + std::to_string(size) + " elements, not k*n = " +
                    std::to_string(k) + "*" + std::to_string(n),
                __FILE__, __LINE__);
}

}  // namespace

// ---------------------------------------------------------------- uint8

AffineU8 calibrate_u8(std::span<const float> x) {
  float lo = 0.0f, hi = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    require_finite(x[i], i, "calibrate_u8");
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  return affine_u8(lo, hi);
}

AffineU8 affine_u8(float lo, float hi) {
  require_finite(lo, 0, "affine_u8");
  require_finite(hi, 1, "affine_u8");
  DLB_REQUIRE(lo <= hi, "affine_u8: range with min above max");
  lo = std::min(lo, 0.0f);  // the range always includes 0
  hi = std::max(hi, 0.0f);
  if (lo == hi) return {};  // all zeros: scale 1, zero point 0
  // In double: hi - lo may overflow float.
  const float scale = std::max(static_cast<float>((static_cast<double>(hi) - lo) / 255.0), kMinScale);
  // The code that dequantizes to exactly 0: lo maps to code 0, so 0 maps to
  // -lo/scale, rounded (in [0, 255] because lo <= 0 <= hi).
  const int zero_point = round_clamped(-lo / scale, 0.0f, 255.0f);
  return {scale, zero_point};
}

void quantize_u8(std::span<const float> x, AffineU8 params, std::span<std::uint8_t> q) {
  require_same_length(x.size(), q.size(), "quantize_u8");
  const auto zp = static_cast<float>(params.zero_point);
  for (std::size_t i = 0; i < x.size(); ++i) {
    require_finite(x[i], i, "quantize_u8");
    q[i] = static_cast<std::uint8_t>(round_clamped(x[i] / params.scale + zp, 0.0f, 255.0f));
  }
}

void dequantize_u8(std::span<const std::uint8_t> q, AffineU8 params, std::span<float> x) {
  require_same_length(q.size(), x.size(), "dequantize_u8");
  for (std::size_t i = 0; i < q.size(); ++i)
    x[i] = static_cast<float>(static_cast<int>(q[i]) - params.zero_point) * params.scale;
}

// ---------------------------------------------------------------- int8

float calibrate_s8(std::span<const float> x) {
  float max_abs = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    require_finite(x[i], i, "calibrate_s8");
    max_abs = std::max(max_abs, std::abs(x[i]));
  }
  return symmetric_scale(max_abs);
}

void quantize_s8(std::span<const float> x, float scale, std::span<std::int8_t> q) {
  require_same_length(x.size(), q.size(), "quantize_s8");
  constexpr auto limit = static_cast<float>(kS8Max);
  for (std::size_t i = 0; i < x.size(); ++i) {
    require_finite(x[i], i, "quantize_s8");
    q[i] = static_cast<std::int8_t>(round_clamped(x[i] / scale, -limit, limit));
  }
}

void dequantize_s8(std::span<const std::int8_t> q, float scale, std::span<float> x) {
  require_same_length(q.size(), x.size(), "dequantize_s8");
  for (std::size_t i = 0; i < q.size(); ++i) x[i] = static_cast<float>(q[i]) * scale;
}

std::vector<float> calibrate_s8_columns(std::span<const float> b, std::int64_t k, std::int64_t n) {
  require_matrix(b.size(), k, n, "calibrate_s8_columns");
  const auto cols = static_cast<std::size_t>(n);
  std::vector<float> max_abs(cols, 0.0f);
  for (std::size_t i = 0; i < b.size(); ++i) {
    require_finite(b[i], i, "calibrate_s8_columns");
    max_abs[i % cols] = std::max(max_abs[i % cols], std::abs(b[i]));
  }
  for (auto& s : max_abs) s = symmetric_scale(s);
  return max_abs;
}

void quantize_s8_columns(std::span<const float> b, std::int64_t k, std::int64_t n, std::span<const float> scales,
                         std::span<std::int8_t> q) {
  require_matrix(b.size(), k, n, "quantize_s8_columns");
  require_same_length(b.size(), q.size(), "quantize_s8_columns");
  require_same_length(scales.size(), static_cast<std::size_t>(n), "quantize_s8_columns (scales per column)");
  constexpr auto limit = static_cast<float>(kS8Max);
  const auto cols = static_cast<std::size_t>(n);
  for (std::size_t i = 0; i < b.size(); ++i) {
    require_finite(b[i], i, "quantize_s8_columns");
    q[i] = static_cast<std::int8_t>(round_clamped(b[i] / scales[i % cols], -limit, limit));
  }
}

void dequantize_s8_columns(std::span<const std::int8_t> q, std::int64_t k, std::int64_t n,
                           std::span<const float> scales, std::span<float> b) {
  require_matrix(q.size(), k, n, "dequantize_s8_columns");
  require_same_length(q.size(), b.size(), "dequantize_s8_columns");
  require_same_length(scales.size(), static_cast<std::size_t>(n), "dequantize_s8_columns (scales per column)");
  const auto cols = static_cast<std::size_t>(n);
  for (std::size_t i = 0; i < q.size(); ++i) b[i] = static_cast<float>(q[i]) * scales[i % cols];
}

// ---------------------------------------------------------------- bf16, fp16

void round_to_bf16(std::span<const float> x, std::span<std::uint16_t> out) {
  require_same_length(x.size(), out.size(), "round_to_bf16");
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t u = std::bit_cast<std::uint32_t>(x[i]);
    if (std::isnan(x[i])) {
      out[i] = static_cast<std::uint16_t>((u >> 16) | 0x0040);  // keep sign and payload top, force quiet
      continue;
    }
    // Add just under half an ulp of bf16, plus one if the kept part is odd:
    // round to nearest, ties to even. A carry into the exponent is right,
    // up to infinity.
    u += 0x7fffu + ((u >> 16) & 1u);
    out[i] = static_cast<std::uint16_t>(u >> 16);
  }
}

void round_to_f16(std::span<const float> x, std::span<std::uint16_t> out) {
  require_same_length(x.size(), out.size(), "round_to_f16");
  // GCC's _Float16 conversion is IEEE round to nearest even (F16C or
  // AVX512-FP16 instructions where the build targets them, libgcc otherwise).
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x[i]));
}

float bf16_to_float(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

float f16_to_float(std::uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }

}  // namespace dlb
