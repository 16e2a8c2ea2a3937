// The arithmetic of the GPU training step's own kernels (train_gpu.h), one
// function per output element, compiled for the kernels
// (train_gpu_kernels.cu: one thread per element) and for their host twin
// (train_plan.cpp's HostOps: a loop over the elements), so that the CPU
// tests run the very expressions the GPU runs over a whole step.
//
// Every function reads its inputs and writes only element i of its output:
// the order of the sums is fixed by the code (no atomics), and where a
// kernel reduces across threads (bias_grad: one block per channel) the
// partial sums and their combining tree are spelled out here too
// (bias_grad_partial, kBiasGradThreads, tree_step) for the twin to replay.
// Products and sums that must not be contracted differently by the host and
// device compilers use fmaf explicitly.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define DLB_TG_HD __host__ __device__
#else
#define DLB_TG_HD
#endif

namespace dlb::nn::tg {

// y[i] = relu?(y[i] + bias[(i / inner) % k]): a conv's bias and ReLU after
// cuDNN's convolution (inner = oh * ow, NCHW), an fc's after cuBLAS's GEMM
// (inner = 1). bias may be null (a conv without bias).
struct BiasAct {
  float* y = nullptr;
  const float* bias = nullptr;
  std::int64_t count = 0, inner = 1, k = 1;
  std::int32_t relu = 0;
};
DLB_TG_HD inline void bias_act(const BiasAct& p, std::int64_t i) {
  float v = p.y[i];
  if (p.bias != nullptr) v += p.bias[(i / p.inner) % p.k];
  if (p.relu != 0) v = v > 0.0f ? v : 0.0f;
  p.y[i] = v;
}

// Max pooling with routes: y[o] the maximum of o's window, route[o] the
// offset (row-major in the window) of its first maximum (strict >, as the
// CPU step and PyTorch's CPU max_pool2d). planes = batch * channels; no
// padding, every window inside the input.
struct MaxPool {
  const float* x = nullptr;
  float* y = nullptr;
  std::uint8_t* route = nullptr;
  std::int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0, window = 1, stride = 1;
  std::int64_t count() const { return planes * oh * ow; }
};
DLB_TG_HD inline void max_pool(const MaxPool& p, std::int64_t o) {
  const std::int64_t q = o / (p.oh * p.ow), ij = o % (p.oh * p.ow), i = ij / p.ow, j = ij % p.ow;
  const float* top = p.x + (q * p.h + i * p.stride) * p.w + j * p.stride;
  float m = top[0];
  std::int32_t where = 0;
  for (std::int64_t a = 0; a < p.window; ++a)
    for (std::int64_t b = 0; b < p.window; ++b)
      if (top[a * p.w + b] > m) m = top[a * p.w + b], where = static_cast<std::int32_t>(a * p.window + b);
  p.y[o] = m;
  p.route[o] = static_cast<std::uint8_t>(where);
}

// Its backward as a gather, one input element e per thread: the sum of the
// output gradients whose route points at e, over the windows that hold e in
// increasing output order (the order in which the CPU step's scatter adds
// them), then the ReLU mask of the layer below where `mask` is given (that
// layer's kept output: the gradient passes where it is > 0).
struct MaxPoolBack {
  const float* dy = nullptr;
  const std::uint8_t* route = nullptr;
  const float* mask = nullptr;
  float* dx = nullptr;
  std::int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0, window = 1, stride = 1;
  std::int64_t count() const { return planes * h * w; }
};
// The outputs along one axis whose window holds input coordinate y: [first, last).
DLB_TG_HD inline void windows_holding(std::int64_t y, std::int64_t window, std::int64_t stride, std::int64_t out,
                                      std::int64_t& first, std::int64_t& last) {
  const std::int64_t lo = y - window + 1;  // i * stride >= lo
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = y / stride + 1;  // i * stride <= y
  if (last > out) last = out;
  if (first > last) first = last;
}
DLB_TG_HD inline void max_pool_back(const MaxPoolBack& p, std::int64_t e) {
  const std::int64_t q = e / (p.h * p.w), yx = e % (p.h * p.w), y = yx / p.w, x = yx % p.w;
  std::int64_t i0, i1, j0, j1;
  windows_holding(y, p.window, p.stride, p.oh, i0, i1);
  windows_holding(x, p.window, p.stride, p.ow, j0, j1);
  float sum = 0.0f;
  for (std::int64_t i = i0; i < i1; ++i)
    for (std::int64_t j = j0; j < j1; ++j) {
      const std::int64_t o = (q * p.oh + i) * p.ow + j;
      if (p.route[o] == (y - i * p.stride) * p.window + (x - j * p.stride)) sum += p.dy[o];
    }
  if (p.mask != nullptr && !(p.mask[e] > 0.0f)) sum = 0.0f;
  p.dx[e] = sum;
}

// dy[i] = out[i] > 0 ? dy[i] : 0: ReLU's backward from the kept output (as
// PyTorch's threshold_backward).
struct ReluBack {
  float* dy = nullptr;
  const float* out = nullptr;
  std::int64_t count = 0;
};
DLB_TG_HD inline void relu_back(const ReluBack& p, std::int64_t i) {
  if (!(p.out[i] > 0.0f)) p.dy[i] = 0.0f;
}

// Global average pooling: y[q] = (sum of plane q, in order) * (1 / plane), as
// layers.cpp's global_avg_pool_nchw; its backward spreads dy[q] / plane over
// the plane.
struct AvgPool {
  const float* x = nullptr;
  float* y = nullptr;
  std::int64_t planes = 0, plane = 1;
};
DLB_TG_HD inline void avg_pool(const AvgPool& p, std::int64_t q) {
  float sum = 0.0f;
  for (std::int64_t i = 0; i < p.plane; ++i) sum += p.x[q * p.plane + i];
  p.y[q] = sum * (1.0f / static_cast<float>(p.plane));
}
struct AvgPoolBack {
  const float* dy = nullptr;
  float* dx = nullptr;
  std::int64_t planes = 0, plane = 1;
};
DLB_TG_HD inline void avg_pool_back(const AvgPoolBack& p, std::int64_t e) {
  p.dx[e] = p.dy[e / p.plane] * (1.0f / static_cast<float>(p.plane));
}

// One row of the loss: log-softmax of the logits (the sum of exponentials in
// double, as the CPU step) into logp, and the row's negative log-likelihood
// -logp[label] into loss[n]. A label that is not a class (the host checks
// them: check_labels) gives a NaN loss and reads nothing outside the row.
struct LogSoftmaxNll {
  const float* logits = nullptr;
  float* logp = nullptr;
  const std::uint8_t* labels = nullptr;
  double* loss = nullptr;  // [rows]
  std::int64_t rows = 0, classes = 0;
};
DLB_TG_HD inline void log_softmax_nll(const LogSoftmaxNll& p, std::int64_t n) {
  const float* row = p.logits + n * p.classes;
  float* out = p.logp + n * p.classes;
  float m = row[0];
  for (std::int64_t j = 1; j < p.classes; ++j) m = row[j] > m ? row[j] : m;
  double sum = 0.0;
  for (std::int64_t j = 0; j < p.classes; ++j) sum += exp(static_cast<double>(row[j]) - m);
  const double shift = m + log(sum);
  for (std::int64_t j = 0; j < p.classes; ++j) out[j] = static_cast<float>(row[j] - shift);
  const std::int64_t label = p.labels[n];
  p.loss[n] = label < p.classes ? -static_cast<double>(out[label]) : static_cast<double>(NAN);
}

// d loss / d logits = (softmax - onehot) / batch, from the kept log-probabilities.
struct NllGrad {
  const float* logp = nullptr;
  const std::uint8_t* labels = nullptr;
  float* dy = nullptr;
  std::int64_t rows = 0, classes = 0;
  float inv_batch = 1.0f;
};
DLB_TG_HD inline void nll_grad(const NllGrad& p, std::int64_t i) {
  const std::int64_t n = i / p.classes, j = i % p.classes;
  p.dy[i] = (expf(p.logp[i]) - (j == p.labels[n] ? 1.0f : 0.0f)) * p.inv_batch;
}

// The bias gradient of a conv or fc: db[c] = the sum over the batch and the
// plane of dy[n][c][plane] (inner = oh * ow; fc: 1). The kernel runs one
// block of kBiasGradThreads threads per channel: thread t sums the elements
// t, t + kBiasGradThreads, ... of the channel's batch * inner values in
// order (bias_grad_partial), then the block halves its partial sums
// (tree_step with half = 128, 64, ..., 1: part[t] += part[t + half] for
// t < half); thread 0 writes part[0].
inline constexpr int kBiasGradThreads = 256;
struct BiasGrad {
  const float* dy = nullptr;
  float* db = nullptr;
  std::int64_t batch = 0, k = 0, inner = 1;
};
DLB_TG_HD inline float bias_grad_partial(const BiasGrad& p, std::int64_t channel, std::int64_t t) {
  float sum = 0.0f;
  for (std::int64_t e = t; e < p.batch * p.inner; e += kBiasGradThreads) {
    const std::int64_t n = e / p.inner, at = e % p.inner;
    sum += p.dy[(n * p.k + channel) * p.inner + at];
  }
  return sum;
}
DLB_TG_HD inline void tree_step(float* part, int t, int half) {
  if (t < half) part[t] += part[t + half];
}

// SGD with momentum as torch.optim.SGD (dampening 0, not Nesterov), one
// element: g' = g + wd p (wd != 0), v = momentum v + g', p = p - lr v; the
// multiply-adds as single fmaf (the same rounding on host and device).
struct Sgd {
  float* p = nullptr;
  const float* g = nullptr;
  float* v = nullptr;
  std::int64_t count = 0;
  float lr = 0.0f, momentum = 0.0f, weight_decay = 0.0f;
};
DLB_TG_HD inline void sgd(const Sgd& s, std::int64_t i) {
  const float g = s.weight_decay != 0.0f ? fmaf(s.weight_decay, s.p[i], s.g[i]) : s.g[i];
  const float v = fmaf(s.momentum, s.v[i], g);
  s.v[i] = v;
  s.p[i] = fmaf(-s.lr, v, s.p[i]);
}

}  // namespace dlb::nn::tg
