#include "reference/nn/train/train.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "kernels/common/error.h"

namespace dlb::ref {
namespace {

using nn::Layer;
using nn::LayerKind;

struct LayerParams {
  int weight = -1, bias = -1, gamma = -1, beta = -1;
};

std::vector<LayerParams> layer_params(const nn::Network& net, const std::vector<nn::TrainParam>& params) {
  std::vector<LayerParams> out(net.layers.size());
  for (std::size_t j = 0; j < params.size(); ++j) {
    auto& lp = out[params[j].layer];
    (params[j].bn ? (params[j].bias ? lp.beta : lp.gamma) : (params[j].bias ? lp.bias : lp.weight)) = static_cast<int>(j);
  }
  return out;
}

// The outputs j of a row whose input column j * stride + b - pad is inside [0, w).
std::pair<std::int64_t, std::int64_t> inside(const Layer& l, std::int64_t b) {
  std::int64_t first = 0;
  while (first < l.ow && first * l.stride + b - l.pad < 0) ++first;
  std::int64_t last = first;
  while (last < l.ow && last * l.stride + b - l.pad < l.w) ++last;
  return {first, last};
}

// Every tap of the convolution: for each weight (k, c, a, b) and output
// row oi whose input row is inside, f(the weight's index, the input row's
// offset shifted by b - pad, the output row's offset, and the outputs
// [first, last) of the row whose input column is inside).
template <class F>
void for_each_tap(const Layer& l, F&& f) {
  for (std::int64_t k = 0; k < l.k; ++k)
    for (std::int64_t c = 0; c < l.c; ++c)
      for (std::int64_t a = 0; a < l.window; ++a)
        for (std::int64_t b = 0; b < l.window; ++b) {
          const std::int64_t weight = ((k * l.c + c) * l.window + a) * l.window + b;
          const auto [first, last] = inside(l, b);
          for (std::int64_t oi = 0; oi < l.oh; ++oi) {
            const std::int64_t row = oi * l.stride + a - l.pad;
            if (row < 0 || row >= l.h) continue;
            f(weight, (c * l.h + row) * l.w + b - l.pad, (k * l.oh + oi) * l.ow, first, last);
          }
        }
}

// One image's convolution, y [k, oh, ow] += W * x, loop order chosen so the
// innermost loop runs along an output row (vectorizable in double).
void conv_image(const Layer& l, const double* w, const double* in, double* y) {
  for_each_tap(l, [&](std::int64_t weight, std::int64_t at_in, std::int64_t at_out, std::int64_t first, std::int64_t last) {
    const double wv = w[weight];
    const double* src = in + at_in;
    double* dst = y + at_out;
    for (std::int64_t oj = first; oj < last; ++oj) dst[oj] += wv * src[oj * l.stride];
  });
}

// Its adjoints: dx [c, h, w] += W^T dy, and gw [k, c, r, r] += dy x^T.
void conv_input_grad(const Layer& l, const double* w, const double* dy, double* dx) {
  for_each_tap(l, [&](std::int64_t weight, std::int64_t at_in, std::int64_t at_out, std::int64_t first, std::int64_t last) {
    const double wv = w[weight];
    double* dst = dx + at_in;
    const double* src = dy + at_out;
    for (std::int64_t oj = first; oj < last; ++oj) dst[oj * l.stride] += wv * src[oj];
  });
}

void conv_weight_grad(const Layer& l, const double* dy, const double* in, std::int64_t k, double* gw) {
  for (std::int64_t c = 0; c < l.c; ++c)
    for (std::int64_t a = 0; a < l.window; ++a)
      for (std::int64_t b = 0; b < l.window; ++b) {
        const auto [first, last] = inside(l, b);
        double sum = 0;
        for (std::int64_t oi = 0; oi < l.oh; ++oi) {
          const std::int64_t row = oi * l.stride + a - l.pad;
          if (row < 0 || row >= l.h) continue;
          const double* src = in + (c * l.h + row) * l.w + b - l.pad;
          const double* d = dy + (k * l.oh + oi) * l.ow;
#pragma omp simd reduction(+ : sum)
          for (std::int64_t oj = first; oj < last; ++oj) sum += d[oj] * src[oj * l.stride];
        }
        gw[((k * l.c + c) * l.window + a) * l.window + b] += sum;
      }
}

// The whole batch through the network: every layer's output (the last one
// before log-softmax is the logits), each max pool's routes, batch-norm's
// normalized outputs and statistics.
struct Pass {
  std::vector<std::vector<double>> out;            // per layer, [batch, out_size]
  std::vector<std::vector<std::int64_t>> route;    // max_pool: per output, the input index (in its image) of the maximum
  std::vector<std::vector<double>> xhat;           // batch-norm: (z - mean) inv_std, [batch, out_size]
  std::vector<std::vector<double>> mean, var, inv_std;  // batch-norm, per channel (var biased)
  std::vector<std::vector<double>> mean_scale, var_scale;  // batch-norm, with magnitudes: TrainGradients'
  std::vector<double> log_probs;                   // [batch, classes]
};

class Model {
 public:
  Model(const nn::Network& net, const Params& p, std::int64_t batch)
      : net_(net), p_(p), params_(nn::trainable_params(net)), lp_(layer_params(net, params_)), batch_(batch) {
    DLB_REQUIRE(p.size() == params_.size(), "reference training step: parameter count");
    for (std::size_t j = 0; j < p.size(); ++j)
      DLB_REQUIRE(static_cast<std::int64_t>(p[j].size()) == params_[j].size(),
                  "reference training step: size of " + params_[j].name);
    last_ = net.layers.back().kind == LayerKind::log_softmax ? net.layers.size() - 2 : net.layers.size() - 1;
  }
  std::size_t logits_layer() const { return last_; }
  std::int64_t classes() const { return net_.layers[last_].out_size(); }

  const double* param(int j) const { return j >= 0 ? p_[static_cast<std::size_t>(j)].data() : nullptr; }

  Pass forward(const double* x, bool magnitudes) const {
    Pass r;
    r.mean_scale.resize(last_ + 1);
    r.var_scale.resize(last_ + 1);
    const std::size_t n_layers = last_ + 1;
    r.out.resize(n_layers);
    r.route.resize(n_layers);
    r.xhat.resize(n_layers);
    r.mean.resize(n_layers);
    r.var.resize(n_layers);
    r.inv_std.resize(n_layers);
    for (std::size_t i = 0; i < n_layers; ++i) {
      const Layer& l = net_.layers[i];
      const std::int64_t in_size = l.in_size(), out_size = l.out_size();
      const double* in = l.input < 0 ? x : r.out[static_cast<std::size_t>(l.input)].data();
      auto& y = r.out[i];
      y.assign(static_cast<std::size_t>(batch_ * out_size), 0.0);
      Forward fwd{*this, r, magnitudes};
      nn::by_kind(fwd, l, FwdIo{i, in, in_size, out_size, y});
      if (l.relu)
        for (auto& v : y) v = std::max(v, 0.0);
    }
    const std::int64_t classes = this->classes();
    const auto& logits = r.out[last_];
    for (std::int64_t n = 0; n < batch_; ++n) {
      const double* row = logits.data() + n * classes;
      const double m = *std::max_element(row, row + classes);
      double sum = 0;
      for (std::int64_t j = 0; j < classes; ++j) sum += std::exp(row[j] - m);
      for (std::int64_t j = 0; j < classes; ++j) r.log_probs.push_back(row[j] - m - std::log(sum));
    }
    return r;
  }

  // The forward direction, one function per layer kind for nn::by_kind
  // (the walk's one switch over LayerKind): layer i's output y from its
  // input, kept in the pass with what backward reads (pool routes,
  // batch-norm's statistics).
  struct FwdIo {
    std::size_t i;
    const double* in;
    std::int64_t in_size, out_size;
    std::vector<double>& y;
  };
  struct Forward {
    const Model& m;
    Pass& r;
    bool magnitudes;

    void conv(const Layer& l, const FwdIo& io) const {
      const std::int64_t batch = m.batch_;
      const double* w = m.param(m.lp_[io.i].weight);
      const double* b = m.param(m.lp_[io.i].bias);
#pragma omp parallel for schedule(dynamic)
      for (std::int64_t n = 0; n < batch; ++n) {
        double* yn = io.y.data() + n * io.out_size;
        if (b != nullptr)
          for (std::int64_t k = 0; k < l.k; ++k) std::fill(yn + k * l.oh * l.ow, yn + (k + 1) * l.oh * l.ow, b[k]);
        conv_image(l, w, io.in + n * io.in_size, yn);
      }
      if (m.lp_[io.i].gamma >= 0 && magnitudes) m.stat_scales(l, io.i, io.in, r);
      if (m.lp_[io.i].gamma >= 0) m.batch_norm(l, io.i, r);
      if (l.residual >= 0) {
        const auto& res = r.out[static_cast<std::size_t>(l.residual)];
        for (std::size_t q = 0; q < io.y.size(); ++q) io.y[q] += res[q];
      }
    }
    void fc(const Layer& l, const FwdIo& io) const {
      const double* w = m.param(m.lp_[io.i].weight);
      const double* b = m.param(m.lp_[io.i].bias);
      for (std::int64_t n = 0; n < m.batch_; ++n)
        for (std::int64_t k = 0; k < l.k; ++k) {
          double sum = b[k];
          for (std::int64_t j = 0; j < io.in_size; ++j) sum += w[k * io.in_size + j] * io.in[n * io.in_size + j];
          io.y[static_cast<std::size_t>(n * l.k + k)] = sum;
        }
    }
    void max_pool(const Layer& l, const FwdIo& io) const {
      auto& route = r.route[io.i];
      route.resize(io.y.size());
      for (std::int64_t n = 0; n < m.batch_; ++n)
        for (std::int64_t c = 0; c < l.c; ++c)
          for (std::int64_t oi = 0; oi < l.oh; ++oi)
            for (std::int64_t oj = 0; oj < l.ow; ++oj) {
              double best = -std::numeric_limits<double>::infinity();
              std::int64_t at = -1;
              for (std::int64_t a = 0; a < l.window; ++a)
                for (std::int64_t bb = 0; bb < l.window; ++bb) {
                  const std::int64_t idx = (c * l.h + oi * l.stride + a) * l.w + oj * l.stride + bb;
                  // the first maximum, as PyTorch
                  if (io.in[n * io.in_size + idx] > best) best = io.in[n * io.in_size + idx], at = idx;
                }
              const auto o = static_cast<std::size_t>(n * io.out_size + (c * l.oh + oi) * l.ow + oj);
              io.y[o] = best;
              route[o] = at;
            }
    }
    void global_avg_pool(const Layer& l, const FwdIo& io) const {
      for (std::int64_t n = 0; n < m.batch_; ++n)
        for (std::int64_t c = 0; c < l.c; ++c) {
          double sum = 0;
          for (std::int64_t q = 0; q < l.h * l.w; ++q) sum += io.in[n * io.in_size + c * l.h * l.w + q];
          io.y[static_cast<std::size_t>(n * io.out_size + c)] = sum / static_cast<double>(l.h * l.w);
        }
    }
    // The loss's own log-softmax follows the walk (forward()'s end).
    void log_softmax(const Layer&, const FwdIo&) const {}
  };

  // The backward direction, one function per layer kind for nn::by_kind:
  // from dy (of layer i's output, its ReLU already applied and its residual
  // branch already given its share), the weight gradients (bwd_w: into gw
  // and gb) and the input gradient (bwd_d: into dx, where the layer's
  // input is another layer's output).
  struct BwdIo {
    std::size_t i;
    const double* in;
    std::int64_t in_size, out_size;
    std::vector<double>& dy;
    std::vector<double>& dx;
    bool need_dx;
    double* gw;
    double* gb;
    const std::vector<double>& w_used;
  };
  struct Backward {
    const Model& m;
    const Pass& pass;
    bool magnitudes;
    Params& grads;

    double mag(double v) const { return magnitudes ? std::abs(v) : v; }

    void conv(const Layer& l, const BwdIo& io) const {
      const std::int64_t batch = m.batch_, plane = l.oh * l.ow;
      if (m.lp_[io.i].gamma >= 0) m.batch_norm_backward(l, io.i, pass, magnitudes, io.dy, grads);
      // bwd_w
      if (io.gb != nullptr)
        for (std::int64_t n = 0; n < batch; ++n)
          for (std::int64_t k = 0; k < l.k; ++k)
            for (std::int64_t q = 0; q < plane; ++q) io.gb[k] += io.dy[static_cast<std::size_t>((n * l.k + k) * plane + q)];
      std::vector<double> in_used(io.in, io.in + batch * io.in_size);
      for (auto& v : in_used) v = mag(v);
#pragma omp parallel for schedule(dynamic)
      for (std::int64_t k = 0; k < l.k; ++k)
        for (std::int64_t n = 0; n < batch; ++n)
          conv_weight_grad(l, io.dy.data() + n * io.out_size, in_used.data() + n * io.in_size, k, io.gw);
      // bwd_d
      if (io.need_dx) {
#pragma omp parallel for schedule(dynamic)
        for (std::int64_t n = 0; n < batch; ++n)
          conv_input_grad(l, io.w_used.data(), io.dy.data() + n * io.out_size, io.dx.data() + n * io.in_size);
      }
    }
    void fc(const Layer& l, const BwdIo& io) const {
      // bwd_w and bwd_d in one sweep over dy
      for (std::int64_t n = 0; n < m.batch_; ++n)
        for (std::int64_t k = 0; k < l.k; ++k) {
          const double dv = io.dy[static_cast<std::size_t>(n * l.k + k)];
          if (dv == 0) continue;
          io.gb[k] += dv;
          for (std::int64_t j = 0; j < io.in_size; ++j) {
            io.gw[k * io.in_size + j] += dv * mag(io.in[n * io.in_size + j]);
            if (io.need_dx)
              io.dx[static_cast<std::size_t>(n * io.in_size + j)] += dv * io.w_used[static_cast<std::size_t>(k * io.in_size + j)];
          }
        }
    }
    void max_pool(const Layer&, const BwdIo& io) const {
      for (std::int64_t n = 0; n < m.batch_; ++n)
        for (std::int64_t o = 0; o < io.out_size; ++o) {
          const auto q = static_cast<std::size_t>(n * io.out_size + o);
          io.dx[static_cast<std::size_t>(n * io.in_size + pass.route[io.i][q])] += io.dy[q];
        }
    }
    void global_avg_pool(const Layer& l, const BwdIo& io) const {
      for (std::int64_t n = 0; n < m.batch_; ++n)
        for (std::int64_t c = 0; c < l.c; ++c)
          for (std::int64_t q = 0; q < l.h * l.w; ++q)
            io.dx[static_cast<std::size_t>(n * io.in_size + c * l.h * l.w + q)] =
                io.dy[static_cast<std::size_t>(n * io.out_size + c)] / static_cast<double>(l.h * l.w);
    }
    // The loss's gradient enters at the logits (backward()'s dtop).
    void log_softmax(const Layer&, const BwdIo&) const {}
  };

  // The scales of batch-norm's statistics' rounding errors (TrainGradients),
  // from r.out[i], the conv's output before batch-norm.
  void stat_scales(const Layer& l, std::size_t i, const double* in, Pass& r) const {
    const std::int64_t plane = l.oh * l.ow, out_size = l.out_size();
    std::vector<double> mz(static_cast<std::size_t>(batch_ * out_size), 0.0), w_abs(p_[static_cast<std::size_t>(lp_[i].weight)]);
    for (auto& v : w_abs) v = std::abs(v);
#pragma omp parallel for schedule(dynamic)
    for (std::int64_t n = 0; n < batch_; ++n) {
      std::vector<double> in_abs(in + n * l.in_size(), in + (n + 1) * l.in_size());
      for (auto& v : in_abs) v = std::abs(v);
      conv_image(l, w_abs.data(), in_abs.data(), mz.data() + n * out_size);
    }
    const auto& z = r.out[i];
    const double m = static_cast<double>(batch_ * plane);
    for (std::int64_t k = 0; k < l.k; ++k) {
      double sum = 0, sum_m = 0;
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) {
          sum += z[static_cast<std::size_t>((n * l.k + k) * plane + q)];
          sum_m += mz[static_cast<std::size_t>((n * l.k + k) * plane + q)];
        }
      const double mean = sum / m, mean_m = sum_m / m;
      double var_scale = 0;
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) {
          const auto at = static_cast<std::size_t>((n * l.k + k) * plane + q);
          var_scale += std::abs(z[at] - mean) * (mz[at] + mean_m);
        }
      r.mean_scale[i].push_back(mean_m);
      r.var_scale[i].push_back(2 * var_scale / m);
    }
  }

  // Layer i's conv output in r.out[i] through batch-norm with the batch's
  // statistics (two passes: the mean, then the mean square deviation).
  void batch_norm(const Layer& l, std::size_t i, Pass& r) const {
    const std::int64_t plane = l.oh * l.ow, m = batch_ * plane;
    auto& y = r.out[i];
    auto& xhat = r.xhat[i];
    xhat.resize(y.size());
    r.mean[i].assign(static_cast<std::size_t>(l.k), 0.0);
    r.var[i].assign(static_cast<std::size_t>(l.k), 0.0);
    r.inv_std[i].assign(static_cast<std::size_t>(l.k), 0.0);
    const double* gamma = param(lp_[i].gamma);
    const double* beta = param(lp_[i].beta);
    for (std::int64_t k = 0; k < l.k; ++k) {
      const auto at = [&](std::int64_t n, std::int64_t q) { return static_cast<std::size_t>((n * l.k + k) * plane + q); };
      double sum = 0;
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) sum += y[at(n, q)];
      const double mean = sum / static_cast<double>(m);
      double sq = 0;
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) sq += (y[at(n, q)] - mean) * (y[at(n, q)] - mean);
      const double var = sq / static_cast<double>(m);
      const double inv_std = 1.0 / std::sqrt(var + l.raw.bn_eps);
      const auto u = static_cast<std::size_t>(k);
      r.mean[i][u] = mean, r.var[i][u] = var, r.inv_std[i][u] = inv_std;
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) {
          xhat[at(n, q)] = (y[at(n, q)] - mean) * inv_std;
          y[at(n, q)] = gamma[k] * xhat[at(n, q)] + beta[k];
        }
    }
  }

  // The gradients (magnitudes: on absolute values) from dy = d loss / d
  // logits, [batch, classes].
  void backward(const double* x, const Pass& pass, std::vector<double> dtop, bool magnitudes, Params& grads) const {
    const auto mag = [magnitudes](double v) { return magnitudes ? std::abs(v) : v; };
    std::vector<std::vector<double>> d(last_ + 1);  // gradients of the layers' outputs, [batch, out_size]
    d[last_] = std::move(dtop);
    for (std::size_t i = last_ + 1; i-- > 0;) {
      const Layer& l = net_.layers[i];
      std::vector<double> dy = std::move(d[i]);
      d[i].clear();
      if (dy.empty()) continue;  // nothing reads this layer's output
      const std::int64_t in_size = l.in_size(), out_size = l.out_size();
      const double* in = l.input < 0 ? x : pass.out[static_cast<std::size_t>(l.input)].data();
      const auto& y = pass.out[i];
      if (l.relu)
        for (std::size_t q = 0; q < dy.size(); ++q)
          if (!(y[q] > 0)) dy[q] = 0;
      if (l.residual >= 0) add_to(d[static_cast<std::size_t>(l.residual)], dy);
      std::vector<double> dx;
      const bool need_dx = l.input >= 0;
      if (need_dx) dx.assign(static_cast<std::size_t>(batch_ * in_size), 0.0);
      double* gw = lp_[i].weight >= 0 ? grads[static_cast<std::size_t>(lp_[i].weight)].data() : nullptr;
      double* gb = lp_[i].bias >= 0 ? grads[static_cast<std::size_t>(lp_[i].bias)].data() : nullptr;
      std::vector<double> w_used;
      if (lp_[i].weight >= 0) {
        const auto& w = p_[static_cast<std::size_t>(lp_[i].weight)];
        w_used.resize(w.size());
        for (std::size_t q = 0; q < w.size(); ++q) w_used[q] = mag(w[q]);
      }
      Backward bwd{*this, pass, magnitudes, grads};
      nn::by_kind(bwd, l, BwdIo{i, in, in_size, out_size, dy, dx, need_dx, gw, gb, w_used});
      if (need_dx) add_to(d[static_cast<std::size_t>(l.input)], dx);
    }
  }

  // dy (of batch-norm's output) -> dz (of its input, the conv's output) in
  // place; dgamma = sum dy xhat, dbeta = sum dy. Magnitudes: |gamma| inv_std
  // (|dy| + mean |dy| + |xhat| mean |dy xhat|), dy already |dy|.
  void batch_norm_backward(const Layer& l, std::size_t i, const Pass& pass, bool magnitudes, std::vector<double>& dy,
                           Params& grads) const {
    const std::int64_t plane = l.oh * l.ow;
    const double m = static_cast<double>(batch_ * plane);
    const double* gamma = param(lp_[i].gamma);
    double* ggamma = grads[static_cast<std::size_t>(lp_[i].gamma)].data();
    double* gbeta = grads[static_cast<std::size_t>(lp_[i].beta)].data();
    const auto& xhat = pass.xhat[i];
    for (std::int64_t k = 0; k < l.k; ++k) {
      const auto at = [&](std::int64_t n, std::int64_t q) { return static_cast<std::size_t>((n * l.k + k) * plane + q); };
      double sum = 0, sum_x = 0;
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) {
          const double xh = magnitudes ? std::abs(xhat[at(n, q)]) : xhat[at(n, q)];
          sum += dy[at(n, q)];
          sum_x += dy[at(n, q)] * xh;
        }
      ggamma[k] += sum_x;
      gbeta[k] += sum;
      const double scale = (magnitudes ? std::abs(gamma[k]) : gamma[k]) * pass.inv_std[i][static_cast<std::size_t>(k)];
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) {
          const double xh = xhat[at(n, q)];
          double& v = dy[at(n, q)];
          v = magnitudes ? scale * (v + sum / m + std::abs(xh) * sum_x / m) : scale * (v - sum / m - xh * sum_x / m);
        }
    }
  }

  static void add_to(std::vector<double>& to, const std::vector<double>& from) {
    if (to.empty()) {
      to = from;
      return;
    }
    for (std::size_t q = 0; q < to.size(); ++q) to[q] += from[q];
  }

 private:
  const nn::Network& net_;
  const Params& p_;
  std::vector<nn::TrainParam> params_;
  std::vector<LayerParams> lp_;
  std::int64_t batch_;
  std::size_t last_ = 0;
};

void check_batch(const nn::Network& net, std::span<const float> x, std::span<const std::uint8_t> labels,
                 std::int64_t batch, std::int64_t classes) {
  DLB_REQUIRE(batch >= 1, "reference training step: batch must be positive");
  DLB_REQUIRE(static_cast<std::int64_t>(x.size()) == batch * net.in_size(), "reference training step: input size");
  DLB_REQUIRE(static_cast<std::int64_t>(labels.size()) == batch, "reference training step: label count");
  for (const auto label : labels) DLB_REQUIRE(label < classes, "reference training step: label out of range");
}

Params zeros_like(const Params& p) {
  Params z;
  for (const auto& t : p) z.emplace_back(t.size(), 0.0);
  return z;
}

}  // namespace

Params train_params(const nn::Network& net) {
  Params p;
  for (const auto& t : nn::trainable_params(net)) {
    const auto v = nn::param_values(net, t);
    p.emplace_back(v.begin(), v.end());
  }
  return p;
}

namespace {

TrainGradients run(const nn::Network& net, const Params& p, std::span<const float> x,
                   std::span<const std::uint8_t> labels, std::int64_t batch, bool with_gradients) {
  const Model model(net, p, std::max<std::int64_t>(batch, 1));
  const std::int64_t classes = model.classes();
  check_batch(net, x, labels, batch, classes);
  const std::vector<double> input(x.begin(), x.end());
  Pass pass = model.forward(input.data(), with_gradients);
  TrainGradients r;
  r.log_probs = pass.log_probs;
  double loss = 0;
  std::vector<double> dy(static_cast<std::size_t>(batch * classes)), dy_abs(dy.size());
  for (std::int64_t n = 0; n < batch; ++n) {
    const auto label = labels[static_cast<std::size_t>(n)];
    loss -= pass.log_probs[static_cast<std::size_t>(n * classes + label)];
    for (std::int64_t j = 0; j < classes; ++j) {
      const auto u = static_cast<std::size_t>(n * classes + j);
      dy[u] = (std::exp(pass.log_probs[u]) - (j == label ? 1.0 : 0.0)) / static_cast<double>(batch);
      dy_abs[u] = std::abs(dy[u]);
    }
  }
  r.loss = loss / static_cast<double>(batch);
  r.batch_mean = pass.mean;
  r.batch_var = pass.var;
  r.batch_mean.resize(net.layers.size());
  r.batch_var.resize(net.layers.size());
  r.batch_mean_scale = pass.mean_scale;
  r.batch_var_scale = pass.var_scale;
  r.batch_mean_scale.resize(net.layers.size());
  r.batch_var_scale.resize(net.layers.size());
  if (with_gradients) {
    r.grads = zeros_like(p);
    r.magnitudes = zeros_like(p);
    model.backward(input.data(), pass, dy, false, r.grads);
    model.backward(input.data(), pass, dy_abs, true, r.magnitudes);
  }
  return r;
}

}  // namespace

TrainGradients gradients(const nn::Network& net, const Params& p, std::span<const float> x,
                         std::span<const std::uint8_t> labels, std::int64_t batch) {
  return run(net, p, x, labels, batch, true);
}

TrainGradients forward(const nn::Network& net, const Params& p, std::span<const float> x,
                       std::span<const std::uint8_t> labels, std::int64_t batch) {
  return run(net, p, x, labels, batch, false);
}

double loss(const nn::Network& net, const Params& p, std::span<const float> x, std::span<const std::uint8_t> labels,
            std::int64_t batch) {
  return run(net, p, x, labels, batch, false).loss;
}

RunningStats running_stats(const nn::Network& net) {
  RunningStats s;
  for (const auto& l : net.layers) {
    const bool bn = l.kind == LayerKind::conv && !l.raw.bn_gamma.empty();
    s.mean.emplace_back(bn ? std::vector<double>(l.raw.bn_mean.begin(), l.raw.bn_mean.end()) : std::vector<double>{});
    s.var.emplace_back(bn ? std::vector<double>(l.raw.bn_var.begin(), l.raw.bn_var.end()) : std::vector<double>{});
  }
  return s;
}

void update_running_stats(const nn::Network& net, RunningStats& s, const TrainGradients& g, std::int64_t batch) {
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    if (s.mean[i].empty()) continue;
    DLB_REQUIRE(g.batch_mean[i].size() == s.mean[i].size(), "update_running_stats: no batch statistics for " + l.name);
    const double m = static_cast<double>(batch * l.oh * l.ow), mo = l.raw.bn_momentum;
    for (std::size_t k = 0; k < s.mean[i].size(); ++k) {
      s.mean[i][k] = (1 - mo) * s.mean[i][k] + mo * g.batch_mean[i][k];
      s.var[i][k] = (1 - mo) * s.var[i][k] + mo * g.batch_var[i][k] * m / (m - 1);
    }
  }
}

Comparison compare_gradients(const std::vector<nn::TrainParam>& params, const std::vector<std::span<const float>>& got,
                             const TrainGradients& ref, double tolerance) {
  const std::vector<double> each(params.size(), tolerance);
  return compare_gradients(params, got, ref, each);
}

Comparison compare_gradients(const std::vector<nn::TrainParam>& params, const std::vector<std::span<const float>>& got,
                             const TrainGradients& ref, std::span<const double> tolerances) {
  DLB_REQUIRE(got.size() == params.size() && ref.grads.size() == params.size() && ref.magnitudes.size() == params.size() &&
                  tolerances.size() == params.size(),
              "compare_gradients: tensor count");
  std::vector<ScaledTensor> tensors;
  for (std::size_t j = 0; j < params.size(); ++j) {
    DLB_REQUIRE(got[j].size() == ref.grads[j].size(), "compare_gradients: size of " + params[j].name);
    tensors.push_back({params[j].name, got[j], ref.grads[j], ref.magnitudes[j], tolerances[j]});
  }
  Comparison c = compare_scaled(tensors, 0.0);
  c.first = "gradients relative to their magnitudes: " + c.first;
  return c;
}

std::vector<double> augmented_batch(const nn::Dataset& data, std::span<const std::int64_t> indices,
                                    const nn::BatchFormat& f, const nn::Augment& augment, std::uint64_t seed) {
  DLB_REQUIRE(f.h >= data.h && f.w >= data.w, "reference batch: the network input is smaller than the images");
  DLB_REQUIRE(data.c == 1 || data.c == f.c, "reference batch: channel counts that cannot be matched");
  const std::int64_t plane = f.h * f.w, image = f.c * plane, pad = augment.pad;
  const std::int64_t top = (f.h - data.h) / 2, left = (f.w - data.w) / 2;
  std::vector<double> out;
  std::vector<float> centred(static_cast<std::size_t>(image));
  for (const std::int64_t index : indices) {
    DLB_REQUIRE(index >= 0 && index < data.n, "reference batch: index " + std::to_string(index) + " outside the data set");
    for (std::int64_t ch = 0; ch < f.c; ++ch)
      for (std::int64_t y = 0; y < f.h; ++y)
        for (std::int64_t x = 0; x < f.w; ++x) {
          const std::int64_t sy = y - top, sx = x - left;  // in the data set's image
          const bool inside = sy >= 0 && sy < data.h && sx >= 0 && sx < data.w;
          const auto at = static_cast<std::size_t>(((index * data.c + (data.c == 1 ? 0 : ch)) * data.h + sy) * data.w + sx);
          centred[static_cast<std::size_t>(ch * plane + y * f.w + x)] =
              inside ? (static_cast<float>(data.pixels[at]) / 255.0f - f.mean) / f.std_dev : 0.0f;
        }
    const nn::ImageAugment a = nn::augment_of(seed, index, augment);
    for (std::int64_t ch = 0; ch < f.c; ++ch)
      for (std::int64_t y = 0; y < f.h; ++y)
        for (std::int64_t x = 0; x < f.w; ++x) {
          const std::int64_t cx = a.flip ? f.w - 1 - x : x;      // column of the crop before the flip
          const std::int64_t py = y + a.dy, px = cx + a.dx;       // in the padded image
          const bool inside = py >= pad && py < pad + f.h && px >= pad && px < pad + f.w;
          out.push_back(inside ? centred[static_cast<std::size_t>(ch * plane + (py - pad) * f.w + (px - pad))] : 0.0);
        }
  }
  return out;
}

void sgd_update(Params& p, Params& velocity, const Params& grads, const nn::Sgd& sgd) {
  DLB_REQUIRE(p.size() == velocity.size() && p.size() == grads.size(), "reference SGD: parameter count");
  for (std::size_t j = 0; j < p.size(); ++j)
    for (std::size_t i = 0; i < p[j].size(); ++i) {
      velocity[j][i] = sgd.momentum * velocity[j][i] + grads[j][i] + sgd.weight_decay * p[j][i];
      p[j][i] -= sgd.lr * velocity[j][i];
    }
}

}  // namespace dlb::ref
