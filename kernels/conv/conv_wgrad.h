// The own weight gradient of a stride-1 convolution, for the training
// step's cpu_own row (kernels/nn/train.cpp):
//     dW[k][c][a][b] = sum_{n, y, x} dz[n][k][y][x] * x[n][c][y + a - p][x + b - p]
// x [n, c, h, w] and dz [n, k, oh, ow] as the step holds them (NCHW), dW
// [k, c, r, r] as PyTorch does.
//
// Why its own kernel: the direct kernel (conv_direct.cpp), which computed
// this as a convolution of x^T by dz^T, vectorises over output positions,
// 16 at a time along a row; here the outputs are only the r x r taps, so
// it computed 16 lanes to keep r (mnist_cnn's conv2: 9 of 80). This one
// vectorises over the output channels k instead, the GEMM
// dW[k, (c, a, b)] = dz[k, (n, y, x)] . X[(c, a, b), (n, y, x)] without its
// patch matrix: per position (y, x) of an image, V vectors of 16 channels
// of dz (dz transposed to [oh, ow, k] per image, k padded to whole
// vectors with zeros) times one broadcast value of x per tap (x zero-padded
// per image, so a tap is a fixed offset from the position), into V x T
// accumulators that stay in registers over the whole image. Every lane is
// an output.
//
// Threads: the images are split among the OpenMP threads, each summing its
// images' terms into its own partial dW; the partials are added in thread
// order (deterministic for a thread count). Each output is one fp32 lane
// summing its n*oh*ow terms, one FMA rounding per term, then the partials:
// the sum length the im2col step's gradient bound counts.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/conv/conv.h"

namespace dlb {

class ConvWeightGrad {
 public:
  // A square window at stride 1 (s == r, stride 1); throws dlb::Error
  // naming what else it was given.
  explicit ConvWeightGrad(const ConvShape& shape);
  ~ConvWeightGrad();
  ConvWeightGrad(const ConvWeightGrad&) = delete;
  ConvWeightGrad& operator=(const ConvWeightGrad&) = delete;

  // dw [k, c, r, r] = the gradient above, overwritten (not accumulated).
  void operator()(const float* x, const float* dz, float* dw) const;

  // The bytes it holds between calls: per thread, one image of x padded
  // and of dz transposed, and its partial dW.
  std::int64_t workspace_bytes() const;

 private:
  struct Plan;
  ConvShape p_;
  std::unique_ptr<Plan> plan_;
};

}  // namespace dlb
