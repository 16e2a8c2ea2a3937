// Own Winograd weight gradient of a 3x3 stride-1 convolution, F(3x3, 4x4)
// on the points 0, +-1, +-2 and infinity (winograd_f43.h), for the
// training step's cpu_onednn_wino (kernels/nn/train/train_onednn.cpp):
//     dW[k][c][a][b] = sum_{n, y, x} dy[n][k][y][x] * x[n][c][y + a - pad][x + b - pad]
// The output gradient is cut into the forward's 4x4 tiles; a tile's
// gradients are the filter of a 3x3 correlation over its 6x6 input window,
// so with U = G' dy G'^T and V = B^T x B (6x6 each, 16 channels a vector)
//     dW[k][c] = A'^T [ sum_tiles U[k] . V[c] ] A'
// 36 multiplications per tile and channel pair instead of 144. The sum over
// the tiles is 36 GEMMs, M[xi][c][k] += V[xi][tile][c] U[xi][tile][k], run
// on blocks of 32 tiles with the accumulators of 8 input channels by two
// vectors of output channels (or 16 by one; 6 by one with AVX2's 16
// registers) in registers; each thread sums
// its share of the blocks into its own M, the threads' M are added in
// thread order (deterministic for a thread count) and A'^T M A' is taken in
// double, rounded once.
//
// Layouts: x and dy each in one of the layouts that keep a pixel's channels
// in groups of 16, given by their strides (blocked16.h): NHWC or oneDNN's
// nChw16c and nChw8c, the training step's. dW is OIHW.
//
// Error: each dW element is a sum of batch x tiles products, each product
// through at most 3 + 3 roundings in each transform (two passes) and one
// in the product; the magnitude factor of the transforms' constants is
// 177.78 (nn::winograd_magnitude_factor of F(3, 4) on these points). So
// |error| <= gamma(batch tiles + 13) times the sum over tiles of
// |A'^T| (|G'| |dy| |G'^T| . |B^T| |x| |B|) |A'| (the test's bound), and
// the training step's bound counts 177.78^2 (batch tiles + 19).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/conv/blocked16.h"

namespace dlb {

class ThreadScratch;

class WinogradWeightGrad {
 public:
  // Whether this kernel computes the problem: a 3x3 filter at stride 1,
  // input and output channels multiples of 16.
  static bool accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t s, std::int64_t stride);

  // scratch: where given, the per-thread scratch this kernel shares with
  // others that never run at the same time (it reserves its need there:
  // kernels/common/thread_scratch.h), else its own. Throws Unsupported
  // where accepts() is false.
  WinogradWeightGrad(std::int64_t k, std::int64_t c, std::shared_ptr<ThreadScratch> scratch = nullptr);
  ~WinogradWeightGrad();
  WinogradWeightGrad(const WinogradWeightGrad&) = delete;
  WinogradWeightGrad& operator=(const WinogradWeightGrad&) = delete;

  // dw [k][c][3][3] (overwritten) from x [n][c][h][w] and dy [n][k][oh][ow],
  // oh = h + 2 pad - 2, ow = w + 2 pad - 2, zero padding `pad` (0 to 2);
  // where db is given, the bias gradient db [k] (overwritten), dy summed
  // over n, y, x as the tiles read it (each tile's up to 16 in float, the
  // tiles' sums in double, rounded once: |error| <= gamma(16) sum |dy|).
  // Throws dlb::Error for a shape with no output. Not reentrant: one call
  // at a time per object (its scratch is its own).
  void operator()(const float* x, const Blocked16& x_at, const float* dy, const Blocked16& dy_at, std::int64_t n,
                  std::int64_t h, std::int64_t w, std::int64_t pad, float* dw, float* db = nullptr) const;

  // The per-thread scratch it needs (transformed tiles and partial sums),
  // in bytes, all threads together (shared or not).
  std::int64_t workspace_bytes() const;

 private:
  std::int64_t k_, c_;
  std::shared_ptr<ThreadScratch> scratch_;
  mutable std::vector<double> bias_parts_;  // [thread][k]: each thread's bias sums
};

}  // namespace dlb
