// The bound on a training step's gradients and a step's FLOPs (train.h),
// built with or without Eigen; and whether the training inputs are there.
// Kernel code beside the steps: the trainable tensors they count over are
// train_params.cpp's description.
#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/train.h"

namespace dlb::nn {

std::int64_t gradient_chain_length(const Network& net, std::int64_t batch) {
  std::int64_t n = 0, weight_sum = 0;
  for (const auto& l : net.layers) {
    if (l.kind == LayerKind::conv) {
      n += l.c * l.window * l.window + 1;                                     // forward
      n += std::max<std::int64_t>(1, l.k * l.window * l.window / (l.stride * l.stride));  // input gradient
      weight_sum = std::max(weight_sum, batch * l.oh * l.ow);
      if (!l.raw.bn_gamma.empty()) n += 15;  // batch-norm's fp32 roundings (train.h)
      if (l.residual >= 0) n += 2;           // the join: forward add, gradient sum
    } else if (l.kind == LayerKind::fc) {
      n += l.in_size() + 1 + l.k;
      weight_sum = std::max(weight_sum, batch);
    } else if (l.kind == LayerKind::global_avg_pool) {
      n += l.h * l.w;
    }
  }
  return n + weight_sum + 2 * net.layers.back().k;  // the softmax's sum, its exp and log
}

double gradient_tolerance(const Network& net, std::int64_t batch) {
  return 8.0 * std::sqrt(static_cast<double>(gradient_chain_length(net, batch))) * std::ldexp(1.0, -24);
}

std::int64_t onednn_gradient_chain_length(const Network& net, std::int64_t batch) {
  std::int64_t n = gradient_chain_length(net, batch);
  for (const auto& l : net.layers)
    if (l.kind == LayerKind::conv && !l.raw.bn_gamma.empty()) n += 4 * batch * l.oh * l.ow;  // fp32 sums (train.h)
  return n;
}

double onednn_gradient_tolerance(const Network& net, std::int64_t batch) {
  return 8.0 * std::sqrt(static_cast<double>(onednn_gradient_chain_length(net, batch))) * std::ldexp(1.0, -24);
}

WinogradMatrices winograd_matrices(int m, int r, const std::vector<double>& finite_points) {
  const int n = m + r - 1;
  DLB_REQUIRE(m >= 1 && r >= 1 && static_cast<int>(finite_points.size()) == n - 1,
              "winograd_matrices: F(m, r) takes m + r - 2 finite points");
  WinogradMatrices w{m, r, std::vector<double>(static_cast<std::size_t>(m * n)),
                     std::vector<double>(static_cast<std::size_t>(n * r)), std::vector<double>(static_cast<std::size_t>(n * n))};
  // The coefficients (ascending powers) of the product of (x - q) over the
  // finite points q other than `skip` (none: -1).
  const auto product = [&](int skip) {
    std::vector<double> c{1.0};
    for (int l = 0; l < n - 1; ++l) {
      if (l == skip) continue;
      std::vector<double> next(c.size() + 1, 0.0);
      for (std::size_t e = 0; e < c.size(); ++e) {
        next[e + 1] += c[e];
        next[e] -= finite_points[static_cast<std::size_t>(l)] * c[e];
      }
      c = std::move(next);
    }
    return c;
  };
  const auto at = [&](int i, int k) -> double& { return w.at[static_cast<std::size_t>(i * n + k)]; };
  const auto g = [&](int k, int j) -> double& { return w.g[static_cast<std::size_t>(k * r + j)]; };
  const auto bt = [&](int k, int l) -> double& { return w.bt[static_cast<std::size_t>(k * n + l)]; };
  for (int k = 0; k < n - 1; ++k) {
    const double p = finite_points[static_cast<std::size_t>(k)];
    double nk = 1.0;  // the product of p - q over the other finite points
    for (int l = 0; l < n - 1; ++l)
      if (l != k) nk *= p - finite_points[static_cast<std::size_t>(l)];
    DLB_REQUIRE(nk != 0.0, "winograd_matrices: the points are not distinct");
    for (int i = 0; i < m; ++i) at(i, k) = std::pow(p, i);
    for (int j = 0; j < r; ++j) g(k, j) = std::pow(p, j) / nk;
    const auto c = product(k);
    for (std::size_t e = 0; e < c.size(); ++e) bt(k, static_cast<int>(e)) = c[e];
  }
  at(m - 1, n - 1) = 1.0;  // the point at infinity
  g(n - 1, r - 1) = 1.0;
  const auto c = product(-1);
  for (std::size_t e = 0; e < c.size(); ++e) bt(n - 1, static_cast<int>(e)) = c[e];
  return w;
}

double winograd_magnitude_factor(const WinogradMatrices& w) {
  const int n = w.m + w.r - 1;
  double largest = 0;
  for (int i = 0; i < w.m; ++i) {
    double sum = 0;
    for (int k = 0; k < n; ++k) {
      double gk = 0, bk = 0;
      for (int j = 0; j < w.r; ++j) gk += std::abs(w.g[static_cast<std::size_t>(k * w.r + j)]);
      for (int l = 0; l < n; ++l) bk += std::abs(w.bt[static_cast<std::size_t>(k * n + l)]);
      sum += std::abs(w.at[static_cast<std::size_t>(i * n + k)]) * gk * bk;
    }
    largest = std::max(largest, sum / w.r);
  }
  return largest * largest;
}

bool onednn_winograd_eligible(const Layer& l) {
  return l.kind == LayerKind::conv && l.window == 3 && l.stride == 1 && l.c % 16 == 0 && l.k % 16 == 0;
}

bool own_winograd_eligible(const Layer& l) { return onednn_winograd_eligible(l) && l.pad <= 2; }

bool own_winograd_weights_eligible(const Layer& l) { return own_winograd_eligible(l); }

namespace {
// The own Winograd's points (winograd_f43.h's transforms, forward and weight gradient).
const std::vector<double> kOwnWinogradPoints = {0.0, 1.0, -1.0, 2.0, -2.0};
// oneDNN's jit_wino_4x3 kernels' points (their transforms' constants are
// these points' Toom-Cook matrices, rescaled).
const std::vector<double> kOnednnWinogradPoints = {0.0, 0.625, -0.625, 1.5, -1.5};
constexpr std::int64_t kWinogradTransformRoundings = 19;
}  // namespace

namespace {
// The chain N of every tensor (the forward and backward data's Winograd
// terms, whichever algorithm runs), and the weight gradient's term of each
// layer's own weight gradient (0 where the conv is not eligible).
struct WinogradChains {
  double common = 0;
  std::vector<double> weight_term;  // per layer
};
WinogradChains winograd_chains(const Network& net, std::int64_t batch) {
  const double data = winograd_magnitude_factor(winograd_matrices(4, 3, kOnednnWinogradPoints));
  const double weights = winograd_magnitude_factor(winograd_matrices(3, 4, kOnednnWinogradPoints));
  const double own = winograd_magnitude_factor(winograd_matrices(4, 3, kOwnWinogradPoints));
  const double own_weights = winograd_magnitude_factor(winograd_matrices(3, 4, kOwnWinogradPoints));
  WinogradChains w{static_cast<double>(onednn_gradient_chain_length(net, batch)),
                   std::vector<double>(net.layers.size(), 0.0)};
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    if (own_winograd_eligible(l)) {
      w.common += own * own * static_cast<double>(l.c + kWinogradTransformRoundings);  // forward
      w.common += own * own * static_cast<double>(l.k + kWinogradTransformRoundings);  // backward data
    }
    if (!onednn_winograd_eligible(l)) continue;
    w.common += data * data * static_cast<double>(l.c + kWinogradTransformRoundings);  // forward
    w.common += data * data * static_cast<double>(l.k + kWinogradTransformRoundings);  // backward data
    const std::int64_t tiles = ((l.oh + 3) / 4) * ((l.ow + 3) / 4);
    const double factor = own_winograd_weights_eligible(l) ? std::max(weights, own_weights) : weights;
    w.weight_term[i] = factor * factor * static_cast<double>(batch * tiles + kWinogradTransformRoundings);
  }
  return w;
}
double bound_of(double n) { return 8.0 * std::sqrt(n) * std::ldexp(1.0, -24); }
}  // namespace

std::int64_t onednn_winograd_chain_length(const Network& net, std::int64_t batch) {
  const WinogradChains w = winograd_chains(net, batch);
  return static_cast<std::int64_t>(
      std::ceil(w.common + *std::max_element(w.weight_term.begin(), w.weight_term.end())));
}

double onednn_winograd_gradient_tolerance(const Network& net, std::int64_t batch) {
  return bound_of(static_cast<double>(onednn_winograd_chain_length(net, batch)));
}

std::vector<double> onednn_winograd_gradient_tolerances(const Network& net, std::int64_t batch) {
  const WinogradChains w = winograd_chains(net, batch);
  std::vector<double> out;
  for (const TrainParam& p : trainable_params(net))
    out.push_back(bound_of(std::ceil(w.common + (p.bn ? 0.0 : w.weight_term[p.layer]))));
  return out;
}

double train_step_flops(const Network& net, std::int64_t batch) {
  double macs = 0;
  bool first = true;
  for (const auto& l : net.layers) {
    if (l.kind != LayerKind::conv && l.kind != LayerKind::fc) continue;
    macs += l.macs() * (first ? 2 : 3);
    first = false;
  }
  return 2.0 * macs * static_cast<double>(batch);
}

std::string training_inputs_problem(std::string_view network) {
  try {
    nn::network(network);
    fashion_mnist_train();
  } catch (const std::exception& e) {
    return std::string(network) + ": " + e.what();
  }
  return "";
}

}  // namespace dlb::nn
