#include "kernels/nn/train/plain_loops.h"

#include <algorithm>

namespace dlb::nn::plain {

void conv_forward(const Layer& l, std::int64_t batch, const float* x, const float* w, float* y) {
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t k = 0; k < l.k; ++k)
      for (std::int64_t i = 0; i < l.oh; ++i)
        for (std::int64_t j = 0; j < l.ow; ++j) {
          float sum = 0.0f;
          for (std::int64_t c = 0; c < l.c; ++c)
            for (std::int64_t a = 0; a < l.window; ++a)
              for (std::int64_t b = 0; b < l.window; ++b) {
                const std::int64_t sy = i * l.stride + a - l.pad, sx = j * l.stride + b - l.pad;
                if (sy < 0 || sy >= l.h || sx < 0 || sx >= l.w) continue;
                sum += w[((k * l.c + c) * l.window + a) * l.window + b] * x[((n * l.c + c) * l.h + sy) * l.w + sx];
              }
          y[((n * l.k + k) * l.oh + i) * l.ow + j] = sum;
        }
}

void conv_backward_weights(const Layer& l, std::int64_t batch, const float* x, const float* dy, float* dw) {
  for (std::int64_t k = 0; k < l.k; ++k)
    for (std::int64_t c = 0; c < l.c; ++c)
      for (std::int64_t a = 0; a < l.window; ++a)
        for (std::int64_t b = 0; b < l.window; ++b) {
          float sum = 0.0f;
          for (std::int64_t n = 0; n < batch; ++n)
            for (std::int64_t i = 0; i < l.oh; ++i)
              for (std::int64_t j = 0; j < l.ow; ++j) {
                const std::int64_t sy = i * l.stride + a - l.pad, sx = j * l.stride + b - l.pad;
                if (sy < 0 || sy >= l.h || sx < 0 || sx >= l.w) continue;
                sum += dy[((n * l.k + k) * l.oh + i) * l.ow + j] * x[((n * l.c + c) * l.h + sy) * l.w + sx];
              }
          dw[((k * l.c + c) * l.window + a) * l.window + b] = sum;
        }
}

void conv_backward_data(const Layer& l, std::int64_t batch, const float* w, const float* dy, float* out,
                        bool accumulate, std::vector<float>& scratch) {
  const std::int64_t size = batch * l.in_size();
  if (accumulate) scratch.resize(static_cast<std::size_t>(size));
  float* dx = accumulate ? scratch.data() : out;
  std::fill(dx, dx + size, 0.0f);
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t k = 0; k < l.k; ++k)
      for (std::int64_t i = 0; i < l.oh; ++i)
        for (std::int64_t j = 0; j < l.ow; ++j) {
          const float d = dy[((n * l.k + k) * l.oh + i) * l.ow + j];
          for (std::int64_t c = 0; c < l.c; ++c)
            for (std::int64_t a = 0; a < l.window; ++a)
              for (std::int64_t b = 0; b < l.window; ++b) {
                const std::int64_t sy = i * l.stride + a - l.pad, sx = j * l.stride + b - l.pad;
                if (sy < 0 || sy >= l.h || sx < 0 || sx >= l.w) continue;
                dx[((n * l.c + c) * l.h + sy) * l.w + sx] += w[((k * l.c + c) * l.window + a) * l.window + b] * d;
              }
        }
  if (accumulate)
    for (std::int64_t e = 0; e < size; ++e) out[e] += dx[e];
}

void fc_forward(const Layer& l, std::int64_t batch, const float* x, const float* w, float* y) {
  const std::int64_t in = l.in_size();
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t k = 0; k < l.k; ++k) {
      float sum = 0.0f;
      for (std::int64_t i = 0; i < in; ++i) sum += x[n * in + i] * w[k * in + i];
      y[n * l.k + k] = sum;
    }
}

void fc_backward_weights(const Layer& l, std::int64_t batch, const float* x, const float* dy, float* dw) {
  const std::int64_t in = l.in_size();
  for (std::int64_t k = 0; k < l.k; ++k)
    for (std::int64_t i = 0; i < in; ++i) {
      float sum = 0.0f;
      for (std::int64_t n = 0; n < batch; ++n) sum += dy[n * l.k + k] * x[n * in + i];
      dw[k * in + i] = sum;
    }
}

void fc_backward_data(const Layer& l, std::int64_t batch, const float* w, const float* dy, float* dx,
                      bool accumulate) {
  const std::int64_t in = l.in_size();
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t i = 0; i < in; ++i) {
      float sum = 0.0f;
      for (std::int64_t k = 0; k < l.k; ++k) sum += dy[n * l.k + k] * w[k * in + i];
      dx[n * in + i] = accumulate ? dx[n * in + i] + sum : sum;
    }
}

}  // namespace dlb::nn::plain
