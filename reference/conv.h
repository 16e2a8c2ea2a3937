// Reference 2-D forward convolution: the definition, in double precision.
//   y[n][k][oh][ow] = sum_{c,r,s} x[n][c][oh*stride + r - pad][ow*stride + s - pad] * w[k][c][r][s]
// x [n, c, h, w], w [k, c, r, s], y [n, k, oh, ow], zero padding. Plain loops,
// accumulated in double; OpenMP over (n, k) planes only, so each output
// element is the same sum in the same order whatever the thread count.
#pragma once

#include <span>

#include "kernels/conv/conv.h"

namespace dlb::ref {

void conv(const ConvShape& shape, std::span<const float> x, std::span<const float> w, std::span<double> y);

}  // namespace dlb::ref
