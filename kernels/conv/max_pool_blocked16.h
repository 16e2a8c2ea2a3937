// 2x2 stride-2 max pooling, forward and backward, on the layouts that keep
// a pixel's channels in groups of 16 (blocked16.h: NHWC, oneDNN's nChw16c
// and nChw8c), for the training step's cpu_onednn_wino: oneDNN 2.6's
// jit:avx2 pool on nChw8c took 2.95 ms forward and 2.18 backward a call on
// mnist_cnn's 64 x 64 x 24 x 24 (Zen 3 VM, ONEDNN_VERBOSE), many times
// what reading its 9.4 MB costs.
//
// Semantics: PyTorch's max_pool2d(kernel 2, stride 2), no padding, floor
// mode: y[n][c][oy][ox] = the maximum of x over rows 2 oy, 2 oy + 1 and
// columns 2 ox, 2 ox + 1 (a row or column past 2 oh, 2 ow is read by no
// window). The backward routes each dy to the first element of its window,
// in row-major order, equal to the maximum, as PyTorch's index does, and
// writes zeros everywhere else; it recomputes the maximum from x with the
// forward's operations (the same floats), so it needs no workspace. A
// window holding a NaN (no element equal to its maximum, which ignores
// NaN) sends its gradient to its last element.
#pragma once

#include <cstdint>

#include "kernels/conv/blocked16.h"

namespace dlb {

// Whether the pool takes channels c (a multiple of 16) and h, w (at least 2).
bool max_pool2x2_accepts(std::int64_t c, std::int64_t h, std::int64_t w);

// y [n][c][h / 2][w / 2] from x [n][c][h][w], on `threads` OpenMP threads.
// Throws dlb::Error where max_pool2x2_accepts is false.
void max_pool2x2_forward(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, float* y, const Blocked16& y_at, int threads);

// dx [n][c][h][w] (overwritten) from x and dy [n][c][h / 2][w / 2].
void max_pool2x2_backward(const float* x, const Blocked16& x_at, const float* dy, const Blocked16& dy_at,
                          std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, float* dx,
                          const Blocked16& dx_at, int threads);

}  // namespace dlb
