// Batch-norm with given statistics, a residual join and a ReLU in one pass,
// on the layouts that keep a pixel's channels in groups of 16
// (blocked16.h: NHWC, oneDNN's nChw16c and nChw8c): the training step's
// cpu_onednn_wino where the own Winograd forward took the batch statistics
// (conv_winograd_nhwc.h, ChannelMoments) and a join follows batch-norm.
// oneDNN's batch-norm forward and its binary add read and write the
// output twice; this reads z and the residual once and writes y once.
//
// Per channel c: y = relu?((z - mean[c]) * s[c] + beta[c] + r), with
// s[c] = gamma[c] / sqrt(variance[c] + eps) in float; each operation
// rounds at most once in float (the subtraction, the product, the two
// additions, s's sum, square root and division; the compiler may fuse the
// product and the addition after it into one rounding).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/conv/blocked16.h"

namespace dlb {

struct BatchNormJoin {
  const float* mean = nullptr;      // [c]
  const float* variance = nullptr;  // [c], biased, as batch-norm's training forward
  const float* gamma = nullptr;     // [c]
  const float* beta = nullptr;      // [c]
  float eps = 0.0f;
  bool relu = true;
};

// y from z and r ([n][c][h][w] each, in their layouts; y may be r or z
// where it has that one's layout),
// on `threads` OpenMP threads. Throws dlb::Error unless c is a positive
// multiple of 16 and every pointer is given.
void batch_norm_join_forward(const float* z, const Blocked16& z_at, const float* r, const Blocked16& r_at,
                             std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, const BatchNormJoin& p,
                             float* y, const Blocked16& y_at, int threads);

// The backward of the above with relu, where the join's output y (kept)
// says where the ReLU passed: d = dy where y > 0, else 0, written to `d`
// (the residual's gradient and batch-norm's output gradient), then
// batch-norm's backward in training mode from the same statistics:
//   xhat = (z - mean) / sqrt(variance + eps), M = n h w,
//   dbeta[c] = sum d, dgamma[c] = sum d xhat,
//   dz = gamma / sqrt(variance + eps) (d - dbeta / M - xhat dgamma / M),
// dz written to `dz` (which may be dy's buffer: dy is read first). Two
// passes: d with the sums (each image's run of h w pixels summed in float,
// the runs in double), then dz; oneDNN's ReLU backward and batch-norm
// backward make three, reading d and z twice. Each operation on an element
// rounds at most once in float.
struct BatchNormJoinGrads {
  float* d = nullptr;       // [n][c][h][w], d_at
  float* dz = nullptr;      // [n][c][h][w], dz_at
  float* dgamma = nullptr;  // [c]
  float* dbeta = nullptr;   // [c]
};
// Its per-channel buffers, kept by the caller so that a step's calls
// allocate nothing (sized on the first call).
struct BatchNormJoinWork {
  std::vector<float> channels;  // 1 / sqrt(variance + eps), mean d, mean d xhat: [3][c]
  std::vector<double> sums;     // per thread: sum d [c], then sum d xhat [c]
};
void batch_norm_join_backward(const float* dy, const Blocked16& dy_at, const float* y, const Blocked16& y_at,
                              const float* z, const Blocked16& z_at, std::int64_t n, std::int64_t c, std::int64_t h,
                              std::int64_t w, const BatchNormJoin& p, const BatchNormJoinGrads& g,
                              const Blocked16& d_at, const Blocked16& dz_at, int threads, BatchNormJoinWork& work);

}  // namespace dlb
