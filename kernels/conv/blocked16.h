// The activation layouts that keep 16 channels of a pixel at two places
// of 8 (or one of 16), as the own Winograd kernels (conv_winograd_nhwc.h,
// conv_winograd_wgrad.h) read and write them: NHWC with channels in
// multiples of 16, and oneDNN's nChw16c and nChw8c (the training step's
// blocked layouts with AVX-512 and with AVX2). The kernels' vectors are 16
// lanes, on AVX2 a pair of 8: each half of the pair loads from its place.
#pragma once

#include <cstdint>
#include <cstring>

namespace dlb {

// Where element (image, channel, y, x) of a [n][c][h][w] activation lies:
// image * image + channel(channel) + (y * w + x) * pixel, where a group of
// 16 channels starts at (channel / 16) * block and its lanes 8-15 lie
// `half` floats after its lanes 0-7 (8 where the 16 are adjacent).
struct Blocked16 {
  std::int64_t image = 0, block = 0, pixel = 0, half = 8;
  static Blocked16 nhwc(std::int64_t c, std::int64_t h, std::int64_t w) { return {h * w * c, 16, c, 8}; }
  static Blocked16 nchw16c(std::int64_t c, std::int64_t h, std::int64_t w) { return {c * h * w, h * w * 16, 16, 8}; }
  // [n][c / 8][h][w][8]: a group of 16 is two blocks of 8, the second a
  // plane of 8-channel pixels later.
  static Blocked16 nchw8c(std::int64_t c, std::int64_t h, std::int64_t w) {
    return {c * h * w, h * w * 16, 8, h * w * 8};
  }
  std::int64_t channel(std::int64_t ch) const {
    const std::int64_t lane = ch % 16;
    return ch / 16 * block + (lane < 8 ? lane : half + lane - 8);
  }
};

// Half a 16-channel group, 8 floats (a ymm register with AVX2 or
// AVX-512), GCC's vector extension, and its unaligned load and store: the
// own passes over these layouts (max_pool_blocked16.cpp,
// batch_norm_join_blocked16.cpp) work a half at a time.
namespace half8 {
using v8 = float __attribute__((vector_size(32)));
inline v8 read(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void write(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }
}  // namespace half8

}  // namespace dlb
