// The activation layouts that keep 16 channels of a pixel adjacent, as the
// own Winograd kernels (conv_winograd_nhwc.h, conv_winograd_wgrad.h) read
// and write them: NHWC with channels in multiples of 16, and oneDNN's
// nChw16c (the training step's blocked layout on AVX-512).
#pragma once

#include <cstdint>

namespace dlb {

// Where element (image, channel, y, x) of a [n][c][h][w] activation lies:
// image * image + (channel / 16) * block + (y * w + x) * pixel + channel % 16.
struct Blocked16 {
  std::int64_t image = 0, block = 0, pixel = 0;
  static Blocked16 nhwc(std::int64_t c, std::int64_t h, std::int64_t w) { return {h * w * c, 16, c}; }
  static Blocked16 nchw16c(std::int64_t c, std::int64_t h, std::int64_t w) { return {c * h * w, h * w * 16, 16}; }
};

}  // namespace dlb
