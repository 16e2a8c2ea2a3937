#include "kernels/nn/cpu_layers.h"

#include <algorithm>

namespace dlb::nn {

CpuActivations::CpuActivations(const NetArgs& args) : args_(args) {
  const auto& layers = args.net->layers;
  for (std::size_t i = 0; i + 1 < layers.size(); ++i)
    buffers_.emplace_back(static_cast<std::size_t>(args.batch * layers[i].out_size()));
}

const float* CpuActivations::input(std::size_t i) const {
  const int from = args_.net->layers[i].input;
  return from < 0 ? args_.x : buffers_[static_cast<std::size_t>(from)].data();
}

const float* CpuActivations::residual(std::size_t i) const {
  const int from = args_.net->layers[i].residual;
  return from < 0 ? nullptr : buffers_[static_cast<std::size_t>(from)].data();
}

float* CpuActivations::output(std::size_t i) {
  return i + 1 == args_.net->layers.size() ? args_.y : buffers_[i].data();
}

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
