#include "kernels/nn/layers.h"

#include <algorithm>

namespace dlb::nn {

ConvShape conv_shape(const Layer& l, std::int64_t batch) {
  return ConvShape{batch, l.c, l.h, l.w, l.k, l.window, l.window, l.stride, l.pad};
}

void max_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t plane = 0; plane < batch * l.c; ++plane) {
    const float* in = x + plane * l.h * l.w;
    float* out = y + plane * l.oh * l.ow;
    for (std::int64_t i = 0; i < l.oh; ++i) {
      for (std::int64_t j = 0; j < l.ow; ++j) {
        const float* window = in + i * l.stride * l.w + j * l.stride;
        float m = window[0];
        for (std::int64_t a = 0; a < l.window; ++a)
          for (std::int64_t b = 0; b < l.window; ++b) m = std::max(m, window[a * l.w + b]);
        out[i * l.ow + j] = m;
      }
    }
  }
}

void global_avg_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y) {
  const std::int64_t plane = l.h * l.w;
  const float inv = 1.0f / static_cast<float>(plane);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < batch * l.c; ++p) {
    float sum = 0;
    for (std::int64_t i = 0; i < plane; ++i) sum += x[p * plane + i];
    y[p] = sum * inv;
  }
}

}  // namespace dlb::nn
