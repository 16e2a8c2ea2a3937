// The transforms of Winograd's F(4x4, 3x3) and F(3x3, 4x4) on the points
// 0, +-1, +-2 and infinity, on 16-lane vectors (conv_simd.h): the own
// Winograd kernels' (conv_winograd_nhwc.cpp, the forward and backward data;
// conv_winograd_wgrad.cpp, the weight gradient). Both algorithms take the
// same 6-point input transform B^T; they differ in the filter transform G
// and the output transform A^T (nn::winograd_matrices builds all of them
// from the points). Internal to kernels/conv.
#pragma once

#include <cstdint>

#include "kernels/conv/blocked16.h"
#include "kernels/conv/conv_simd.h"

namespace dlb::winograd {

using simd::fmadd;
using simd::kLanes;
using simd::splat;
using simd::vfloat;

// o = B^T d for one 6-vector (d[j] are whole vectors of 16 channels, or
// parts of them: V is vfloat or simd::vhalf):
//   B^T = [4  0 -5  0 1 0; 0 -4 -4  1 1 0; 0 4 -4 -1 1 0;
//          0 -2 -1  2 1 0; 0  2 -1 -2 1 0; 0 4  0 -5 0 1]
// Each output rounds at most three times.
template <class V>
inline void input_transform6(const V (&d)[6], V (&o)[6]) {
  using simd::splat_as;
  const V a = fmadd(splat_as<V>(-4.0f), d[2], d[4]);        // d4 - 4 d2
  const V q = simd::fmsub(splat_as<V>(4.0f), d[1], d[3]);  // 4 d1 - d3
  const V b = d[4] - d[2], e = d[1] - d[3];
  o[0] = fmadd(splat_as<V>(4.0f), d[0], fmadd(splat_as<V>(-5.0f), d[2], d[4]));
  o[1] = a - q;
  o[2] = a + q;
  o[3] = fmadd(splat_as<V>(-2.0f), e, b);
  o[4] = fmadd(splat_as<V>(2.0f), e, b);
  o[5] = fmadd(splat_as<V>(4.0f), d[1], fmadd(splat_as<V>(-5.0f), d[3], d[5]));
}

// B^T d B of the 6x6 input window whose top-left pixel is (y0, x0) of one
// image (`image` its first element, `at` its layout, h x w pixels, c
// channels), zeros where the window lies outside the image: element (a, b)
// of channel group cb at v + (a * 6 + b) * stride + cb * 16. The forward's
// and backward data's tiles (conv_winograd_nhwc.cpp) and the weight
// gradient's (conv_winograd_wgrad.cpp) alike. A window wholly inside the
// image (most of them) loads without checks.
inline void input_tile(const float* image, const Blocked16& at, std::int64_t h, std::int64_t w, std::int64_t c,
                       std::int64_t y0, std::int64_t x0, float* v, std::int64_t stride) {
  using simd::vhalf;
  const bool inside = y0 >= 0 && y0 + 6 <= h && x0 >= 0 && x0 + 6 <= w;
  // A part of 16 channels at a time (conv_simd.h: on AVX2 8, whose 36 row
  // transforms take 36 ymm instead of 72), in one loop over the channel
  // groups' parts: GCC unrolled a loop over the two parts into one body,
  // which interleaved them, and spilled as the 16 lanes had (the 64x16x32x32
  // forward 916-924 us that way, 880-909 this one, 901-924 with no parts).
  for (std::int64_t item = 0; item < simd::kHalves * (c / kLanes); ++item) {
    const std::int64_t cb = item / simd::kHalves;
    const int part = static_cast<int>(item % simd::kHalves);
    const float* base = image + cb * at.block + simd::part_offset(part, at.half);
    vhalf rows[6][6];
    for (int i = 0; i < 6; ++i) {
      const std::int64_t row = y0 + i;
      vhalf d[6];
      if (inside) {
        const float* p = base + (row * w + x0) * at.pixel;
        for (int j = 0; j < 6; ++j) d[j] = simd::load_part(p + j * at.pixel, at.half);
      } else {
        for (int j = 0; j < 6; ++j) {
          const std::int64_t col = x0 + j;
          d[j] = row >= 0 && row < h && col >= 0 && col < w ? simd::load_part(base + (row * w + col) * at.pixel, at.half)
                                                             : vhalf{};
        }
      }
      input_transform6(d, rows[i]);
    }
    float* out = v + cb * kLanes + simd::part_offset(part, 8);
    for (int b = 0; b < 6; ++b) {
      const vhalf column[6] = {rows[0][b], rows[1][b], rows[2][b], rows[3][b], rows[4][b], rows[5][b]};
      vhalf o[6];
      input_transform6(column, o);
      for (int a = 0; a < 6; ++a) simd::store_part(out + (a * 6 + b) * stride, o[a], 8);
    }
  }
}

// F(4x4, 3x3)'s output transform, o = A^T m for one 6-vector:
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
inline void output_transform6(const vfloat (&m)[6], vfloat (&o)[4]) {
  const vfloat s12 = m[1] + m[2], d12 = m[1] - m[2], s34 = m[3] + m[4], d34 = m[3] - m[4];
  o[0] = m[0] + s12 + s34;
  o[1] = fmadd(splat(2.0f), d34, d12);
  o[2] = fmadd(splat(4.0f), s34, s12);
  o[3] = fmadd(splat(8.0f), d34, d12) + m[5];
}

// F(3x3, 4x4), the weight gradient's (a tile's 4x4 output gradients the
// filter over its 6x6 inputs, the 3x3 taps its outputs): its filter
// transform G, 6 x 4, is
//   [1/4 0 0 0; -1/6 -1/6 -1/6 -1/6; -1/6 1/6 -1/6 1/6;
//    1/24 1/12 1/6 1/3; 1/24 -1/12 1/6 -1/3; 0 0 0 1]
// and its output transform A^T, 3 x 6, [1 1 1 1 1 0; 0 1 -1 2 -2 0;
// 0 1 1 4 4 1]. Here G's rows are taken times kF34RowScale (G' = S G, whose
// entries are small integers, so that the transform rounds only in its
// additions, at most three times an output) and A^T's columns divided by
// the same (A'^T = A^T S^-1, applied in double after the sum): A'^T (G' g .
// B^T d) = A^T (G g . B^T d).
inline constexpr double kF34RowScale[6] = {4.0, -6.0, -6.0, 24.0, 24.0, 1.0};
// F(3x3, 4x4)'s A^T, which the weight gradient applies in double after the
// sum over the tiles, its columns divided by kF34RowScale there.
inline constexpr double kF34OutputTransform[3][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 1}};

// o = G' g for one 4-vector:
//   G' = [1 0 0 0; 1 1 1 1; 1 -1 1 -1; 1 2 4 8; 1 -2 4 -8; 0 0 0 1]
inline void filter_transform4(const vfloat (&g)[4], vfloat (&o)[6]) {
  const vfloat s02 = g[0] + g[2], s13 = g[1] + g[3];
  const vfloat e = fmadd(splat(4.0f), g[2], g[0]), f = fmadd(splat(8.0f), g[3], splat(2.0f) * g[1]);
  o[0] = g[0];
  o[1] = s02 + s13;
  o[2] = s02 - s13;
  o[3] = e + f;
  o[4] = e - f;
  o[5] = g[3];
}

}  // namespace dlb::winograd
