// Quantization for the reduced-precision GEMMs: calibration (min/max),
// quantize and dequantize, and the rounding of fp32 to bf16 and fp16. All on
// the host, outside any timed region: a framework quantizes weights once and
// activations in the layer before, so the GEMM benchmarks time only the GEMM.
//
// Activations: per-tensor asymmetric uint8,
//     x ~ scale * (q - zero_point),  q = clamp(round(x / scale) + zero_point, 0, 255)
// with scale and zero point from the tensor's min and max, the range first
// widened to include 0 so that 0 is exactly representable (q = zero_point).
// Weights: symmetric int8, x ~ scale * q, q = clamp(round(x / scale), -127, 127),
// scale = max|x| / 127, per tensor or per output channel (one scale per
// column of B [k,n]: column j produces output feature j). -128 is never
// produced, so the range is symmetric.
//
// Round trip: |dequantize(quantize(x)) - x| <= scale/2 for every x inside the
// calibrated range, up to the fp32 rounding of x / scale and of the
// dequantizing product. A tensor of zeros gets scale 1 (not 0: no division by
// zero); a constant tensor c != 0 gets the range [min(c,0), max(c,0)].
// Rounding is to nearest, ties to even (the CPU's default, as in oneDNN and
// FBGEMM). Non-finite inputs are refused (dlb::Error).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace dlb {

// ---------------------------------------------------------------- uint8, per tensor, asymmetric

struct AffineU8 {
  float scale = 1.0f;
  std::int32_t zero_point = 0;  // in [0, 255]
};

AffineU8 calibrate_u8(std::span<const float> x);
// The same from a range already measured (a calibration file): widened to
// include 0; lo <= hi, both finite.
AffineU8 affine_u8(float lo, float hi);
void quantize_u8(std::span<const float> x, AffineU8 params, std::span<std::uint8_t> q);
void dequantize_u8(std::span<const std::uint8_t> q, AffineU8 params, std::span<float> x);

// ---------------------------------------------------------------- int8, symmetric

inline constexpr int kS8Max = 127;  // quantized weights lie in [-127, 127]

// Per tensor: max|x| / 127 (1 for a tensor of zeros).
float calibrate_s8(std::span<const float> x);
void quantize_s8(std::span<const float> x, float scale, std::span<std::int8_t> q);
void dequantize_s8(std::span<const std::int8_t> q, float scale, std::span<float> x);

// Per output channel of B [k,n] row-major: scales[j] = max_p |B[p,j]| / 127.
std::vector<float> calibrate_s8_columns(std::span<const float> b, std::int64_t k, std::int64_t n);
void quantize_s8_columns(std::span<const float> b, std::int64_t k, std::int64_t n, std::span<const float> scales,
                         std::span<std::int8_t> q);
void dequantize_s8_columns(std::span<const std::int8_t> q, std::int64_t k, std::int64_t n,
                           std::span<const float> scales, std::span<float> b);

// ---------------------------------------------------------------- bf16 and fp16, as raw bits

// Round to nearest even; overflow gives infinity, NaN stays a (quiet) NaN.
void round_to_bf16(std::span<const float> x, std::span<std::uint16_t> out);
void round_to_f16(std::span<const float> x, std::span<std::uint16_t> out);
// Exact widening back to fp32.
float bf16_to_float(std::uint16_t bits);
float f16_to_float(std::uint16_t bits);

}  // namespace dlb
