// Own direct convolution of a network's first layer: an NCHW input of few
// channels (an image's 1 or 3) into an NHWC output whose channel count is a
// multiple of 16, so that one output pixel's 16 channels are one AVX-512
// vector, with the bias and ReLU fused: the kernel nn's cpu_onednn_ownwino
// runs its first conv on where it times faster than oneDNN's (whose jit
// kernels block the input channels by 16 and waste most of each vector on
// 3 of them; the next layer, own Winograd on NHWC, reads this one's
// output as it is).
//
// Per image, the input is copied once into a zero-padded plane per channel.
// Per output row and block of 16 output channels, 8 output pixels at a time
// hold their accumulators in registers: for each of the c r r taps, the
// 16 weights are one vector load and each pixel's input one broadcast, so a
// tap is 8 FMAs. Threads split (image, output row) items.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/common/buffer.h"

namespace dlb {

class ThreadScratch;

class FewChannelsNhwc {
 public:
  // Whether this kernel computes the problem: stride 1, output channels a
  // multiple of 16, at most 64 taps (c r r) an output.
  static bool accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t stride);

  // w: [k][c][r][r] (OIHW), repacked here once. h and w: the input's
  // sides, for the per-thread padded planes. Throws Unsupported where
  // accepts() is false.
  FewChannelsNhwc(const float* w, std::int64_t k, std::int64_t c, std::int64_t r, std::int64_t h,
                  std::int64_t width, std::int64_t pad);
  ~FewChannelsNhwc();
  FewChannelsNhwc(const FewChannelsNhwc&) = delete;
  FewChannelsNhwc& operator=(const FewChannelsNhwc&) = delete;

  // y[i][oy][ox][o] = relu?(bias[o] + conv(x)[i][o][oy][ox]), x [n][c][h][w]
  // (the sides given to the constructor), y [n][h + 2 pad - r + 1][w + 2 pad
  // - r + 1][k]; bias may be null (zeros). Every element of y is written.
  // Not reentrant: one call at a time per object (its scratch is its own).
  void operator()(const float* x, std::int64_t n, const float* bias, bool relu, float* y) const;

  std::int64_t out_h() const { return h_ + 2 * pad_ - r_ + 1; }
  std::int64_t out_w() const { return w_ + 2 * pad_ - r_ + 1; }

 private:
  std::int64_t k_, c_, r_, h_, w_, pad_;
  HostBuffer<float> weights_;  // [k / 16][c][r][r][16]
  std::unique_ptr<ThreadScratch> scratch_;  // per thread: [c][h + 2 pad][w + 2 pad]
};

}  // namespace dlb
