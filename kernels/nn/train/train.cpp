// The fp32 training step (train.h): im2col + GEMM convolutions (Eigen or
// oneDNN's sgemm) on chunks of images, GEMM fc layers, batch-norm in
// training mode, residual joins, OpenMP over the chunks and images.
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
#include <utility>

#include "kernels/common/error.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_wgrad.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/walked_step.h"

namespace dlb::nn {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMajor>;
using ConstMap = Eigen::Map<const RowMajor>;
using Vector = Eigen::Matrix<float, Eigen::Dynamic, 1>;

// C [m, n] = op(A) op(B) (+ C where accumulate), row-major, op = transpose
// where asked; lda, ldb, ldc: the row lengths as stored.
void gemm(Gemm lib, bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc) {
#if DLB_HAVE_ONEDNN
  if (lib == Gemm::onednn_sgemm) {
    const dnnl_status_t status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb,
                                            accumulate ? 1.0f : 0.0f, c, ldc);
    if (status != dnnl_success)
      throw_error("dnnl_sgemm failed with status " + std::to_string(static_cast<int>(status)), __FILE__, __LINE__);
    return;
  }
#endif
  DLB_REQUIRE(lib == Gemm::eigen, "training step: this build has no oneDNN");
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

// One image's patches: col [c*r*r, oh*ow] (row q at col + q * ld), zero
// where the window is in the padding. Plain loops: the rows are short (8 to
// 32 floats), too short for memcpy's call to pay.
// A "same" convolution (stride 1, the output the input's size, the window
// inside the padding): a patch row is the input plane shifted by (a - pad,
// b - pad), one contiguous copy but for the rows and columns in the padding.
bool same_size(const Layer& l) {
  return l.stride == 1 && l.oh == l.h && l.ow == l.w && l.pad < l.w && l.window - 1 - l.pad < l.w;
}

// The range of a shifted plane's contiguous copy: output rows [i0, i1),
// elements [from, to) of the plane, and the source offset.
struct Shift {
  std::int64_t i0, i1, from, to, offset, dx;
};
Shift shift_of(const Layer& l, std::int64_t a, std::int64_t b) {
  const std::int64_t dy = a - l.pad, dx = b - l.pad;
  const std::int64_t i0 = std::max<std::int64_t>(0, -dy), i1 = std::min(l.oh, l.h - dy);
  Shift s{i0, std::max(i0, i1), 0, 0, dy * l.w + dx, dx};
  s.from = s.i0 * l.ow + std::max<std::int64_t>(0, -dx);
  s.to = std::max(s.from, s.i1 * l.ow - std::max<std::int64_t>(0, dx));
  return s;
}

// In one shifted plane [oh, ow]: zeroes the columns the shift by s.dx
// wrapped in from the next or previous row (the padding's).
void zero_wrapped(const Layer& l, const Shift& s, float* plane) {
  if (s.dx < 0) {
    for (std::int64_t i = s.i0; i < s.i1; ++i)
      for (std::int64_t j = 0; j < -s.dx; ++j) plane[i * l.ow + j] = 0.0f;
  } else if (s.dx > 0) {
    for (std::int64_t i = s.i0; i < s.i1; ++i)
      for (std::int64_t j = l.ow - s.dx; j < l.ow; ++j) plane[i * l.ow + j] = 0.0f;
  }
}

void im2col(const Layer& l, const float* x, float* col, std::int64_t ld) {
  const std::int64_t r = l.window;
  if (same_size(l)) {
    const std::int64_t plane = l.oh * l.ow;
    for (std::int64_t c = 0; c < l.c; ++c)
      for (std::int64_t a = 0; a < r; ++a)
        for (std::int64_t b = 0; b < r; ++b) {
          float* __restrict dst = col + ((c * r + a) * r + b) * ld;
          const Shift s = shift_of(l, a, b);
          const float* __restrict src = x + c * l.h * l.w + s.offset + s.from;  // plane element s.from's source
          for (std::int64_t e = 0; e < s.from; ++e) dst[e] = 0.0f;
          for (std::int64_t e = 0; e < s.to - s.from; ++e) dst[s.from + e] = src[e];
          for (std::int64_t e = s.to; e < plane; ++e) dst[e] = 0.0f;
          zero_wrapped(l, s, dst);  // the columns the shift wrapped in from the next or previous row
        }
    return;
  }
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t a = 0; a < r; ++a)
      for (std::int64_t b = 0; b < r; ++b) {
        float* row = col + ((c * r + a) * r + b) * ld;
        const Span s = inside(l, b);
        for (std::int64_t i = 0; i < l.oh; ++i) {
          float* dst = row + i * l.ow;
          const std::int64_t sy = i * l.stride + a - l.pad;
          if (sy < 0 || sy >= l.h) {
            for (std::int64_t j = 0; j < l.ow; ++j) dst[j] = 0.0f;
            continue;
          }
          for (std::int64_t j = 0; j < s.first; ++j) dst[j] = 0.0f;
          const float* src = x + (c * l.h + sy) * l.w + b - l.pad;
          if (l.stride == 1) {
            for (std::int64_t j = s.first; j < s.last; ++j) dst[j] = src[j];
          } else {
            for (std::int64_t j = s.first; j < s.last; ++j) dst[j] = src[j * l.stride];
          }
          for (std::int64_t j = s.last; j < l.ow; ++j) dst[j] = 0.0f;
        }
      }
}

// The adjoint of im2col: dx [c, h, w] = the sum of every patch entry's
// gradient at its pixel (added to dx where accumulate); row q of dcol at
// dcol + q * ld.
void col2im(const Layer& l, float* dcol, std::int64_t ld, float* dx, bool accumulate) {
  const std::int64_t r = l.window;
  if (!accumulate) std::fill(dx, dx + l.in_size(), 0.0f);
  if (same_size(l)) {
    // The contiguous add of each shifted plane, the padding's columns (which
    // the shift would wrap onto the next or previous row) zeroed first.
    for (std::int64_t c = 0; c < l.c; ++c)
      for (std::int64_t a = 0; a < r; ++a)
        for (std::int64_t b = 0; b < r; ++b) {
          float* __restrict src = dcol + ((c * r + a) * r + b) * ld;
          const Shift s = shift_of(l, a, b);
          zero_wrapped(l, s, src);
          float* __restrict dst = dx + c * l.h * l.w + s.offset + s.from;
          for (std::int64_t e = 0; e < s.to - s.from; ++e) dst[e] += src[s.from + e];
        }
    return;
  }
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t a = 0; a < r; ++a)
      for (std::int64_t b = 0; b < r; ++b) {
        const float* row = dcol + ((c * r + a) * r + b) * ld;
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

// Its adjoint: dx (one image; every element written, or added to where
// accumulate) from dy and the routes.
void unpool_image(const Layer& l, const std::uint8_t* arg, const float* dy, float* dx, bool accumulate = false) {
  if (!accumulate) std::fill(dx, dx + l.in_size(), 0.0f);
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t i = 0; i < l.oh; ++i)
      for (std::int64_t j = 0; j < l.ow; ++j) {
        const std::int64_t o = (c * l.oh + i) * l.ow + j;
        dx[(c * l.h + i * l.stride + arg[o] / l.window) * l.w + j * l.stride + arg[o] % l.window] += dy[o];
      }
}

// sum += x[i], sum2 += x[i]^2 over n floats, in double (eight lanes, so
// that the compiler vectorizes it without reassociating).
void sums_double(const float* x, std::int64_t n, double& sum, double& sum2) {
  double a[8] = {}, b[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const double v = x[i + j];
      a[j] += v;
      b[j] += v * v;
    }
  for (; i < n; ++i) a[0] += x[i], b[0] += static_cast<double>(x[i]) * x[i];
  for (int j = 0; j < 8; ++j) sum += a[j], sum2 += b[j];
}

// sum += d[i], sum_x += d[i] xhat[i] (xhat = (z - mean) inv_std, in fp32), in double.
void bn_grad_sums(const float* d, const float* z, float mean, float inv_std, std::int64_t n, double& sum,
                  double& sum_x) {
  double a[8] = {}, b[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) {
      const float xhat = (z[i + j] - mean) * inv_std;
      a[j] += d[i + j];
      b[j] += static_cast<double>(d[i + j]) * xhat;
    }
  for (; i < n; ++i) a[0] += d[i], b[0] += static_cast<double>(d[i]) * ((z[i] - mean) * inv_std);
  for (int j = 0; j < 8; ++j) sum += a[j], sum_x += b[j];
}

}  // namespace

namespace {

// The im2col step and the own-kernel step: a backend of the training walk
// (train_walk.h), its calls made once by the constructor.
class Im2colStep final : public PlainParamsStep {
 public:
  bool own_convs;  // make_own_train_step: every conv on the own direct kernel
  Gemm gemm_lib;   // the GEMMs' library (Eigen's for the own step's fc layers)
  int threads = omp_get_max_threads();
  struct PerLayer {
    int weight = -1, bias = -1, gamma = -1, beta = -1;  // parameter indices
    std::vector<float> out;             // [batch, out_size]: what backward reads (ReLU masks, next layer's input)
    std::vector<std::uint8_t> argmax;   // max_pool: the window offset of each output's maximum
    // Batch-norm: the conv's output before it [batch, out_size], the batch's
    // mean and 1 / sqrt(var + eps), y = z scale + shift, the running
    // statistics; a, b: backward's mean(dy) and mean(dy xhat) per channel.
    std::vector<float> z, mean, inv_std, scale, shift, running_mean, running_var, a, b;
    int grad = -1;                   // the backward buffer holding the gradient of this layer's output
    bool add_to_input = false;       // backward adds to its input's gradient (another reader wrote it first)
    bool add_to_residual = false;    // the same for the residual
  };
  std::vector<PerLayer> layers;
  std::vector<int> readers;      // per layer: how many layers read its output (input or residual)
  std::vector<std::vector<float>> gbuf;  // backward's gradient buffers, shared by layers whose gradients do not overlap in time
  std::vector<std::vector<float>> col, dcol, zbuf, partial, dout;  // per thread
  std::vector<std::vector<double>> stats;                    // per thread: batch-norm's per-channel sums
  // The own step: every conv's forward and backward-data convolution on
  // the own direct kernel (prepare_conv_direct_live), its weight gradient on
  // the own weight-gradient kernel (conv_wgrad.h), on buffers shared by the
  // layers (backward runs one layer at a time): the masked output gradient
  // dz [batch, k, oh, ow] and the rotated weights [c, k, r, r].
  struct OwnConv {
    ConvArgs forward, data;  // the Runs read them at each call
    Run run_forward, run_data;
    std::unique_ptr<ConvWeightGrad> weights;
  };
  std::vector<std::unique_ptr<OwnConv>> own;  // per layer, null but for convs
  std::vector<float> own_dz, own_w_rot;
  const float* x = nullptr;

  Im2colStep(const Network& n, std::int64_t b, Sgd s, bool own, Gemm gemm)
      : PlainParamsStep(n, b, s, "training step"), own_convs(own), gemm_lib(gemm) {
#if !DLB_HAVE_ONEDNN
    if (gemm_lib != Gemm::eigen) throw Unsupported("training step: this build has no oneDNN");
#endif
    const auto& ls = net_.layers;
    layers.resize(ls.size());
    readers.assign(ls.size(), 0);
    std::copy(flow_.readers.begin(), flow_.readers.end(), readers.begin());
    for (std::size_t j = 0; j < params_.size(); ++j) {
      PerLayer& pl = layers[params_[j].layer];
      (params_[j].bn ? (params_[j].bias ? pl.beta : pl.gamma) : (params_[j].bias ? pl.bias : pl.weight)) =
          static_cast<int>(j);
    }
    std::int64_t col_floats = 0, z_floats = 0, partial_floats = 0, out_floats = 0, max_k = 1;
    for (std::size_t i = 0; i <= flow_.logits; ++i) {
      const Layer& l = ls[i];
      PerLayer& s = layers[i];
      s.out.assign(static_cast<std::size_t>(batch_ * l.out_size()), 0.0f);
      if (l.kind == LayerKind::max_pool) s.argmax.assign(s.out.size(), 0);
      if (l.kind == LayerKind::conv) {
        col_floats = std::max(col_floats, l.c * l.window * l.window * l.oh * l.ow * chunk_of(l));
        z_floats = std::max(z_floats, l.k * l.oh * l.ow * chunk_of(l));
        partial_floats = std::max(partial_floats, l.k * l.c * l.window * l.window + l.k);
        out_floats = std::max(out_floats, l.out_size());
        max_k = std::max(max_k, l.k);
      }
      if (s.gamma >= 0) {
        s.z.assign(s.out.size(), 0.0f);
        for (auto* vec : {&s.mean, &s.inv_std, &s.scale, &s.shift, &s.a, &s.b})
          vec->assign(static_cast<std::size_t>(l.k), 0.0f);
        s.running_mean = l.raw.bn_mean;
        s.running_var = l.raw.bn_var;
        if (static_cast<std::int64_t>(s.running_mean.size()) != l.k) s.running_mean.assign(static_cast<std::size_t>(l.k), 0.0f);
        if (static_cast<std::int64_t>(s.running_var.size()) != l.k) s.running_var.assign(static_cast<std::size_t>(l.k), 1.0f);
      }
    }
    if (own_convs) col_floats = z_floats = partial_floats = out_floats = 0;  // the im2col step's
    assign_gradient_buffers();
    if (own_convs) prepare_own();
    for (int t = 0; t < threads; ++t) {
      col.emplace_back(static_cast<std::size_t>(col_floats), 0.0f);
      dcol.emplace_back(static_cast<std::size_t>(col_floats), 0.0f);
      zbuf.emplace_back(static_cast<std::size_t>(z_floats), 0.0f);
      partial.emplace_back(static_cast<std::size_t>(partial_floats), 0.0f);
      dout.emplace_back(static_cast<std::size_t>(out_floats), 0.0f);
      stats.emplace_back(static_cast<std::size_t>(2 * max_k), 0.0);
    }
    walk();
  }

  // Backward's buffers: the gradient of layer j's output is written first
  // by the last layer that reads it (the loss for the logits) and read by
  // layer j's own backward (a pool run inside its conv: by the conv's);
  // layers whose intervals do not overlap share a buffer (greedy, in
  // backward order). A pooled conv's own output gradient lives per image in
  // `dout`. The first writer overwrites, later ones add (add_to_*).
  void assign_gradient_buffers() {
    const auto& ls = net_.layers;
    const auto n = static_cast<int>(flow_.logits) + 1;
    const std::vector<int>& first_write = flow_.first_write;
    for (int i = 0; i < n; ++i) {
      const Layer& l = ls[static_cast<std::size_t>(i)];
      PerLayer& s = layers[static_cast<std::size_t>(i)];
      if (l.input >= 0) s.add_to_input = first_write[static_cast<std::size_t>(l.input)] != i;
      if (l.residual >= 0) s.add_to_residual = first_write[static_cast<std::size_t>(l.residual)] != i;
    }
    std::vector<int> written(first_write), read(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      const auto u = static_cast<std::size_t>(j);
      if (pooled(u)) written[u] = -1;
      read[u] = (j > 0 && pooled(u - 1)) ? j - 1 : j;
    }
    std::size_t buffers = 0;
    const std::vector<int> buf = share_gradient_buffers(written, read, buffers);
    std::vector<std::int64_t> size(buffers, 0);
    for (int j = 0; j < n; ++j) {
      const auto u = static_cast<std::size_t>(j);
      layers[u].grad = buf[u];
      if (buf[u] >= 0)
        size[static_cast<std::size_t>(buf[u])] = std::max(size[static_cast<std::size_t>(buf[u])], batch_ * ls[u].out_size());
    }
    for (const auto sz : size) gbuf.emplace_back(static_cast<std::size_t>(sz), 0.0f);
  }

  // The own step's three convolutions per conv layer, prepared once on the
  // step's buffers. Refuses, naming the layer, what it does not do:
  // batch-norm, residual joins, a stride above 1 (backward data as a
  // convolution of the gradient needs stride 1), a pad above window - 1, an
  // output that two layers read.
  void prepare_own() {
    const auto& ls = net_.layers;
    const auto refuse = [&](const Layer& l, const std::string& what) {
      throw Unsupported("training step cpu_own: " + net_.name + " layer " + l.name + ": " + what +
                        " is not supported (chains of stride-1 convolutions only)");
    };
    std::int64_t out = 0, wsize = 0;
    for (std::size_t i = 0; i <= flow_.logits; ++i) {
      const Layer& l = ls[i];
      if (l.kind != LayerKind::conv) continue;
      if (layers[i].gamma >= 0) refuse(l, "batch-norm");
      if (l.residual >= 0 || layers[i].add_to_input) refuse(l, "a join");
      if (l.stride != 1) refuse(l, "stride " + std::to_string(l.stride));
      if (l.pad > l.window - 1) refuse(l, "pad " + std::to_string(l.pad) + " above the window's " + std::to_string(l.window - 1));
      out = std::max(out, batch_ * l.out_size());
      wsize = std::max(wsize, l.k * l.c * l.window * l.window);
    }
    own_dz.assign(static_cast<std::size_t>(out), 0.0f);
    own_w_rot.assign(static_cast<std::size_t>(wsize), 0.0f);
    own.resize(ls.size());
    const Exec exec;
    for (std::size_t i = 0; i <= flow_.logits; ++i) {
      const Layer& l = ls[i];
      if (l.kind != LayerKind::conv) continue;
      auto o = std::make_unique<OwnConv>();
      const std::int64_t r = l.window;
      // y [n, k, oh, ow] = conv(x [n, c, h, w], W [k, c, r, r]), pad p.
      o->forward = {ConvShape{batch_, l.c, l.h, l.w, l.k, r, r, 1, l.pad}, nullptr,
                    p(layers[i].weight), layers[i].out.data()};
      // dx [n, c, h, w] = conv(dz [n, k, oh, ow], W rotated [c, k, r, r]),
      // pad r - 1 - p: (oh + 2 (r - 1 - p) - r + 1) = h.
      o->data = {ConvShape{batch_, l.k, l.oh, l.ow, l.c, r, r, 1, r - 1 - l.pad}, own_dz.data(), own_w_rot.data(),
                 l.input >= 0 ? grad_of(l.input) : nullptr};
      o->weights = std::make_unique<ConvWeightGrad>(ConvShape{batch_, l.c, l.h, l.w, l.k, r, r, 1, l.pad});
      o->run_forward = prepare_conv_direct_live(&o->forward, exec);
      if (o->data.y != nullptr) o->run_data = prepare_conv_direct_live(&o->data, exec);
      own[i] = std::move(o);
    }
  }

  float* grad_of(int layer) {
    const int buf = layers[static_cast<std::size_t>(layer)].grad;
    return buf < 0 ? nullptr : gbuf[static_cast<std::size_t>(buf)].data();
  }

  // How many images a conv's GEMMs take at once: their patches side by
  // side, about kColumns columns (a GEMM large enough for the libraries'
  // blocking, its buffers a few MB per thread), at most a thread's share.
  static constexpr std::int64_t kColumns = 1024;
  std::int64_t chunk_of(const Layer& l) const {
    const std::int64_t plane = l.oh * l.ow;
    return std::clamp<std::int64_t>((kColumns + plane - 1) / plane, 1, (batch_ + threads - 1) / threads);
  }

  // body(t, n0, cnt) for every chunk of chunk_of(l) images from n0, on
  // the step's threads (t: the thread, whose buffers the body uses).
  template <class Body>
  void for_chunks(const Layer& l, Body&& body) {
#pragma omp parallel num_threads(threads)
    {
      const auto t = static_cast<std::size_t>(omp_get_thread_num());
      const std::int64_t chunk = chunk_of(l), chunks = (batch_ + chunk - 1) / chunk;
#pragma omp for schedule(static)
      for (std::int64_t ch = 0; ch < chunks; ++ch) body(t, ch * chunk, std::min(chunk, batch_ - ch * chunk));
    }
  }

  const float* input_of(std::size_t i) const {
    const int in = net_.layers[i].input;
    return in < 0 ? x : layers[static_cast<std::size_t>(in)].out.data();
  }

  // Whether layer i is a conv (no batch-norm, no join) whose output only a
  // max pool right after it reads: the pool then runs inside the conv's
  // loop over the images, on each image's output while it is in cache, and
  // its backward inside the conv's backward.
  bool pooled(std::size_t i) const {
    return net_.layers[i].kind == LayerKind::conv && layers[i].gamma < 0 && net_.layers[i].residual < 0 &&
           i + 1 <= flow_.logits && net_.layers[i + 1].kind == LayerKind::max_pool &&
           net_.layers[i + 1].input == static_cast<int>(i) && readers[i] == 1;
  }

  // A conv layer, its state, and the max pool its loops run (pooled) with
  // that pool's state, or nulls.
  struct ConvParts {
    const Layer& l;
    PerLayer& s;
    const Layer* pool;
    PerLayer* pool_state;
  };
  ConvParts conv_parts(std::size_t i) {
    const bool fused = pooled(i);
    return {net_.layers[i], layers[i], fused ? &net_.layers[i + 1] : nullptr, fused ? &layers[i + 1] : nullptr};
  }

  // out = relu(in + bias + residual) on one image [k, plane], any part absent.
  static void epilogue(const Layer& l, float* out, const float* bias, const float* res) {
    const std::int64_t plane = l.oh * l.ow;
    for (std::int64_t k = 0; k < l.k; ++k) {
      float* o = out + k * plane;
      const float* r = res != nullptr ? res + k * plane : nullptr;
      const float bk = bias != nullptr ? bias[k] : 0.0f;
      if (bias != nullptr)
        for (std::int64_t q = 0; q < plane; ++q) o[q] += bk;
      if (r != nullptr)
        for (std::int64_t q = 0; q < plane; ++q) o[q] += r[q];
      if (l.relu)
        for (std::int64_t q = 0; q < plane; ++q) o[q] = std::max(o[q], 0.0f);
    }
  }

  void conv_forward(std::size_t i) {
    const auto [l, s, pool, pool_state] = conv_parts(i);
    const bool bn = s.gamma >= 0;
    const std::int64_t crr = l.c * l.window * l.window, plane = l.oh * l.ow;
    const float* in = input_of(i);
    const float* w = p(s.weight);
    const float* bias = s.bias >= 0 ? p(s.bias) : nullptr;
    const float* res = l.residual >= 0 ? layers[static_cast<std::size_t>(l.residual)].out.data() : nullptr;
    float* y = bn ? s.z.data() : s.out.data();
    if (bn)
      for (auto& st : stats) std::fill(st.begin(), st.begin() + 2 * l.k, 0.0);
    for_chunks(l, [&](std::size_t t, std::int64_t n0, std::int64_t cnt) {
      // The chunk's patches side by side, [crr, cnt * plane], one GEMM.
      const std::int64_t cols = cnt * plane;
      float* cb = col[t].data();
      float* yb = zbuf[t].data();
      for (std::int64_t j = 0; j < cnt; ++j) im2col(l, in + (n0 + j) * l.in_size(), cb + j * plane, cols);
      gemm(gemm_lib, false, false, l.k, cols, crr, w, crr, cb, cols, false, yb, cols);
      for (std::int64_t n = n0; n < n0 + cnt; ++n) {
        float* yn = y + n * l.k * plane;
        for (std::int64_t k = 0; k < l.k; ++k) {
          const float* from = yb + k * cols + (n - n0) * plane;
          std::copy(from, from + plane, yn + k * plane);
        }
        if (bn) {
          double* st = stats[t].data();
          if (bias != nullptr)
            for (std::int64_t k = 0; k < l.k; ++k)
              for (std::int64_t q = 0; q < plane; ++q) yn[k * plane + q] += bias[k];
          for (std::int64_t k = 0; k < l.k; ++k) sums_double(yn + k * plane, plane, st[k], st[l.k + k]);
        } else {
          epilogue(l, yn, bias, res != nullptr ? res + n * l.out_size() : nullptr);
        }
        if (pool != nullptr) {
          pool_image(*pool, yn, pool_state->out.data() + n * pool->out_size(),
                     pool_state->argmax.data() + n * pool->out_size());
        }
      }
    });
    if (bn) batch_norm_forward(i);
  }

  // The own step: y = conv(x, W) on the own kernel, then per image the
  // bias and ReLU, and the pool where it runs inside the conv.
  void conv_forward_own(std::size_t i) {
    const auto [l, s, pool, pool_state] = conv_parts(i);
    OwnConv& o = *own[i];
    const float* bias = s.bias >= 0 ? p(s.bias) : nullptr;
    o.forward.x = input_of(i);  // the network's input moves between calls
    o.run_forward();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch_; ++n) {
      float* yn = s.out.data() + n * l.out_size();
      epilogue(l, yn, bias, nullptr);
      if (pool != nullptr)
        pool_image(*pool, yn, pool_state->out.data() + n * pool->out_size(),
                   pool_state->argmax.data() + n * pool->out_size());
    }
  }

  // The batch's statistics from the threads' sums (in thread order), the
  // running statistics' update, then y = relu(z scale + shift + residual).
  void batch_norm_forward(std::size_t i) {
    const Layer& l = net_.layers[i];
    PerLayer& s = layers[i];
    const std::int64_t plane = l.oh * l.ow;
    const double m = static_cast<double>(batch_ * plane), mo = l.raw.bn_momentum;
    const float* gamma = p(s.gamma);
    const float* beta = p(s.beta);
    for (std::int64_t k = 0; k < l.k; ++k) {
      double sum = 0, sum2 = 0;
      for (int t = 0; t < threads; ++t) sum += stats[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)],
                                        sum2 += stats[static_cast<std::size_t>(t)][static_cast<std::size_t>(l.k + k)];
      // One pass in double: E[z^2] - mean^2 loses (mean^2 / var) M 2^-53
      // relative to var, negligible against fp32's u unless |mean| is
      // thousands of standard deviations.
      const double mean = sum / m, var = std::max(sum2 / m - mean * mean, 0.0);
      const double inv_std = 1.0 / std::sqrt(var + l.raw.bn_eps);
      const auto u = static_cast<std::size_t>(k);
      s.mean[u] = static_cast<float>(mean);
      s.inv_std[u] = static_cast<float>(inv_std);
      s.scale[u] = static_cast<float>(gamma[k] * inv_std);
      s.shift[u] = static_cast<float>(beta[k] - mean * gamma[k] * inv_std);
      s.running_mean[u] = static_cast<float>((1 - mo) * s.running_mean[u] + mo * mean);
      s.running_var[u] = static_cast<float>((1 - mo) * s.running_var[u] + mo * var * m / std::max(m - 1, 1.0));
    }
    const float* res = l.residual >= 0 ? layers[static_cast<std::size_t>(l.residual)].out.data() : nullptr;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch_; ++n)
      for (std::int64_t k = 0; k < l.k; ++k) {
        const std::int64_t at = (n * l.k + k) * plane;
        const float* z = s.z.data() + at;
        float* y = s.out.data() + at;
        const float sc = s.scale[static_cast<std::size_t>(k)], sh = s.shift[static_cast<std::size_t>(k)];
        if (res != nullptr) {
          for (std::int64_t q = 0; q < plane; ++q) y[q] = z[q] * sc + sh + res[at + q];
        } else {
          for (std::int64_t q = 0; q < plane; ++q) y[q] = z[q] * sc + sh;
        }
        if (l.relu)
          for (std::int64_t q = 0; q < plane; ++q) y[q] = std::max(y[q], 0.0f);
      }
  }

  void fc_forward(const Layer& l, const PerLayer& s, const float* in, float* y) {
    Map out(y, batch_, l.k);
    gemm(gemm_lib, false, true, batch_, l.k, l.in_size(), in, l.in_size(), p(s.weight),
         l.in_size(), false, y, l.k);
    out.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(p(s.bias), l.k);
    if (l.relu) out = out.cwiseMax(0.0f);
  }

  void max_pool_forward(const Layer& l, PerLayer& s, const float* in, float* y) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch_; ++n)
      pool_image(l, in + n * l.in_size(), y + n * l.out_size(), s.argmax.data() + n * l.out_size());
  }

  void set_input(const float* input) override { x = input; }

  // The walk's functions, one per layer kind (train_walk.h): each layer's
  // calls in both directions. A conv runs the max pool that reads it
  // (pooled) in its own loops, forward and backward.
  TrainCalls conv(const Layer&, const TrainIo& io) override {
    const std::size_t i = io.index;
    if (own_convs) {
      TrainCalls c;
      c.forward = [this, i] { conv_forward_own(i); };
      c.backward_weights = [this, i] { conv_backward_own_weights(i); };
      if (own[i]->run_data) c.backward_data = [this, i] { conv_backward_own_data(i); };
      return c;
    }
    TrainCalls c;
    c.forward = [this, i] { conv_forward(i); };
    c.backward = [this, i] { conv_backward(i); };
    return c;
  }
  TrainCalls fc(const Layer& l, const TrainIo& io) override {
    const std::size_t i = io.index;
    return layer_calls(
        io, [this, &l, i] { fc_forward(l, layers[i], input_of(i), layers[i].out.data()); },
        [this, &l, i] { fc_backward_data(l, layers[i], grad_of(static_cast<int>(i)), grad_of(l.input)); },
        [this, &l, i] { fc_backward_weights(l, layers[i], input_of(i), grad_of(static_cast<int>(i))); });
  }
  TrainCalls max_pool(const Layer& l, const TrainIo& io) override {
    const std::size_t i = io.index;
    if (i > 0 && pooled(i - 1)) return {};  // its conv's
    return layer_calls(
        io, [this, &l, i] { max_pool_forward(l, layers[i], input_of(i), layers[i].out.data()); },
        [this, &l, i] { max_pool_backward(l, layers[i], grad_of(static_cast<int>(i)), grad_of(l.input)); });
  }
  TrainCalls global_avg_pool(const Layer& l, const TrainIo& io) override {
    const std::size_t i = io.index;
    return layer_calls(
        io, [this, &l, i] { global_avg_pool_nchw(l, batch_, input_of(i), layers[i].out.data()); },
        [this, &l, i] { global_avg_pool_backward(l, layers[i], grad_of(static_cast<int>(i)), grad_of(l.input)); });
  }
  TrainCalls loss(const TrainIo& io) override {
    const std::size_t i = io.index;
    TrainCalls c;
    c.forward = [this, i] { loss_forward(layers[i].out.data()); };
    c.backward_data = [this, i] { loss_backward(grad_of(static_cast<int>(i))); };
    return c;
  }

  // The ReLU mask on one image's output gradient d (from the kept output),
  // and the join's gradient: d itself, written (or added) to the residual's.
  void mask_and_join(const Layer& l, const PerLayer& s, std::int64_t n, float* d, float* dres) {
    const std::int64_t size = l.out_size();
    if (l.relu) {
      const float* y = s.out.data() + n * size;
      for (std::int64_t q = 0; q < size; ++q) d[q] = y[q] > 0.0f ? d[q] : 0.0f;
    }
    if (dres != nullptr) {
      float* r = dres + n * size;
      if (s.add_to_residual) {
        for (std::int64_t q = 0; q < size; ++q) r[q] += d[q];
      } else {
        std::copy(d, d + size, r);
      }
    }
  }

  // Batch-norm's backward, first half (it needs the whole batch): the ReLU
  // mask and the join on dy, dgamma = sum dy xhat, dbeta = sum dy (in
  // double, per thread, summed in thread order), and the means a, b that
  // the conv's loop turns dy into dz with.
  void batch_norm_backward(std::size_t i, float* dy, float* dres) {
    const Layer& l = net_.layers[i];
    PerLayer& s = layers[i];
    const std::int64_t plane = l.oh * l.ow;
    for (auto& st : stats) std::fill(st.begin(), st.begin() + 2 * l.k, 0.0);
#pragma omp parallel num_threads(threads)
    {
      double* st = stats[static_cast<std::size_t>(omp_get_thread_num())].data();
#pragma omp for schedule(static)
      for (std::int64_t n = 0; n < batch_; ++n) {
        float* d = dy + n * l.out_size();
        mask_and_join(l, s, n, d, dres);
        for (std::int64_t k = 0; k < l.k; ++k)
          bn_grad_sums(d + k * plane, s.z.data() + n * l.out_size() + k * plane, s.mean[static_cast<std::size_t>(k)],
                       s.inv_std[static_cast<std::size_t>(k)], plane, st[k], st[l.k + k]);
      }
    }
    float* dgamma = g(s.gamma);
    float* dbeta = g(s.beta);
    const double m = static_cast<double>(batch_ * plane);
    for (std::int64_t k = 0; k < l.k; ++k) {
      double sum = 0, sum_x = 0;
      for (int t = 0; t < threads; ++t) sum += stats[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)],
                                        sum_x += stats[static_cast<std::size_t>(t)][static_cast<std::size_t>(l.k + k)];
      dbeta[k] = static_cast<float>(sum);
      dgamma[k] = static_cast<float>(sum_x);
      s.a[static_cast<std::size_t>(k)] = static_cast<float>(sum / m);
      s.b[static_cast<std::size_t>(k)] = static_cast<float>(sum_x / m);
    }
  }

  // Layer i's backward: its output's gradient (or, pooled, its pool's) ->
  // its parameters' and its input's (and residual's) gradients.
  void conv_backward(std::size_t i) {
    const auto [l, s, pool, pool_state] = conv_parts(i);
    const bool bn = s.gamma >= 0;
    float* dy = grad_of(static_cast<int>(pool != nullptr ? i + 1 : i));
    float* dx = l.input >= 0 ? grad_of(l.input) : nullptr;
    float* dres = l.residual >= 0 ? grad_of(l.residual) : nullptr;
    if (bn) batch_norm_backward(i, dy, dres);
    const std::int64_t crr = l.c * l.window * l.window, plane = l.oh * l.ow;
    const float* w = p(s.weight);
    const bool has_bias = s.bias >= 0;
    const float* in = input_of(i);
    // Every thread's partial sums zeroed here, not in the region: OpenMP may
    // run it on fewer threads than asked, and reduce() reads them all.
    for (auto& part : partial) std::fill(part.begin(), part.begin() + l.k * crr + l.k, 0.0f);
    for_chunks(l, [&](std::size_t t, std::int64_t n0, std::int64_t cnt) {
      Map dw(partial[t].data(), l.k, crr);
      Eigen::Map<Vector> db(partial[t].data() + l.k * crr, l.k);
      // The chunk's dz [k, cnt * plane] and patches [crr, cnt * plane]
      // side by side: one GEMM for dW, one for the patches' gradients.
      const std::int64_t cols = cnt * plane;
      float* zb = zbuf[t].data();
      float* cb = col[t].data();
      for (std::int64_t n = n0; n < n0 + cnt; ++n) {
        float* dn = dy + n * l.k * plane;
        if (pool != nullptr) {
          dn = dout[t].data();
          unpool_image(*pool, pool_state->argmax.data() + n * pool->out_size(), dy + n * pool->out_size(), dn);
        }
        float* to = zb + (n - n0) * plane;
        if (bn) {
          // dz = scale (dy - mean(dy) - xhat mean(dy xhat)).
          const float* z = s.z.data() + n * l.out_size();
          for (std::int64_t k = 0; k < l.k; ++k) {
            const auto u = static_cast<std::size_t>(k);
            const float mean = s.mean[u], inv_std = s.inv_std[u], sc = s.scale[u], a = s.a[u], b = s.b[u];
            const float* d = dn + k * plane;
            const float* zk = z + k * plane;
            float* o = to + k * cols;
            for (std::int64_t q = 0; q < plane; ++q) o[q] = sc * (d[q] - a - (zk[q] - mean) * inv_std * b);
          }
        } else {
          mask_and_join(l, s, n, dn, dres);
          for (std::int64_t k = 0; k < l.k; ++k) std::copy(dn + k * plane, dn + (k + 1) * plane, to + k * cols);
        }
        im2col(l, in + n * l.in_size(), cb + (n - n0) * plane, cols);
      }
      gemm(gemm_lib, false, true, l.k, crr, cols, zb, cols, cb, cols, true, dw.data(), crr);
      if (has_bias) db += ConstMap(zb, l.k, cols).rowwise().sum();
      if (dx != nullptr) {
        float* dcb = dcol[t].data();
        gemm(gemm_lib, true, false, crr, cols, l.k, w, crr, zb, cols, false, dcb, cols);
        for (std::int64_t n = n0; n < n0 + cnt; ++n)
          col2im(l, dcb + (n - n0) * plane, cols, dx + n * l.in_size(), s.add_to_input);
      }
    });
    reduce(s.weight, l.k * crr, 0);
    if (has_bias) reduce(s.bias, l.k, l.k * crr);
  }

  // The own step's backward weights: dz = the output gradient (through the
  // pool run inside the conv) masked by the ReLU; dW from the own kernel on
  // x and dz transposed (dW^T [c, k, r, r], transposed back), db = the sum
  // of dz per channel (Eigen).
  void conv_backward_own_weights(std::size_t i) {
    const auto [l, s, pool, pool_state] = conv_parts(i);
    OwnConv& o = *own[i];
    const float* dy = grad_of(static_cast<int>(pool != nullptr ? i + 1 : i));
    const float* in = input_of(i);
    const std::int64_t plane = l.oh * l.ow;
    float* dz = own_dz.data();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch_; ++n) {
      float* dn = dz + n * l.out_size();
      if (pool != nullptr) {
        unpool_image(*pool, pool_state->argmax.data() + n * pool->out_size(), dy + n * pool->out_size(), dn);
      } else {
        std::copy(dy + n * l.out_size(), dy + (n + 1) * l.out_size(), dn);
      }
      mask_and_join(l, s, n, dn, nullptr);
    }
    (*o.weights)(in, dz, g(s.weight));
    if (s.bias >= 0) {
      // Per image, then over the batch: batch * plane terms, as the bound counts.
      Eigen::Map<Vector> db(g(s.bias), l.k);
      db.setZero();
      for (std::int64_t n = 0; n < batch_; ++n) db += ConstMap(dz + n * l.out_size(), l.k, plane).rowwise().sum();
    }
  }

  // Its backward data: dx from the own kernel on dz (the weights' call
  // left it) and the rotated weights.
  void conv_backward_own_data(std::size_t i) {
    const Layer& l = net_.layers[i];
    const PerLayer& s = layers[i];
    const std::int64_t r = l.window;
    const float* w = p(s.weight);
    for (std::int64_t c = 0; c < l.c; ++c)
      for (std::int64_t k = 0; k < l.k; ++k)
        for (std::int64_t a = 0; a < r; ++a)
          for (std::int64_t b = 0; b < r; ++b)
            own_w_rot[static_cast<std::size_t>(((c * l.k + k) * r + a) * r + b)] =
                w[((k * l.c + c) * r + r - 1 - a) * r + r - 1 - b];
    own[i]->run_data();
  }

  // g[param] = the sum of the threads' partial sums at `offset`, in thread order.
  void reduce(int param, std::int64_t size, std::int64_t offset) {
    float* out = g(param);
    std::copy(partial[0].data() + offset, partial[0].data() + offset + size, out);
    for (int t = 1; t < threads; ++t) {
      const float* part = partial[static_cast<std::size_t>(t)].data() + offset;
      for (std::int64_t i = 0; i < size; ++i) out[i] += part[i];
    }
  }

  // fc's backward weights (after the ReLU mask on dy, which its backward
  // data reads too) and backward data.
  void fc_backward_weights(const Layer& l, const PerLayer& s, const float* in, float* dy) {
    Map d(dy, batch_, l.k);
    if (l.relu) d = (ConstMap(s.out.data(), batch_, l.k).array() > 0.0f).select(d, 0.0f);
    gemm(gemm_lib, true, false, l.k, l.in_size(), batch_, dy, l.k, in, l.in_size(), false,
         g(s.weight), l.in_size());
    Eigen::Map<Eigen::RowVectorXf>(g(s.bias), l.k) = d.colwise().sum();
  }
  void fc_backward_data(const Layer& l, const PerLayer& s, const float* dy, float* dx) {
    gemm(gemm_lib, false, false, batch_, l.in_size(), l.k, dy, l.k, p(s.weight),
         l.in_size(), s.add_to_input, dx, l.in_size());
  }

  void max_pool_backward(const Layer& l, const PerLayer& s, const float* dy, float* dx) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t n = 0; n < batch_; ++n)
      unpool_image(l, s.argmax.data() + n * l.out_size(), dy + n * l.out_size(), dx + n * l.in_size(), s.add_to_input);
  }

  void global_avg_pool_backward(const Layer& l, const PerLayer& s, const float* dy, float* dx) {
    const std::int64_t plane = l.h * l.w;
    const float inv = 1.0f / static_cast<float>(plane);
    for (std::int64_t q = 0; q < batch_ * l.c; ++q) {
      float* to = dx + q * plane;
      if (s.add_to_input) {
        for (std::int64_t e = 0; e < plane; ++e) to[e] += dy[q] * inv;
      } else {
        std::fill(to, to + plane, dy[q] * inv);
      }
    }
  }

  TrainMemory memory() const override {
    TrainMemory m;
    const auto bytes = [](const auto& vec) { return static_cast<std::int64_t>(vec.size() * sizeof(vec[0])); };
    count_params(m);
    for (const auto& s : layers) {
      m.activations += bytes(s.out) + bytes(s.argmax) + bytes(s.z);
      for (const auto* vec : {&s.mean, &s.inv_std, &s.scale, &s.shift, &s.running_mean, &s.running_var, &s.a, &s.b})
        m.activations += bytes(*vec);
    }
    m.activations += bytes(log_probs_);
    for (const auto& d : gbuf) m.workspace += bytes(d);
    for (const auto* vec : {&own_dz, &own_w_rot}) m.workspace += bytes(*vec);
    for (const auto& o : own)
      if (o != nullptr) m.workspace += o->weights->workspace_bytes();
    for (int t = 0; t < threads; ++t) {
      const auto u = static_cast<std::size_t>(t);
      m.workspace += bytes(col[u]) + bytes(dcol[u]) + bytes(zbuf[u]) + bytes(partial[u]) + bytes(dout[u]) + bytes(stats[u]);
    }
    return m;
  }

  std::span<const float> running_mean(std::size_t layer) const override { return layers.at(layer).running_mean; }
  std::span<const float> running_var(std::size_t layer) const override { return layers.at(layer).running_var; }
};

}  // namespace

std::unique_ptr<TrainStep> make_im2col_step(const Network& net, std::int64_t batch, Sgd sgd, Gemm gemm) {
  return std::make_unique<Im2colStep>(net, batch, sgd, false, gemm);
}

std::unique_ptr<TrainStep> make_own_train_step(const Network& net, std::int64_t batch, Sgd sgd) {
  return std::make_unique<Im2colStep>(net, batch, sgd, true, Gemm::eigen);
}

}  // namespace dlb::nn
