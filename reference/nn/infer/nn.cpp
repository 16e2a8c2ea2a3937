#include "reference/nn/infer/nn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>

#include "kernels/common/error.h"

namespace dlb::ref {
namespace {

using nn::Layer;

// One image's conv output, before batch-norm: y [k, oh, ow].
void conv_image(const Layer& l, const double* x, double* y) {
  const std::int64_t r = l.window;
  for (std::int64_t k = 0; k < l.k; ++k) {
    for (std::int64_t i = 0; i < l.oh; ++i) {
      for (std::int64_t j = 0; j < l.ow; ++j) {
        double sum = l.raw.bias.empty() ? 0.0 : l.raw.bias[static_cast<std::size_t>(k)];
        for (std::int64_t c = 0; c < l.c; ++c) {
          for (std::int64_t a = 0; a < r; ++a) {
            const std::int64_t row = i * l.stride + a - l.pad;
            if (row < 0 || row >= l.h) continue;
            for (std::int64_t b = 0; b < r; ++b) {
              const std::int64_t col = j * l.stride + b - l.pad;
              if (col < 0 || col >= l.w) continue;
              sum += static_cast<double>(l.raw.weight[static_cast<std::size_t>(((k * l.c + c) * r + a) * r + b)]) *
                     x[(c * l.h + row) * l.w + col];
            }
          }
        }
        y[(k * l.oh + i) * l.ow + j] = sum;
      }
    }
  }
}

// One image's layer on doubles: the reference's functions for by_kind
// (network.h). Each writes y from x; layer_image adds the residual and applies
// the ReLU after.
struct Image {
  const double* x;
  double* y;
};
struct LayerImage {
  void conv(const Layer& l, const Image& io) const {
    conv_image(l, io.x, io.y);
    const std::int64_t plane = l.oh * l.ow;
    if (!l.raw.bn_gamma.empty()) {
      for (std::int64_t k = 0; k < l.k; ++k) {
        const auto i = static_cast<std::size_t>(k);
        const double inv = 1.0 / std::sqrt(static_cast<double>(l.raw.bn_var[i]) + l.raw.bn_eps);
        for (std::int64_t p = 0; p < plane; ++p) {
          double& v = io.y[k * plane + p];
          v = (v - l.raw.bn_mean[i]) * inv * l.raw.bn_gamma[i] + l.raw.bn_beta[i];
        }
      }
    }
  }
  void max_pool(const Layer& l, const Image& io) const {
    for (std::int64_t c = 0; c < l.c; ++c)
      for (std::int64_t i = 0; i < l.oh; ++i)
        for (std::int64_t j = 0; j < l.ow; ++j) {
          double m = -std::numeric_limits<double>::infinity();
          for (std::int64_t a = 0; a < l.window; ++a)
            for (std::int64_t b = 0; b < l.window; ++b)
              m = std::max(m, io.x[(c * l.h + i * l.stride + a) * l.w + j * l.stride + b]);
          io.y[(c * l.oh + i) * l.ow + j] = m;
        }
  }
  void global_avg_pool(const Layer& l, const Image& io) const {
    for (std::int64_t c = 0; c < l.c; ++c) {
      double sum = 0;
      for (std::int64_t p = 0; p < l.h * l.w; ++p) sum += io.x[c * l.h * l.w + p];
      io.y[c] = sum / static_cast<double>(l.h * l.w);
    }
  }
  void fc(const Layer& l, const Image& io) const {
    for (std::int64_t k = 0; k < l.k; ++k) {
      double sum = l.bias[static_cast<std::size_t>(k)];
      for (std::int64_t i = 0; i < l.in_size(); ++i)
        sum += static_cast<double>(l.weight[static_cast<std::size_t>(k * l.in_size() + i)]) * io.x[i];
      io.y[k] = sum;
    }
  }
  void log_softmax(const Layer& l, const Image& io) const {
    const double m = *std::max_element(io.x, io.x + l.k);
    double sum = 0;
    for (std::int64_t i = 0; i < l.k; ++i) sum += std::exp(io.x[i] - m);
    for (std::int64_t i = 0; i < l.k; ++i) io.y[i] = io.x[i] - m - std::log(sum);
  }
};

void layer_image(const Layer& l, const double* x, const double* residual, double* y) {
  const std::int64_t out = l.out_size();
  const LayerImage image;
  nn::by_kind(image, l, Image{x, y});
  if (residual != nullptr)
    for (std::int64_t i = 0; i < out; ++i) y[i] += residual[i];
  if (l.relu)
    for (std::int64_t i = 0; i < out; ++i) y[i] = std::max(y[i], 0.0);
}

}  // namespace

namespace {

// The pass image by image (in parallel); `each(n, outputs)` sees every
// layer's output of image n.
template <class Each>
void pass(const nn::Network& net, std::span<const float> x, std::int64_t batch, Each each) {
  DLB_REQUIRE(static_cast<std::int64_t>(x.size()) == batch * net.in_size(), "reference forward: input size");
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t n = 0; n < batch; ++n) {
    std::vector<double> input(x.begin() + n * net.in_size(), x.begin() + (n + 1) * net.in_size());
    std::vector<std::vector<double>> outputs(net.layers.size());
    for (std::size_t i = 0; i < net.layers.size(); ++i) {
      const Layer& l = net.layers[i];
      outputs[i].resize(static_cast<std::size_t>(l.out_size()));
      const double* in = l.input < 0 ? input.data() : outputs[static_cast<std::size_t>(l.input)].data();
      const double* res = l.residual < 0 ? nullptr : outputs[static_cast<std::size_t>(l.residual)].data();
      layer_image(l, in, res, outputs[i].data());
    }
    each(n, outputs);
  }
}

}  // namespace

std::vector<double> forward(const nn::Network& net, std::span<const float> x, std::int64_t batch) {
  std::vector<double> result(static_cast<std::size_t>(batch * net.classes));
  pass(net, x, batch, [&](std::int64_t n, const std::vector<std::vector<double>>& outputs) {
    std::copy(outputs.back().begin(), outputs.back().end(), result.begin() + n * net.classes);
  });
  return result;
}

std::vector<std::pair<double, double>> output_ranges(const nn::Network& net, std::span<const float> x,
                                                     std::int64_t batch) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, double>> ranges(net.layers.size(), {inf, -inf});
  std::mutex mutex;
  pass(net, x, batch, [&](std::int64_t, const std::vector<std::vector<double>>& outputs) {
    std::lock_guard lock(mutex);
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const auto [lo, hi] = std::minmax_element(outputs[i].begin(), outputs[i].end());
      ranges[i] = {std::min(ranges[i].first, *lo), std::max(ranges[i].second, *hi)};
    }
  });
  return ranges;
}

}  // namespace dlb::ref
