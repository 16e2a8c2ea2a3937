#include "reference/train.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "kernels/common/error.h"

namespace dlb::ref {
namespace {

using nn::Layer;
using nn::LayerKind;

struct LayerParams {
  int weight = -1, bias = -1;
};

std::vector<LayerParams> layer_params(const nn::Network& net, const std::vector<nn::TrainParam>& params) {
  std::vector<LayerParams> out(net.layers.size());
  for (std::size_t j = 0; j < params.size(); ++j)
    (params[j].bias ? out[params[j].layer].bias : out[params[j].layer].weight) = static_cast<int>(j);
  return out;
}

// One image through the network: every layer's output (the last one before
// log-softmax is the logits), and each max pool's routes.
struct ImagePass {
  std::vector<std::vector<double>> out;
  std::vector<std::vector<std::int64_t>> route;  // max_pool: input index of each output's maximum
  std::vector<double> log_probs;
};

class Model {
 public:
  Model(const nn::Network& net, const Params& p)
      : net_(net), p_(p), params_(nn::trainable_params(net)), lp_(layer_params(net, params_)) {
    DLB_REQUIRE(p.size() == params_.size(), "reference training step: parameter count");
    for (std::size_t j = 0; j < p.size(); ++j)
      DLB_REQUIRE(static_cast<std::int64_t>(p[j].size()) == params_[j].size(),
                  "reference training step: size of " + params_[j].name);
    last_ = net.layers.back().kind == LayerKind::log_softmax ? net.layers.size() - 2 : net.layers.size() - 1;
  }
  std::size_t logits_layer() const { return last_; }
  std::int64_t classes() const { return net_.layers[last_].out_size(); }
  const std::vector<nn::TrainParam>& params() const { return params_; }

  ImagePass forward(const double* x) const {
    ImagePass r;
    r.out.resize(last_ + 1);
    r.route.resize(last_ + 1);
    for (std::size_t i = 0; i <= last_; ++i) {
      const Layer& l = net_.layers[i];
      const double* in = i == 0 ? x : r.out[i - 1].data();
      auto& y = r.out[i];
      y.assign(static_cast<std::size_t>(l.out_size()), 0.0);
      const double* w = lp_[i].weight >= 0 ? p_[static_cast<std::size_t>(lp_[i].weight)].data() : nullptr;
      const double* b = lp_[i].bias >= 0 ? p_[static_cast<std::size_t>(lp_[i].bias)].data() : nullptr;
      switch (l.kind) {
        case LayerKind::conv:
          for (std::int64_t k = 0; k < l.k; ++k)
            for (std::int64_t oi = 0; oi < l.oh; ++oi)
              for (std::int64_t oj = 0; oj < l.ow; ++oj) {
                double sum = b != nullptr ? b[k] : 0.0;
                for (std::int64_t c = 0; c < l.c; ++c)
                  for (std::int64_t a = 0; a < l.window; ++a) {
                    const std::int64_t row = oi * l.stride + a - l.pad;
                    if (row < 0 || row >= l.h) continue;
                    for (std::int64_t bb = 0; bb < l.window; ++bb) {
                      const std::int64_t col = oj * l.stride + bb - l.pad;
                      if (col < 0 || col >= l.w) continue;
                      sum += w[((k * l.c + c) * l.window + a) * l.window + bb] * in[(c * l.h + row) * l.w + col];
                    }
                  }
                y[static_cast<std::size_t>((k * l.oh + oi) * l.ow + oj)] = sum;
              }
          break;
        case LayerKind::fc:
          for (std::int64_t k = 0; k < l.k; ++k) {
            double sum = b[k];
            for (std::int64_t j = 0; j < l.in_size(); ++j) sum += w[k * l.in_size() + j] * in[j];
            y[static_cast<std::size_t>(k)] = sum;
          }
          break;
        case LayerKind::max_pool:
          r.route[i].resize(y.size());
          for (std::int64_t c = 0; c < l.c; ++c)
            for (std::int64_t oi = 0; oi < l.oh; ++oi)
              for (std::int64_t oj = 0; oj < l.ow; ++oj) {
                double m = -std::numeric_limits<double>::infinity();
                std::int64_t at = -1;
                for (std::int64_t a = 0; a < l.window; ++a)
                  for (std::int64_t bb = 0; bb < l.window; ++bb) {
                    const std::int64_t idx = (c * l.h + oi * l.stride + a) * l.w + oj * l.stride + bb;
                    if (in[idx] > m) m = in[idx], at = idx;  // the first maximum, as PyTorch
                  }
                const auto o = static_cast<std::size_t>((c * l.oh + oi) * l.ow + oj);
                y[o] = m;
                r.route[i][o] = at;
              }
          break;
        case LayerKind::global_avg_pool:
          for (std::int64_t c = 0; c < l.c; ++c) {
            double sum = 0;
            for (std::int64_t q = 0; q < l.h * l.w; ++q) sum += in[c * l.h * l.w + q];
            y[static_cast<std::size_t>(c)] = sum / static_cast<double>(l.h * l.w);
          }
          break;
        case LayerKind::log_softmax: break;
      }
      if (l.relu)
        for (auto& v : y) v = std::max(v, 0.0);
    }
    const auto& logits = r.out[last_];
    const double m = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (const double v : logits) sum += std::exp(v - m);
    for (const double v : logits) r.log_probs.push_back(v - m - std::log(sum));
    return r;
  }

  // Adds this image's gradients to `grads` (magnitudes: on absolute values).
  // dy: d loss / d logits of the image.
  void backward(const double* x, const ImagePass& pass, std::vector<double> dy, bool magnitudes, Params& grads) const {
    const auto mag = [magnitudes](double v) { return magnitudes ? std::abs(v) : v; };
    for (std::size_t i = last_ + 1; i-- > 0;) {
      const Layer& l = net_.layers[i];
      const double* in = i == 0 ? x : pass.out[i - 1].data();
      const auto& y = pass.out[i];
      if (l.relu)
        for (std::size_t q = 0; q < dy.size(); ++q)
          if (!(y[q] > 0)) dy[q] = 0;
      std::vector<double> dx(static_cast<std::size_t>(l.in_size()), 0.0);
      const bool need_dx = i > 0;
      double* gw = lp_[i].weight >= 0 ? grads[static_cast<std::size_t>(lp_[i].weight)].data() : nullptr;
      double* gb = lp_[i].bias >= 0 ? grads[static_cast<std::size_t>(lp_[i].bias)].data() : nullptr;
      const double* w = lp_[i].weight >= 0 ? p_[static_cast<std::size_t>(lp_[i].weight)].data() : nullptr;
      switch (l.kind) {
        case LayerKind::conv:
          for (std::int64_t k = 0; k < l.k; ++k)
            for (std::int64_t oi = 0; oi < l.oh; ++oi)
              for (std::int64_t oj = 0; oj < l.ow; ++oj) {
                const double d = dy[static_cast<std::size_t>((k * l.oh + oi) * l.ow + oj)];
                if (d == 0) continue;
                if (gb != nullptr) gb[k] += d;
                for (std::int64_t c = 0; c < l.c; ++c)
                  for (std::int64_t a = 0; a < l.window; ++a) {
                    const std::int64_t row = oi * l.stride + a - l.pad;
                    if (row < 0 || row >= l.h) continue;
                    for (std::int64_t bb = 0; bb < l.window; ++bb) {
                      const std::int64_t col = oj * l.stride + bb - l.pad;
                      if (col < 0 || col >= l.w) continue;
                      const std::int64_t wi = ((k * l.c + c) * l.window + a) * l.window + bb;
                      const std::int64_t xi = (c * l.h + row) * l.w + col;
                      gw[wi] += d * mag(in[xi]);
                      if (need_dx) dx[static_cast<std::size_t>(xi)] += d * mag(w[wi]);
                    }
                  }
              }
          break;
        case LayerKind::fc:
          for (std::int64_t k = 0; k < l.k; ++k) {
            const double d = dy[static_cast<std::size_t>(k)];
            if (d == 0) continue;
            gb[k] += d;
            for (std::int64_t j = 0; j < l.in_size(); ++j) {
              gw[k * l.in_size() + j] += d * mag(in[j]);
              if (need_dx) dx[static_cast<std::size_t>(j)] += d * mag(w[k * l.in_size() + j]);
            }
          }
          break;
        case LayerKind::max_pool:
          for (std::size_t o = 0; o < dy.size(); ++o) dx[static_cast<std::size_t>(pass.route[i][o])] += dy[o];
          break;
        case LayerKind::global_avg_pool:
          for (std::int64_t c = 0; c < l.c; ++c)
            for (std::int64_t q = 0; q < l.h * l.w; ++q)
              dx[static_cast<std::size_t>(c * l.h * l.w + q)] = dy[static_cast<std::size_t>(c)] / static_cast<double>(l.h * l.w);
          break;
        case LayerKind::log_softmax: break;
      }
      dy = std::move(dx);
    }
  }

 private:
  const nn::Network& net_;
  const Params& p_;
  std::vector<nn::TrainParam> params_;
  std::vector<LayerParams> lp_;
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

void add_into(Params& to, const Params& from) {
  for (std::size_t j = 0; j < to.size(); ++j)
    for (std::size_t i = 0; i < to[j].size(); ++i) to[j][i] += from[j][i];
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

TrainGradients gradients(const nn::Network& net, const Params& p, std::span<const float> x,
                         std::span<const std::uint8_t> labels, std::int64_t batch) {
  const Model model(net, p);
  const std::int64_t classes = model.classes();
  check_batch(net, x, labels, batch, classes);
  TrainGradients r;
  r.grads = zeros_like(p);
  r.magnitudes = zeros_like(p);
  r.log_probs.resize(static_cast<std::size_t>(batch * classes));
  double loss = 0;
#pragma omp parallel
  {
    Params grads = zeros_like(p), magnitudes = zeros_like(p);
    double partial_loss = 0;
#pragma omp for schedule(dynamic)
    for (std::int64_t n = 0; n < batch; ++n) {
      const std::vector<double> input(x.begin() + n * net.in_size(), x.begin() + (n + 1) * net.in_size());
      const ImagePass pass = model.forward(input.data());
      const auto label = labels[static_cast<std::size_t>(n)];
      partial_loss -= pass.log_probs[label];
      std::vector<double> dy(static_cast<std::size_t>(classes)), dy_abs(dy.size());
      for (std::int64_t j = 0; j < classes; ++j) {
        const auto u = static_cast<std::size_t>(j);
        dy[u] = (std::exp(pass.log_probs[u]) - (j == label ? 1.0 : 0.0)) / static_cast<double>(batch);
        dy_abs[u] = std::abs(dy[u]);
        r.log_probs[static_cast<std::size_t>(n * classes + j)] = pass.log_probs[u];
      }
      model.backward(input.data(), pass, dy, false, grads);
      model.backward(input.data(), pass, dy_abs, true, magnitudes);
    }
#pragma omp critical
    {
      add_into(r.grads, grads);
      add_into(r.magnitudes, magnitudes);
      loss += partial_loss;
    }
  }
  r.loss = loss / static_cast<double>(batch);
  return r;
}

double loss(const nn::Network& net, const Params& p, std::span<const float> x, std::span<const std::uint8_t> labels,
            std::int64_t batch) {
  const Model model(net, p);
  check_batch(net, x, labels, batch, model.classes());
  double total = 0;
#pragma omp parallel for schedule(dynamic) reduction(+ : total)
  for (std::int64_t n = 0; n < batch; ++n) {
    const std::vector<double> input(x.begin() + n * net.in_size(), x.begin() + (n + 1) * net.in_size());
    total -= model.forward(input.data()).log_probs[labels[static_cast<std::size_t>(n)]];
  }
  return total / static_cast<double>(batch);
}

GradientCheck compare_gradients(const std::vector<nn::TrainParam>& params, const std::vector<std::span<const float>>& got,
                                const TrainGradients& ref, double tolerance) {
  DLB_REQUIRE(got.size() == params.size() && ref.grads.size() == params.size() && ref.magnitudes.size() == params.size(),
              "compare_gradients: tensor count");
  GradientCheck c;
  c.ok = true;
  std::string worst_line;
  for (std::size_t j = 0; j < params.size(); ++j) {
    DLB_REQUIRE(got[j].size() == ref.grads[j].size(), "compare_gradients: size of " + params[j].name);
    double scale = 0, err = 0;
    bool finite = true;
    for (std::size_t i = 0; i < got[j].size(); ++i) {
      scale = std::max(scale, ref.magnitudes[j][i]);
      if (!std::isfinite(got[j][i])) finite = false;
      err = std::max(err, std::abs(static_cast<double>(got[j][i]) - ref.grads[j][i]));
    }
    const double rel = !finite ? std::numeric_limits<double>::infinity() : scale > 0 ? err / scale : err;
    char line[256];
    std::snprintf(line, sizeof line, "%s: error %.3g of the largest magnitude %.3g (bound %.3g)",
                  params[j].name.c_str(), rel, scale, tolerance);
    if (!(rel <= tolerance)) {
      c.ok = false;
      c.summary += std::string(c.summary.empty() ? "" : "; ") + line;
    }
    if (j == 0 || !(rel <= c.worst)) {
      c.worst = rel;
      c.worst_param = params[j].name;
      worst_line = line;
    }
  }
  if (c.ok) c.summary = "worst " + worst_line;
  return c;
}

std::vector<double> augmented_batch(const nn::Dataset& data, std::span<const std::int64_t> indices,
                                    const nn::BatchFormat& f, const nn::Augment& augment, std::uint64_t seed) {
  const std::int64_t plane = f.h * f.w, image = f.c * plane, pad = augment.pad;
  std::vector<double> out;
  std::vector<float> centred(static_cast<std::size_t>(image));
  for (const std::int64_t index : indices) {
    nn::network_input(data, index, 1, f.mean, f.std_dev, f.c, f.h, f.w, centred.data());
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
