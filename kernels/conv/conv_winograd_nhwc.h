// Own Winograd F(4x4, 3x3) (Lavin and Gray) on NHWC activations whose
// channel counts are multiples of 16, so that one pixel's 16 channels are one
// AVX-512 vector: the conv family's cpu_winograd_nhwc, the kernel that a
// network keeping NHWC activations calls with its epilogue (bias, residual
// sum, ReLU) fused into the output transform (nn's cpu_onednn_ownwino),
// and the training step's (cpu_onednn_wino) forward and backward data on
// oneDNN's nChw16c, which keeps 16 channels of a pixel adjacent too
// (blocked16.h).
//
// Each 4x4 output tile comes from a 6x6 input tile (neighbours overlap by 2):
//     Y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A
// 36 multiplications per tile and channel pair instead of 144. The tiles of
// the batch are numbered (image, tile row, tile column) and done a block of
// T at a time (T = 8 with AVX-512, 6 with AVX2; 2T where the transformed
// filters are large: conv_winograd_nhwc.cpp), start to end in cache: the
// input transform of the T tiles' channels into V [36][T][c]; per 16
// output channels, 36 GEMMs of [T x c] x [c x 16] with the accumulators of
// 8 or 6 tiles in registers (a channel of V broadcast, 16 filter values
// loaded once per 8 or 6 tiles) into M [36][T][16]; the output transform of
// M, the epilogue, and the store. Threads split the blocks, and where there
// are fewer than two per thread (batch 1), the output channels. A group of
// at most 4 tiles (the last, or all of an 8x8 image's) runs a GEMM of 4
// tiles.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/conv/blocked16.h"

namespace dlb {

class ThreadScratch;

// The batch's moments of what a forward stores, per output channel: the
// training step's batch-norm statistics, taken as the output is written
// instead of in two more passes over it (train_onednn.cpp). Each thread
// sums (y - shift) and (y - shift)^2 in float over a block's tiles (at most
// 12 x 16 terms: 12 tiles of 16 outputs, two groups of 6 with AVX2; 8 with
// AVX-512), then in double; mean = shift + S1 / M and variance = S2 / M -
// (S1 / M)^2 in double (biased, as batch-norm's forward in training:
// M = n oh ow). The shift is a guess of the mean (the running mean): the
// subtraction loses about (mean - shift)^2 / variance of the variance's
// relative precision, nothing when the guess is close.
struct ChannelMoments {
  const float* shift = nullptr;  // [k]
  float* mean = nullptr;         // [k]
  float* variance = nullptr;     // [k]
};

class WinogradNhwc {
 public:
  // Whether this kernel computes the problem: a 3x3 filter at stride 1,
  // input and output channels multiples of 16.
  static bool accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t s, std::int64_t stride);

  // w: [k][c][3][3] (OIHW), transformed here (G g G^T, in double) once.
  // scratch: where given, the per-thread scratch this kernel shares with
  // others that never run at the same time (it reserves its need there:
  // kernels/common/thread_scratch.h), else its own. Throws Unsupported
  // where accepts() is false.
  WinogradNhwc(const float* w, std::int64_t k, std::int64_t c, std::shared_ptr<ThreadScratch> scratch = nullptr);
  ~WinogradNhwc();
  // New weights (the same shapes, OIHW), transformed as the constructor
  // does: for a caller whose weights change between calls (the training
  // step's cpu_onednn_wino). Not while a call runs.
  void set_weights(const float* w);
  // The per-thread scratch it needs (transformed input and GEMM output),
  // in bytes, all threads together (shared or not).
  std::int64_t workspace_bytes() const;
  WinogradNhwc(const WinogradNhwc&) = delete;
  WinogradNhwc& operator=(const WinogradNhwc&) = delete;

  // y[i][oy][ox][o] = relu?(bias[o] + (accumulate ? y[i][oy][ox][o] : 0) + conv(x)[i][oy][ox][o]),
  // x [n][h][w][c], y [n][h + 2 pad - 2][w + 2 pad - 2][k], zero padding `pad`
  // on every side; bias may be null (zeros). Every element of y is written.
  // pool: y is that output's 2x2 max pool at stride 2 instead (floor:
  // [n][oh / 2][ow / 2][k], an odd last row or column dropped), the
  // maximum of four outputs taken in the output transform (a network's
  // conv and the pool that alone reads it, in one pass over the output);
  // not with accumulate. Throws dlb::Error for a shape with no output.
  // Not reentrant: one call at a time per object (its scratch is its own).
  void operator()(const float* x, std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t pad,
                  const float* bias, bool accumulate, bool relu, bool pool, float* y) const;
  // The same with x and y in the layouts x_at and y_at (blocked16.h: NHWC
  // or oneDNN's nChw16c, the training step's), y_at the pooled output's
  // with pool.
  void operator()(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t h, std::int64_t w,
                  std::int64_t pad, const float* bias, bool accumulate, bool relu, bool pool, float* y,
                  const Blocked16& y_at) const;
  // The same, no pool and no residual sum, with y's moments (the values
  // stored, after the bias and ReLU) into `moments`.
  void operator()(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t h, std::int64_t w,
                  std::int64_t pad, const float* bias, bool relu, float* y, const Blocked16& y_at,
                  const ChannelMoments& moments) const;

 private:
  void run(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t pad,
           const float* bias, bool accumulate, bool relu, bool pool, float* y, const Blocked16& y_at,
           const ChannelMoments* moments) const;

  std::int64_t k_, c_;
  HostBuffer<float> u_;  // G g G^T as [36][k / 16][c][16]
  std::shared_ptr<ThreadScratch> scratch_;
  mutable std::vector<double> moment_parts_;  // per thread: the sums of (y - shift) [k], then of its squares [k]
};

}  // namespace dlb
