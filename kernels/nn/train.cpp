// The fp32 training step (train.h): im2col + Eigen GEMM convolutions, Eigen
// GEMM fc layers, OpenMP over the images of the batch.
// GCC 12's false -Wmaybe-uninitialized inside Eigen's inlined AVX-512 code
// (GCC bug 105593), as in conv_eigen.cpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <omp.h>

#if DLB_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

#include <algorithm>
#include <cmath>

#include "kernels/common/error.h"
#include "kernels/nn/layers.h"
#include "kernels/nn/train.h"
#include "kernels/nn/train_backend.h"

namespace dlb::nn {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Vector = Eigen::Matrix<float, Eigen::Dynamic, 1>;

// C [m, n] = op(A) op(B) (+ C where accumulate), row-major, op = transpose
// where asked; lda, ldb, ldc: the row lengths as stored.
void gemm(TrainImpl lib, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc) {
#if DLB_HAVE_ONEDNN
  if (lib == TrainImpl::onednn_sgemm) {
    const dnnl_status_t status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb,
                                            accumulate ? 1.0f : 0.0f, c, ldc);
    if (status != dnnl_success)
      throw_error("dnnl_sgemm failed with status " + std::to_string(static_cast<int>(status)), __FILE__, __LINE__);
    return;
  }
#endif
  DLB_REQUIRE(lib == TrainImpl::eigen, "training step: this build has no oneDNN");
  using Stride = Eigen::OuterStride<>;
  const Eigen::Map<const RowMajor, 0, Stride> A(a, ta ? k : m, ta ? m : k, Stride(lda));
  const Eigen::Map<const RowMajor, 0, Stride> B(b, tb ? n : k, tb ? k : n, Stride(ldb));
  Eigen::Map<RowMajor, 0, Stride> C(c, m, n, Stride(ldc));
  const auto run = [&](const auto& x, const auto& y) {
    if (accumulate) C.noalias() += x * y;
    else C.noalias() = x * y;
  };
  if (ta && tb) run(A.transpose(), B.transpose());
  else if (ta) run(A.transpose(), B);
  else if (tb) run(A, B.transpose());
  else run(A, B);
}

// The outputs j of a row whose input column j * stride + b - pad is inside
// [0, w): [first, last).
struct Span {
  std::int64_t first, last;
};
Span inside(const Layer& l, std::int64_t b) {
  const std::int64_t lo = l.pad - b, hi = l.w - 1 + l.pad - b;  // j * stride in [lo, hi]
  const std::int64_t first = lo <= 0 ? 0 : (lo + l.stride - 1) / l.stride;
  const std::int64_t last = hi < 0 ? 0 : std::min(l.ow, hi / l.stride + 1);
  return {std::min(first, last), last};
}

// One image's patches: col [c*r*r, oh*ow], zero where the window is in the padding.
void im2col(const Layer& l, const float* x, float* col) {
  const std::int64_t r = l.window, plane = l.oh * l.ow;
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t a = 0; a < r; ++a)
      for (std::int64_t b = 0; b < r; ++b) {
        float* row = col + ((c * r + a) * r + b) * plane;
        const Span s = inside(l, b);
        for (std::int64_t i = 0; i < l.oh; ++i) {
          float* dst = row + i * l.ow;
          const std::int64_t sy = i * l.stride + a - l.pad;
          if (sy < 0 || sy >= l.h) {
            std::fill(dst, dst + l.ow, 0.0f);
            continue;
          }
          std::fill(dst, dst + s.first, 0.0f);
          const float* src = x + (c * l.h + sy) * l.w + b - l.pad;
          if (l.stride == 1) {
            std::copy(src + s.first, src + s.last, dst + s.first);
          } else {
            for (std::int64_t j = s.first; j < s.last; ++j) dst[j] = src[j * l.stride];
          }
          std::fill(dst + s.last, dst + l.ow, 0.0f);
        }
      }
}

// The adjoint of im2col: dx [c, h, w] = the sum of every patch entry's gradient at its pixel.
void col2im(const Layer& l, const float* dcol, float* dx) {
  const std::int64_t r = l.window, plane = l.oh * l.ow;
  std::fill(dx, dx + l.in_size(), 0.0f);
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t a = 0; a < r; ++a)
      for (std::int64_t b = 0; b < r; ++b) {
        const float* row = dcol + ((c * r + a) * r + b) * plane;
        const Span s = inside(l, b);
        for (std::int64_t i = 0; i < l.oh; ++i) {
          const std::int64_t sy = i * l.stride + a - l.pad;
          if (sy < 0 || sy >= l.h) continue;
          float* dst = dx + (c * l.h + sy) * l.w + b - l.pad;
          const float* src = row + i * l.ow;
          if (l.stride == 1) {
            for (std::int64_t j = s.first; j < s.last; ++j) dst[j] += src[j];
          } else {
            for (std::int64_t j = s.first; j < s.last; ++j) dst[j * l.stride] += src[j];
          }
        }
      }
}

// One image's max pool: y and, per output, the offset in its window of the
// first maximum (row-major in the window).
void pool_image(const Layer& l, const float* x, float* y, std::uint8_t* arg) {
  for (std::int64_t c = 0; c < l.c; ++c) {
    const float* src = x + c * l.h * l.w;
    for (std::int64_t i = 0; i < l.oh; ++i) {
      float* out = y + (c * l.oh + i) * l.ow;
      std::uint8_t* at = arg + (c * l.oh + i) * l.ow;
      const float* top = src + i * l.stride * l.w;
      if (l.window == 2 && l.stride == 2) {
        const float* bottom = top + l.w;
        for (std::int64_t j = 0; j < l.ow; ++j) {
          float m = top[2 * j];
          std::uint8_t where = 0;
          if (top[2 * j + 1] > m) m = top[2 * j + 1], where = 1;
          if (bottom[2 * j] > m) m = bottom[2 * j], where = 2;
          if (bottom[2 * j + 1] > m) m = bottom[2 * j + 1], where = 3;
          out[j] = m;
          at[j] = where;
        }
        continue;
      }
      for (std::int64_t j = 0; j < l.ow; ++j) {
        const float* window = top + j * l.stride;
        float m = window[0];
        int where = 0;
        for (std::int64_t a = 0; a < l.window; ++a)
          for (std::int64_t b = 0; b < l.window; ++b)
            if (window[a * l.w + b] > m) m = window[a * l.w + b], where = static_cast<int>(a * l.window + b);
        out[j] = m;
        at[j] = static_cast<std::uint8_t>(where);
      }
    }
  }
}

// Its adjoint: dx (one image, every element written) from dy and the routes.
void unpool_image(const Layer& l, const std::uint8_t* arg, const float* dy, float* dx) {
  std::fill(dx, dx + l.in_size(), 0.0f);
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t i = 0; i < l.oh; ++i)
      for (std::int64_t j = 0; j < l.ow; ++j) {
        const std::int64_t o = (c * l.oh + i) * l.ow + j;
        dx[(c * l.h + i * l.stride + arg[o] / l.window) * l.w + j * l.stride + arg[o] % l.window] += dy[o];
      }
}

}  // namespace

struct TrainStep::Impl {
  const Network& net;
  std::int64_t batch;
  Sgd sgd;
  TrainImpl lib;
  int threads = omp_get_max_threads();
  std::vector<TrainParam> params;
  std::vector<std::vector<float>> p, g, v;  // per parameter
  struct PerLayer {
    int weight = -1, bias = -1;         // parameter indices
    std::vector<float> out;             // [batch, out_size]: what backward reads (ReLU masks, next layer's input)
    std::vector<std::uint8_t> argmax;   // max_pool: the window offset of each output's maximum
  };
  std::vector<PerLayer> layers;
  std::size_t logits_layer = 0;  // the last layer before log-softmax
  std::vector<float> log_probs;  // [batch, classes]
  std::vector<float> dbuf[2];    // backward's gradients of a layer's output and of its input
  std::vector<std::vector<float>> col, dcol, partial, dout;  // per thread
  const float* x = nullptr;
  const std::uint8_t* labels = nullptr;
  bool forward_done = false, backward_done = false;

  Impl(const Network& n, std::int64_t b, Sgd s, TrainImpl gemm_lib)
      : net(n), batch(b), sgd(s), lib(gemm_lib), params(trainable_params(n)) {
#if !DLB_HAVE_ONEDNN
    if (lib != TrainImpl::eigen) throw Unsupported("training step: this build has no oneDNN");
#endif
    DLB_REQUIRE(batch >= 1, "training step: batch " + std::to_string(batch) + " is not positive");
    const auto& ls = net.layers;
    logits_layer = ls.back().kind == LayerKind::log_softmax ? ls.size() - 2 : ls.size() - 1;
    DLB_REQUIRE(ls.size() >= 2 || ls.back().kind != LayerKind::log_softmax,
                "training step: " + net.name + " is only a log_softmax");
    layers.resize(ls.size());
    for (std::size_t j = 0; j < params.size(); ++j) {
      const auto values = param_values(net, params[j]);
      p.emplace_back(values.begin(), values.end());
      g.emplace_back(values.size(), 0.0f);
      v.emplace_back(values.size(), 0.0f);
      (params[j].bias ? layers[params[j].layer].bias : layers[params[j].layer].weight) = static_cast<int>(j);
    }
    std::int64_t largest = ls[logits_layer].out_size(), col_floats = 0, partial_floats = 0, out_floats = 0;
    for (std::size_t i = 0; i <= logits_layer; ++i) {
      const Layer& l = ls[i];
      layers[i].out.assign(static_cast<std::size_t>(batch * l.out_size()), 0.0f);
      if (l.kind == LayerKind::max_pool) layers[i].argmax.assign(layers[i].out.size(), 0);
      // What backward's two buffers hold: the gradient of each layer's output
      // (a pooled conv's is per image, in `dout`) and of its input (none
      // for the first layer, nor for a pool run inside its conv).
      if (!pooled(i)) largest = std::max(largest, l.out_size());
      if (i > 0 && !(l.kind == LayerKind::max_pool && pooled(i - 1))) largest = std::max(largest, l.in_size());
      if (l.kind == LayerKind::conv) {
        col_floats = std::max(col_floats, l.c * l.window * l.window * l.oh * l.ow);
        partial_floats = std::max(partial_floats, l.k * l.c * l.window * l.window + l.k);
        out_floats = std::max(out_floats, l.out_size());
      }
    }
    log_probs.assign(static_cast<std::size_t>(batch * ls[logits_layer].out_size()), 0.0f);
    for (auto& d : dbuf) d.assign(static_cast<std::size_t>(batch * largest), 0.0f);
    for (int t = 0; t < threads; ++t) {
      col.emplace_back(static_cast<std::size_t>(col_floats), 0.0f);
      dcol.emplace_back(static_cast<std::size_t>(col_floats), 0.0f);
      partial.emplace_back(static_cast<std::size_t>(partial_floats), 0.0f);
      dout.emplace_back(static_cast<std::size_t>(out_floats), 0.0f);
    }
  }

  const float* input_of(std::size_t i) const { return i == 0 ? x : layers[i - 1].out.data(); }

  // Whether layer i is a conv whose output a max pool reads: the pool then
  // runs inside the conv's loop over the images, on each image's output
  // while it is in cache, and its backward inside the conv's backward.
  bool pooled(std::size_t i) const {
    return net.layers[i].kind == LayerKind::conv && i + 1 <= logits_layer &&
           net.layers[i + 1].kind == LayerKind::max_pool;
  }

  // pool: the max pool that reads this conv's output (pooled), or nullptr.
  void conv_forward(const Layer& l, const PerLayer& s, const float* in, float* y, const Layer* pool,
                    PerLayer* pool_state) {
    const std::int64_t crr = l.c * l.window * l.window, plane = l.oh * l.ow;
    const float* w = p[static_cast<std::size_t>(s.weight)].data();
    const float* bias = s.bias >= 0 ? p[static_cast<std::size_t>(s.bias)].data() : nullptr;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch; ++n) {
      float* patches = col[static_cast<std::size_t>(omp_get_thread_num())].data();
      im2col(l, in + n * l.in_size(), patches);
      Map out(y + n * l.k * plane, l.k, plane);
      gemm(lib, false, false, l.k, plane, crr, w, crr, patches, plane, false, out.data(), plane);
      if (bias != nullptr && l.relu) out = (out.colwise() + Eigen::Map<const Vector>(bias, l.k)).cwiseMax(0.0f);
      else if (bias != nullptr) out.colwise() += Eigen::Map<const Vector>(bias, l.k);
      else if (l.relu) out = out.cwiseMax(0.0f);
      if (pool != nullptr) {
        pool_image(*pool, out.data(), pool_state->out.data() + n * pool->out_size(),
                   pool_state->argmax.data() + n * pool->out_size());
      }
    }
  }

  void fc_forward(const Layer& l, const PerLayer& s, const float* in, float* y) {
    Map out(y, batch, l.k);
    gemm(lib, false, true, batch, l.k, l.in_size(), in, l.in_size(), p[static_cast<std::size_t>(s.weight)].data(),
         l.in_size(), false, y, l.k);
    out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(p[static_cast<std::size_t>(s.bias)].data(), l.k);
    if (l.relu) out = out.cwiseMax(0.0f);
  }

  void max_pool_forward(const Layer& l, PerLayer& s, const float* in, float* y) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch; ++n)
      pool_image(l, in + n * l.in_size(), y + n * l.out_size(), s.argmax.data() + n * l.out_size());
  }

  double forward(const float* input, const std::uint8_t* label) {
    DLB_REQUIRE(input != nullptr && label != nullptr, "training step: no input or no labels");
    const std::int64_t classes = net.layers[logits_layer].out_size();
    for (std::int64_t n = 0; n < batch; ++n)
      if (label[n] >= classes)
        throw Error("training step: label " + std::to_string(label[n]) + " of image " + std::to_string(n) +
                    " is not a class of " + net.name + " (0.." + std::to_string(classes - 1) + ")");
    x = input;
    labels = label;
    for (std::size_t i = 0; i <= logits_layer; ++i) {
      const Layer& l = net.layers[i];
      PerLayer& s = layers[i];
      const float* in = input_of(i);
      float* y = s.out.data();
      switch (l.kind) {
        case LayerKind::conv:
          if (pooled(i)) {
            conv_forward(l, s, in, y, &net.layers[i + 1], &layers[i + 1]);
            ++i;  // the pool is done
          } else {
            conv_forward(l, s, in, y, nullptr, nullptr);
          }
          break;
        case LayerKind::fc: fc_forward(l, s, in, y); break;
        case LayerKind::max_pool: max_pool_forward(l, s, in, y); break;
        case LayerKind::global_avg_pool: global_avg_pool_nchw(l, batch, in, y); break;
        case LayerKind::log_softmax: break;  // last layer only: the loss below
      }
    }
    // Log-softmax (sums in double) and the mean negative log-likelihood.
    const float* logits = layers[logits_layer].out.data();
    double loss = 0;
    for (std::int64_t n = 0; n < batch; ++n) {
      const float* row = logits + n * classes;
      const float m = *std::max_element(row, row + classes);
      double sum = 0;
      for (std::int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - m);
      const double shift = m + std::log(sum);
      for (std::int64_t j = 0; j < classes; ++j)
        log_probs[static_cast<std::size_t>(n * classes + j)] = static_cast<float>(row[j] - shift);
      loss -= log_probs[static_cast<std::size_t>(n * classes + label[n])];
    }
    forward_done = true;
    backward_done = false;
    return loss / static_cast<double>(batch);
  }

  // dy: the gradient of layer l's output (ReLU applied to it here), or of
  // its pool's output where `pool` is given (pooled); dx: of its input, or nullptr.
  void conv_backward(const Layer& l, const PerLayer& s, const float* in, float* dy, float* dx, const Layer* pool,
                     const PerLayer* pool_state) {
    const std::int64_t crr = l.c * l.window * l.window, plane = l.oh * l.ow;
    const float* w = p[static_cast<std::size_t>(s.weight)].data();
    const bool has_bias = s.bias >= 0;
    // Every thread's partial sums zeroed here, not in the region: OpenMP may
    // run it on fewer threads than asked, and reduce() reads them all.
    for (auto& part : partial) std::fill(part.begin(), part.begin() + l.k * crr + l.k, 0.0f);
#pragma omp parallel num_threads(threads)
    {
      const auto t = static_cast<std::size_t>(omp_get_thread_num());
      Map dw(partial[t].data(), l.k, crr);
      Eigen::Map<Vector> db(partial[t].data() + l.k * crr, l.k);
#pragma omp for schedule(static)
      for (std::int64_t n = 0; n < batch; ++n) {
        float* dn = dy + n * l.k * plane;
        if (pool != nullptr) {
          dn = dout[t].data();
          unpool_image(*pool, pool_state->argmax.data() + n * pool->out_size(), dy + n * pool->out_size(), dn);
        }
        Map d(dn, l.k, plane);
        if (l.relu) d = (ConstMap(layers_out(s) + n * l.k * plane, l.k, plane).array() > 0.0f).select(d, 0.0f);
        im2col(l, in + n * l.in_size(), col[t].data());
        gemm(lib, false, true, l.k, crr, plane, d.data(), plane, col[t].data(), plane, true, dw.data(), crr);
        if (has_bias) db += d.rowwise().sum();
        if (dx != nullptr) {
          gemm(lib, true, false, crr, plane, l.k, w, crr, d.data(), plane, false, dcol[t].data(), plane);
          col2im(l, dcol[t].data(), dx + n * l.in_size());
        }
      }
    }
    reduce(s.weight, l.k * crr, 0);
    if (has_bias) reduce(s.bias, l.k, l.k * crr);
  }
  static const float* layers_out(const PerLayer& s) { return s.out.data(); }

  // g[param] = the sum of the threads' partial sums at `offset`, in thread order.
  void reduce(int param, std::int64_t size, std::int64_t offset) {
    float* out = g[static_cast<std::size_t>(param)].data();
    std::copy(partial[0].data() + offset, partial[0].data() + offset + size, out);
    for (int t = 1; t < threads; ++t) {
      const float* part = partial[static_cast<std::size_t>(t)].data() + offset;
      for (std::int64_t i = 0; i < size; ++i) out[i] += part[i];
    }
  }

  void fc_backward(const Layer& l, const PerLayer& s, const float* in, float* dy, float* dx) {
    Map d(dy, batch, l.k);
    if (l.relu) d = (ConstMap(s.out.data(), batch, l.k).array() > 0.0f).select(d, 0.0f);
    gemm(lib, true, false, l.k, l.in_size(), batch, dy, l.k, in, l.in_size(), false,
         g[static_cast<std::size_t>(s.weight)].data(), l.in_size());
    Eigen::Map<Eigen::RowVectorXf>(g[static_cast<std::size_t>(s.bias)].data(), l.k) = d.colwise().sum();
    if (dx != nullptr) {
      gemm(lib, false, false, batch, l.in_size(), l.k, dy, l.k, p[static_cast<std::size_t>(s.weight)].data(),
           l.in_size(), false, dx, l.in_size());
    }
  }

  void max_pool_backward(const Layer& l, const PerLayer& s, const float* dy, float* dx) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch; ++n)
      unpool_image(l, s.argmax.data() + n * l.out_size(), dy + n * l.out_size(), dx + n * l.in_size());
  }

  void global_avg_pool_backward(const Layer& l, const float* dy, float* dx) {
    const std::int64_t plane = l.h * l.w;
    const float inv = 1.0f / static_cast<float>(plane);
    for (std::int64_t q = 0; q < batch * l.c; ++q) std::fill(dx + q * plane, dx + (q + 1) * plane, dy[q] * inv);
  }

  void backward() {
    DLB_REQUIRE(forward_done, "training step: backward without a forward");
    const std::int64_t classes = net.layers[logits_layer].out_size();
    // d loss / d logits = (softmax - onehot) / batch.
    float* dy = dbuf[0].data();
    float* dx = dbuf[1].data();
    const float inv = 1.0f / static_cast<float>(batch);
    for (std::int64_t n = 0; n < batch; ++n)
      for (std::int64_t j = 0; j < classes; ++j) {
        const auto k = static_cast<std::size_t>(n * classes + j);
        dy[k] = (std::exp(log_probs[k]) - (j == labels[n] ? 1.0f : 0.0f)) * inv;
      }
    for (std::size_t i = logits_layer + 1; i-- > 0;) {
      const Layer& l = net.layers[i];
      const PerLayer& s = layers[i];
      float* to = i == 0 ? nullptr : dx;
      switch (l.kind) {
        case LayerKind::conv:
          if (pooled(i)) conv_backward(l, s, input_of(i), dy, to, &net.layers[i + 1], &layers[i + 1]);
          else conv_backward(l, s, input_of(i), dy, to, nullptr, nullptr);
          break;
        case LayerKind::fc: fc_backward(l, s, input_of(i), dy, to); break;
        case LayerKind::max_pool:
          if (i > 0 && pooled(i - 1)) continue;  // done in its conv's backward, which reads dy
          if (to != nullptr) max_pool_backward(l, s, dy, to);
          break;
        case LayerKind::global_avg_pool:
          if (to != nullptr) global_avg_pool_backward(l, dy, to);
          break;
        case LayerKind::log_softmax: break;
      }
      std::swap(dy, dx);
    }
    backward_done = true;
  }

  void update() {
    DLB_REQUIRE(backward_done, "training step: update without a backward");
    const float lr = static_cast<float>(sgd.lr), mu = static_cast<float>(sgd.momentum),
                wd = static_cast<float>(sgd.weight_decay);
    for (std::size_t j = 0; j < p.size(); ++j) {
      float* pj = p[j].data();
      const float* gj = g[j].data();
      float* vj = v[j].data();
      const auto size = static_cast<std::int64_t>(p[j].size());
#pragma omp parallel for schedule(static) num_threads(threads) if (size > 16384)
      for (std::int64_t i = 0; i < size; ++i) {
        const float grad = wd != 0.0f ? gj[i] + wd * pj[i] : gj[i];
        vj[i] = mu * vj[i] + grad;
        pj[i] -= lr * vj[i];
      }
    }
    backward_done = false;
  }

  TrainMemory memory() const {
    TrainMemory m;
    const auto bytes = [](const auto& vec) { return static_cast<std::int64_t>(vec.size() * sizeof(vec[0])); };
    for (std::size_t j = 0; j < p.size(); ++j) m.weights += bytes(p[j]), m.gradients += bytes(g[j]), m.optimizer += bytes(v[j]);
    for (const auto& s : layers) m.activations += bytes(s.out) + bytes(s.argmax);
    m.activations += bytes(log_probs);
    for (const auto& d : dbuf) m.workspace += bytes(d);
    for (int t = 0; t < threads; ++t) {
      const auto u = static_cast<std::size_t>(t);
      m.workspace += bytes(col[u]) + bytes(dcol[u]) + bytes(partial[u]) + bytes(dout[u]);
    }
    return m;
  }
};

TrainStep::TrainStep(const Network& net, std::int64_t batch, Sgd sgd, TrainImpl impl) {
#if DLB_HAVE_ONEDNN
  if (impl == TrainImpl::onednn) {
    backend_ = make_onednn_train_step(net, batch, sgd);
    return;
  }
#endif
  impl_ = std::make_unique<Impl>(net, batch, sgd, impl);
}
TrainStep::~TrainStep() = default;
// Each call goes to backend_ where it is set (TrainImpl::onednn), else to impl_.
double TrainStep::forward(const float* x, const std::uint8_t* labels) {
  return backend_ ? backend_->forward(x, labels) : impl_->forward(x, labels);
}
void TrainStep::backward() { backend_ ? backend_->backward() : impl_->backward(); }
void TrainStep::update() { backend_ ? backend_->update() : impl_->update(); }
std::int64_t TrainStep::batch() const { return backend_ ? backend_->batch() : impl_->batch; }
const Sgd& TrainStep::sgd() const { return backend_ ? backend_->sgd() : impl_->sgd; }
const std::vector<TrainParam>& TrainStep::params() const { return backend_ ? backend_->params() : impl_->params; }
std::span<const float> TrainStep::param(std::size_t i) const {
  return backend_ ? backend_->param(i) : std::span<const float>(impl_->p.at(i));
}
std::span<float> TrainStep::param(std::size_t i) { return backend_ ? backend_->param_to_write(i) : impl_->p.at(i); }
std::span<const float> TrainStep::grad(std::size_t i) const { return backend_ ? backend_->grad(i) : impl_->g.at(i); }
std::span<const float> TrainStep::velocity(std::size_t i) const {
  return backend_ ? backend_->velocity(i) : impl_->v.at(i);
}
std::span<const float> TrainStep::log_probs() const { return backend_ ? backend_->log_probs() : impl_->log_probs; }
TrainMemory TrainStep::memory() const { return backend_ ? backend_->memory() : impl_->memory(); }

}  // namespace dlb::nn
