// The own AVX-512 VNNI GEMM (gemm_vnni.cpp) with the output stage of a
// quantized network layer fused into its register tiles, for the int8
// networks (kernels/nn): per output element, with acc the exact integer
// product of GemmArgs (zero point compensated),
//     v = fma(fp32(acc), c_scale[j], bias[j])                       (one rounding)
//     v += (residual[i,j] - residual_zero_point) * residual_scale   (if residual)
//     v = max(v, 0)                                                  (if relu)
// then either stored as fp32 into out_f32[i,j], or requantized to the next
// layer's u8: out_u8[i,j] = clamp(round_even(v * (1 / out_scale)) +
// out_zero_point, 0, 255). Rows of residual, out_u8 and out_f32 are n apart
// (row-major [m, n]). GemmArgs::c is not used.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/gemm/gemm.h"

namespace dlb {

struct VnniOutput {
  const float* bias = nullptr;              // [n], required
  const std::uint8_t* residual = nullptr;   // [m, n] u8, or null
  float residual_scale = 1;
  std::int32_t residual_zero_point = 0;
  bool relu = false;
  std::uint8_t* out_u8 = nullptr;           // one of out_u8 and out_f32
  float out_scale = 1;
  std::int32_t out_zero_point = 0;
  float* out_f32 = nullptr;
};

// Rows of A made on demand instead of read from GemmArgs::a_u8 (a conv's
// patches, gathered from its input): gather(row0, rows, dst) writes rows
// [row0, row0 + rows) of A, k bytes each, to dst. Called once per tile of
// rows, into a buffer of the calling thread that stays in L1 while the tile
// meets every panel of B: the patches never go to memory.
using GatherRows = std::function<void(std::int64_t row0, int rows, std::uint8_t* dst)>;

// A as overlapping views of a padded NHWC image: the implicit GEMM of a
// stride-1 conv, with no patch matrix at all, not even a tile of one. The
// window is window_rows x window_cols pixels; the image is
// [images][rows + window_rows - 1][cols + window_cols - 1][channels] u8,
// padded around with the code of 0. Row i of A is output pixel (image, y, x)
// (NHWC order: m = images * rows * cols), and its patch is `window_rows`
// runs of window_cols * channels contiguous bytes, run s starting at pixel
// (y + s, x) of the padded image; B's rows are in the same order,
// ((s * window_cols + t) * channels + c). Requires window_cols * channels %
// 4 == 0 (a group of 4 bytes of k never straddles two runs).
// A conv's r x r window is r x r here; an image whose pixels already hold
// the r horizontal taps of their window row (a 1-channel input expanded to
// 4 bytes a pixel) is r x 1.
// How: a tile's rows are consecutive pixels of one output row, so they are
// `channels` bytes apart in every run.
struct ShiftedImage {
  const std::uint8_t* data = nullptr;
  std::int64_t images = 0, rows = 0, cols = 0, channels = 0;
  std::int64_t window_rows = 0, window_cols = 0;
};

// As prepare_gemm_vnni_s8 (B packed now, A read, gathered or viewed at each
// call); requires AVX-512 VNNI (cpu_has_avx512_vnni()). With an image,
// GemmArgs::a_u8 is not used.
Run prepare_gemm_vnni_s8_out(const GemmArgs& args, const VnniOutput& out, GatherRows gather = {});
Run prepare_gemm_vnni_s8_out(const GemmArgs& args, const VnniOutput& out, const ShiftedImage& image);

}  // namespace dlb
