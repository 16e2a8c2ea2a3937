// The arithmetic of the GPU training step's own kernels (train_gpu.h), one
// function per output element, compiled for the kernels
// (train_gpu_kernels.cu: one thread per element) and for their host twin
// (train_plan.cpp's HostOps: a loop over the elements), so that the CPU
// tests run the very expressions the GPU runs over a whole step.
//
// Every function reads its inputs and writes only element i of its output:
// the order of the sums is fixed by the code (no atomics), and where a
// kernel reduces across threads (bias_grad: one block per channel;
// batch-norm's sums: one block per slice of a channel, then the slices in
// order) the partial sums and their combining tree are spelled out here
// too (bias_grad_partial, kBiasGradThreads, tree_step; bn_slices,
// bn_slice_begin, BnWalk, bn_combine, bn_sums_on_host) for the twin to
// replay.
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

// y[i] = relu?(y[i] + bias[(i / inner) % k] + res[i]): a conv's bias,
// residual join and ReLU after cuDNN's convolution (inner = oh * ow, NCHW),
// an fc's after cuBLAS's GEMM (inner = 1). bias and res may be null (a conv
// without bias, a layer without a join).
struct BiasAct {
  float* y = nullptr;
  const float* bias = nullptr;
  std::int64_t count = 0, inner = 1, k = 1;
  std::int32_t relu = 0;
  const float* res = nullptr;
};
DLB_TG_HD inline void bias_act(const BiasAct& p, std::int64_t i) {
  float v = p.y[i];
  if (p.bias != nullptr) v += p.bias[(i / p.inner) % p.k];
  if (p.res != nullptr) v += p.res[i];
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
template <class T>
DLB_TG_HD inline void tree_step(T* part, int t, int half) {
  if (t < half) part[t] += part[t + half];
}

// Batch-norm in training mode (train.h: the CPU step's arithmetic), per
// conv layer with batch-norm: z [batch, k, plane] the conv's output (its
// bias added), and the layer's statistics [kBnStats, k] in the batch-norm
// arena: the batch mean, 1 / sqrt(var + eps), scale = gamma inv_std, shift =
// beta - mean scale (forward), then a = mean(dy), b = mean(dy xhat)
// (backward). The per-channel sums are in double, as the CPU step's, over
// the channel's M = batch * plane values e = n plane + q, in a fixed order
// that does not depend on the GPU:
//   - the values are cut into `slices` slices (bn_slices(M): enough blocks
//     to fill the GPU where a channel is long, one block where it is
//     short): slice s holds e in [bn_slice_begin(M, slices, s),
//     bn_slice_begin(M, slices, s + 1)), which need not fall on a plane's
//     or an image's edge;
//   - one block of kBnThreads threads per (slice, channel): thread t sums
//     the slice's values first + t, first + t + kBnThreads, ... in order
//     (the _partial functions), the block halves its partial sums
//     (tree_step, in double);
//   - with one slice, thread 0 finishes (the _finish functions); with
//     more, thread 0 writes the slice's two sums to parts ([2, k, slices]
//     doubles) and a second kernel, one thread per channel, adds the
//     slices' sums in slice order (bn_combine) and finishes.
// The error of such a blocked sum in double is at most (d + 1) 2^-53 times
// the sum of the magnitudes, d the additions on the longest path (a
// thread's ceil(M / (slices kBnThreads)) terms, the tree's 8 levels, the
// slices): d <= M, so about M 2^-53 at worst, far below fp32's u = 2^-24
// for any M a batch holds (M < 2^26: 2^-27), whatever the split. Products
// in double of two floats are exact (fma where a sum follows, so host and
// device give the same bits).
inline constexpr int kBnThreads = 256;
// A slice holds at most kBnSliceValues values of its channel (8 per
// thread), up to kBnMaxSlices slices: resnet20 at batch 64 has 512, 256
// and 128 blocks in its three stages (16 x 32, 32 x 8, 64 x 2), where one
// block per channel gave 16 to 64 on a GPU of 132 SMs.
inline constexpr std::int64_t kBnSliceValues = 2048;
inline constexpr std::int64_t kBnMaxSlices = 64;
DLB_TG_HD inline std::int64_t bn_slices(std::int64_t m) {
  const std::int64_t s = (m + kBnSliceValues - 1) / kBnSliceValues;
  return s < 1 ? 1 : s > kBnMaxSlices ? kBnMaxSlices : s;
}
// The first value of slice s of `slices` over m values (s = slices: m):
// slices of floor or ceil(m / slices) values.
DLB_TG_HD inline std::int64_t bn_slice_begin(std::int64_t m, std::int64_t slices, std::int64_t s) {
  return m * s / slices;
}
enum BnStat : int { kBnMean = 0, kBnInvStd, kBnScale, kBnShift, kBnA, kBnB, kBnStats };

// Thread t's walk over its values of a slice [first, last) of a channel:
// e = first + t, first + t + kBnThreads, ..., as offsets into [batch, k,
// plane], with one division per thread rather than per value (kBnThreads =
// dn plane + dq: a step moves dn images and dq places, and one image more
// where the place passes the plane's end).
struct BnWalk {
  std::int64_t e, last, at, q, dn, dq, k, plane;
  DLB_TG_HD BnWalk(std::int64_t first, std::int64_t end, std::int64_t t, std::int64_t channel, std::int64_t k_,
                   std::int64_t plane_)
      : e(first + t), last(end), at(0), q(0), dn(kBnThreads / plane_), dq(kBnThreads % plane_), k(k_), plane(plane_) {
    q = e % plane;
    at = (e / plane * k + channel) * plane + q;
  }
  DLB_TG_HD bool more() const { return e < last; }
  DLB_TG_HD void next() {
    e += kBnThreads;
    at += dn * k * plane + dq;
    q += dq;
    if (q >= plane) q -= plane, at += (k - 1) * plane;
  }
};

// Forward statistics and the running statistics' update (running [2, k]:
// mean, var; momentum as nn.BatchNorm2d's, the unbiased variance M / (M - 1)
// for running_var). parts: [2, k, slices] doubles where slices > 1.
struct BnStats {
  const float* z = nullptr;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* stats = nullptr;    // [kBnStats, k]
  float* running = nullptr;  // [2, k]
  std::int64_t batch = 0, k = 0, plane = 1;
  double eps = 1e-5, momentum = 0.1;
  double* parts = nullptr;
  std::int64_t slices = 1;
};
DLB_TG_HD inline void bn_stats_partial(const BnStats& p, std::int64_t channel, std::int64_t first, std::int64_t last,
                                       std::int64_t t, double& sum, double& sum2) {
  sum = 0.0, sum2 = 0.0;
  for (BnWalk w(first, last, t, channel, p.k, p.plane); w.more(); w.next()) {
    const double v = p.z[w.at];
    sum += v;
    sum2 = fma(v, v, sum2);
  }
}
// As the CPU step's batch_norm_forward: one pass in double, E[z^2] - mean^2
// (its cancellation, (mean^2 / var) M 2^-53 relative to var, negligible
// against fp32's u unless |mean| is thousands of standard deviations).
DLB_TG_HD inline void bn_stats_finish(const BnStats& p, std::int64_t channel, double sum, double sum2) {
  const double m = static_cast<double>(p.batch * p.plane), mo = p.momentum;
  const double mean = sum / m, var0 = fma(-mean, mean, sum2 / m), var = var0 > 0.0 ? var0 : 0.0;
  const double inv_std = 1.0 / sqrt(var + p.eps), scale = p.gamma[channel] * inv_std;
  float* s = p.stats + channel;
  s[kBnMean * p.k] = static_cast<float>(mean);
  s[kBnInvStd * p.k] = static_cast<float>(inv_std);
  s[kBnScale * p.k] = static_cast<float>(scale);
  s[kBnShift * p.k] = static_cast<float>(fma(-mean, scale, static_cast<double>(p.beta[channel])));
  float* r = p.running + channel;
  r[0] = static_cast<float>(fma(mo, mean, (1.0 - mo) * r[0]));
  r[p.k] = static_cast<float>(fma(mo, var * m / (m > 1.0 ? m - 1.0 : 1.0), (1.0 - mo) * r[p.k]));
}

// y[i] = relu?(z[i] scale + shift + res[i]) (res may be null), one element.
struct BnApply {
  const float* z = nullptr;
  float* y = nullptr;
  const float* stats = nullptr;
  const float* res = nullptr;
  std::int64_t count = 0, k = 1, plane = 1;
  std::int32_t relu = 0;
};
DLB_TG_HD inline void bn_apply(const BnApply& p, std::int64_t i) {
  const std::int64_t c = i / p.plane % p.k;
  float v = fmaf(p.z[i], p.stats[kBnScale * p.k + c], p.stats[kBnShift * p.k + c]);
  if (p.res != nullptr) v += p.res[i];
  if (p.relu != 0) v = v > 0.0f ? v : 0.0f;
  p.y[i] = v;
}

// Backward's sums: dbeta = sum dy, dgamma = sum dy xhat (xhat = (z - mean)
// inv_std in fp32, as the CPU step), a = dbeta / M, b = dgamma / M.
struct BnBackStats {
  const float* dy = nullptr;
  const float* z = nullptr;
  float* stats = nullptr;
  float* dgamma = nullptr;
  float* dbeta = nullptr;
  std::int64_t batch = 0, k = 0, plane = 1;
  double* parts = nullptr;  // [2, k, slices] where slices > 1
  std::int64_t slices = 1;
};
DLB_TG_HD inline float bn_xhat(float z, const float* stats, std::int64_t k, std::int64_t c) {
  return (z - stats[kBnMean * k + c]) * stats[kBnInvStd * k + c];
}
DLB_TG_HD inline void bn_back_stats_partial(const BnBackStats& p, std::int64_t channel, std::int64_t first,
                                            std::int64_t last, std::int64_t t, double& sum, double& sum_x) {
  sum = 0.0, sum_x = 0.0;
  for (BnWalk w(first, last, t, channel, p.k, p.plane); w.more(); w.next()) {
    const double d = p.dy[w.at];
    sum += d;
    sum_x = fma(d, static_cast<double>(bn_xhat(p.z[w.at], p.stats, p.k, channel)), sum_x);
  }
}
DLB_TG_HD inline void bn_back_stats_finish(const BnBackStats& p, std::int64_t channel, double sum, double sum_x) {
  const double m = static_cast<double>(p.batch * p.plane);
  p.dbeta[channel] = static_cast<float>(sum);
  p.dgamma[channel] = static_cast<float>(sum_x);
  p.stats[kBnA * p.k + channel] = static_cast<float>(sum / m);
  p.stats[kBnB * p.k + channel] = static_cast<float>(sum_x / m);
}

// With slices > 1, the second kernel's thread for a channel: the slices'
// sums added in slice order (parts [2, k, slices]).
template <class Params>
DLB_TG_HD inline void bn_combine(const Params& p, std::int64_t channel, double& first, double& second) {
  const double* a = p.parts + channel * p.slices;
  const double* b = p.parts + (p.k + channel) * p.slices;
  first = 0.0, second = 0.0;
  for (std::int64_t s = 0; s < p.slices; ++s) first += a[s], second += b[s];
}

// The kernels replayed on the host (the twin, the tests): per channel and
// slice, every thread's two partial sums and the halving tree over both;
// then the finish (one slice), or the slices' sums through parts and
// bn_combine. partial, finish: bn_stats_* or bn_back_stats_*.
template <class Params, class Partial, class Finish>
inline void bn_sums_on_host(const Params& p, Partial&& partial, Finish&& finish) {
  double first[kBnThreads], second[kBnThreads];
  const std::int64_t m = p.batch * p.plane;
  for (std::int64_t channel = 0; channel < p.k; ++channel)
    for (std::int64_t s = 0; s < p.slices; ++s) {
      const std::int64_t lo = bn_slice_begin(m, p.slices, s), hi = bn_slice_begin(m, p.slices, s + 1);
      for (int t = 0; t < kBnThreads; ++t) partial(p, channel, lo, hi, t, first[t], second[t]);
      for (int half = kBnThreads / 2; half > 0; half /= 2)
        for (int t = 0; t < half; ++t) tree_step(first, t, half), tree_step(second, t, half);
      if (p.slices == 1) {
        finish(p, channel, first[0], second[0]);
      } else {
        p.parts[channel * p.slices + s] = first[0];
        p.parts[(p.k + channel) * p.slices + s] = second[0];
      }
    }
  if (p.slices == 1) return;
  for (std::int64_t channel = 0; channel < p.k; ++channel) {
    double sum = 0.0, sum2 = 0.0;
    bn_combine(p, channel, sum, sum2);
    finish(p, channel, sum, sum2);
  }
}

// dz = scale (dy - a - xhat b), in place over dy, one element.
struct BnBackData {
  float* d = nullptr;
  const float* z = nullptr;
  const float* stats = nullptr;
  std::int64_t count = 0, k = 1, plane = 1;
};
DLB_TG_HD inline void bn_back_data(const BnBackData& p, std::int64_t i) {
  const std::int64_t c = i / p.plane % p.k;
  const float xhat = bn_xhat(p.z[i], p.stats, p.k, c);
  const float v = fmaf(-xhat, p.stats[kBnB * p.k + c], p.d[i] - p.stats[kBnA * p.k + c]);
  p.d[i] = p.stats[kBnScale * p.k + c] * v;
}

// A residual join's backward: the gradient at the join, dy, is also the
// joined layer's: to[i] = dy[i] (the first of its readers' gradients to
// arrive) or to[i] + dy[i] (a later one).
struct AddGrad {
  const float* from = nullptr;
  float* to = nullptr;
  std::int64_t count = 0;
  std::int32_t add = 0;
};
DLB_TG_HD inline void add_grad(const AddGrad& p, std::int64_t i) {
  p.to[i] = p.add != 0 ? p.to[i] + p.from[i] : p.from[i];
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
