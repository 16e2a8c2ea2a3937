// Own Winograd for a 3x3 filter at stride 2 on NHWC activations whose
// channel counts are multiples of 16 (as conv_winograd_nhwc.h's, whose
// GEMM it shares): the conv family's cpu_winograd_s2_nhwc, and the
// stride-2 convs of nn's cpu_onednn_ownwino (resnet20's two, 16 to 32 and
// 32 to 64 channels), bias, residual sum and ReLU fused into the output
// transform.
//
// Split by the parity of the padded input's rows and columns, a stride-2
// 3x3 conv is the sum of four stride-1 convs on the four phase images
// (half the size): filters [w0 w2] along an axis of even phase, [w1] along
// one of odd phase, i.e. 2x2, 2x1, 1x2 and 1x1 filters. Each is Winograd's
// F(4, 2) per axis on the points 0, 1, -1, 2 and infinity (5x5 transformed
// tiles), a one-tap filter taken as [w1 0], whose transform is zero at
// infinity: there the product is left out, and the input transform of that
// phase needs 4 of the 5 values and makes 4. The four products are summed
// in the transformed domain, so one output transform serves them:
//     Y = A^T [ sum_(phase, c) (G g_pc G^T) .* (B^T d_pc B) ] A
// A^T = [1 1 1 1 0; 0 1 -1 2 0; 0 1 1 4 0; 0 1 -1 8 1],
// G = [1/2 0; -1/2 -1/2; -1/6 1/6; 1/6 1/3; 0 1],
// B^T = [2 -1 -2 1 0; 0 -2 -1 1 0; 0 2 -3 1 0; 0 -1 0 1 0; 0 2 -1 -2 1].
// Per 4x4 output tile and channel pair 25 + 20 + 20 + 16 = 81 products
// instead of 144, from a 9x9 input window (tiles 8 pixels apart): at
// 16 of the 25 elements all four phases (a GEMM over 4c), at 8 two, at
// one only the even-even phase. Blocks of tiles, threads and GEMM as
// conv_winograd_nhwc.h's.
//
// Rounding: B^T's entries are small integers (each element of B^T d rounds
// at most three times, its magnitude at most 6 max|d|), U is computed in
// double and rounded once, and A^T's largest entry is 8 (F(4x4, 3x3)'s
// A^T, whose error the conv family's 1e-5 bound covers, has the same; its
// B^T has 5s and its G 1/24). Measured against the double reference in
// tests/test_conv.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/common/buffer.h"

namespace dlb {

class ThreadScratch;

class WinogradStride2Nhwc {
 public:
  // Whether this kernel computes the problem: a 3x3 filter at stride 2,
  // input and output channels multiples of 16.
  static bool accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t s, std::int64_t stride);

  // w: [k][c][3][3] (OIHW), transformed here (in double) once. scratch: as
  // WinogradNhwc's. Throws Unsupported where accepts() is false.
  WinogradStride2Nhwc(const float* w, std::int64_t k, std::int64_t c, std::shared_ptr<ThreadScratch> scratch = nullptr);
  ~WinogradStride2Nhwc();
  WinogradStride2Nhwc(const WinogradStride2Nhwc&) = delete;
  WinogradStride2Nhwc& operator=(const WinogradStride2Nhwc&) = delete;

  // y[i][oy][ox][o] = relu?(bias[o] + (accumulate ? y[i][oy][ox][o] : 0) + conv(x)[i][oy][ox][o]),
  // x [n][h][w][c], y [n][oh][ow][k], oh = (h + 2 pad - 3) / 2 + 1 (ow
  // alike), zero padding `pad` on every side; bias may be null. Every
  // element of y is written. Throws dlb::Error for a shape with no output.
  // Not reentrant.
  void operator()(const float* x, std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t pad,
                  const float* bias, bool accumulate, bool relu, float* y) const;

 private:
  std::int64_t k_, c_;
  HostBuffer<float> u_;  // per element xi: [k / 16][phases at xi * c][16]
  std::shared_ptr<ThreadScratch> scratch_;
};

}  // namespace dlb
