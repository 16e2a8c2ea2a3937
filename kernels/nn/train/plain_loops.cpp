#include "kernels/nn/train/plain_loops.h"

#include <algorithm>

namespace dlb::nn::plain {

namespace {

// Where the loops read and write, NCHW: output (n, k, i, j), weight
// (k, c, a, b), and the input element tap (a, b) of output (i, j) reads in
// plane (n, c), or -1 where it falls in the padding.
std::int64_t out_at(const Layer& l, std::int64_t n, std::int64_t k, std::int64_t i, std::int64_t j) {
  return ((n * l.k + k) * l.oh + i) * l.ow + j;
}
std::int64_t weight_at(const Layer& l, std::int64_t k, std::int64_t c, std::int64_t a, std::int64_t b) {
  return ((k * l.c + c) * l.window + a) * l.window + b;
}
std::int64_t in_at(const Layer& l, std::int64_t n, std::int64_t c, std::int64_t i, std::int64_t j, std::int64_t a,
                   std::int64_t b) {
  const std::int64_t sy = i * l.stride + a - l.pad, sx = j * l.stride + b - l.pad;
  return sy < 0 || sy >= l.h || sx < 0 || sx >= l.w ? -1 : ((n * l.c + c) * l.h + sy) * l.w + sx;
}

// f(n, k, i, j) for every output, in memory order.
template <class F>
void each_output(const Layer& l, std::int64_t batch, F&& f) {
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t k = 0; k < l.k; ++k)
      for (std::int64_t i = 0; i < l.oh; ++i)
        for (std::int64_t j = 0; j < l.ow; ++j) f(n, k, i, j);
}
// f(weight index, input index) for every tap of output (n, k, i, j) inside
// the image, in (c, a, b) order.
template <class F>
void each_tap(const Layer& l, std::int64_t n, std::int64_t k, std::int64_t i, std::int64_t j, F&& f) {
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t a = 0; a < l.window; ++a)
      for (std::int64_t b = 0; b < l.window; ++b)
        if (const std::int64_t e = in_at(l, n, c, i, j, a, b); e >= 0) f(weight_at(l, k, c, a, b), e);
}

}  // namespace

void conv_forward(const Layer& l, std::int64_t batch, const float* x, const float* w, float* y) {
  each_output(l, batch, [&](std::int64_t n, std::int64_t k, std::int64_t i, std::int64_t j) {
    float sum = 0.0f;
    each_tap(l, n, k, i, j, [&](std::int64_t wi, std::int64_t xi) { sum += w[wi] * x[xi]; });
    y[out_at(l, n, k, i, j)] = sum;
  });
}

void conv_backward_weights(const Layer& l, std::int64_t batch, const float* x, const float* dy, float* dw) {
  for (std::int64_t k = 0; k < l.k; ++k)
    for (std::int64_t c = 0; c < l.c; ++c)
      for (std::int64_t a = 0; a < l.window; ++a)
        for (std::int64_t b = 0; b < l.window; ++b) {
          float sum = 0.0f;  // over the batch and the outputs, in (n, i, j) order
          for (std::int64_t n = 0; n < batch; ++n)
            for (std::int64_t i = 0; i < l.oh; ++i)
              for (std::int64_t j = 0; j < l.ow; ++j)
                if (const std::int64_t e = in_at(l, n, c, i, j, a, b); e >= 0) sum += dy[out_at(l, n, k, i, j)] * x[e];
          dw[weight_at(l, k, c, a, b)] = sum;
        }
}

void conv_backward_data(const Layer& l, std::int64_t batch, const float* w, const float* dy, float* out,
                        bool accumulate, std::vector<float>& scratch) {
  const std::int64_t size = batch * l.in_size();
  if (accumulate) scratch.resize(static_cast<std::size_t>(size));
  float* dx = accumulate ? scratch.data() : out;
  std::fill(dx, dx + size, 0.0f);
  each_output(l, batch, [&](std::int64_t n, std::int64_t k, std::int64_t i, std::int64_t j) {
    const float d = dy[out_at(l, n, k, i, j)];
    each_tap(l, n, k, i, j, [&](std::int64_t wi, std::int64_t xi) { dx[xi] += w[wi] * d; });
  });
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
