// The trainable tensors of a network (train_params.h): what the training
// step and its reference (reference/nn/train/train.h) share, and the bound on a
// step's gradients (train.h), built with or without Eigen.
#include <algorithm>
#include <cmath>

#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_params.h"

namespace dlb::nn {

std::int64_t TrainParam::size() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

std::vector<TrainParam> trainable_params(const Network& net) {
  DLB_REQUIRE(!net.layers.empty(), "training step: network '" + net.name + "' has no layers");
  const auto n = static_cast<int>(net.layers.size());
  // Who reads each layer's output: as input, as residual.
  std::vector<int> readers(net.layers.size(), 0), joined_by(net.layers.size(), -1);
  for (int i = 0; i < n; ++i) {
    const Layer& l = net.layers[static_cast<std::size_t>(i)];
    const std::string where = "training step: " + net.name + " layer '" + l.name + "': ";
    if (l.input < -1 || l.input >= i) throw Error(where + "reads a layer that does not come before it");
    if (l.residual >= 0 && l.kind != LayerKind::conv) throw Error(where + "a residual join on a layer that is not a conv");
    if (l.residual >= i || l.residual < -1) throw Error(where + "joins a layer that does not come before it");
    if (l.residual >= 0 && l.residual == l.input) throw Error(where + "its input is also its residual");
    if (l.kind == LayerKind::log_softmax && i + 1 != n)
      throw Error(where + "log_softmax is supported as the last layer only");
    if (l.kind == LayerKind::max_pool && l.window * l.window > 255)
      throw Error(where + "pool windows over 255 elements are not supported");
    if (l.kind == LayerKind::conv && !l.raw.bn_gamma.empty() &&
        (l.raw.bn_beta.size() != l.raw.bn_gamma.size() || static_cast<std::int64_t>(l.raw.bn_gamma.size()) != l.k))
      throw Error(where + "batch-norm parameters of the wrong size");
    if (l.input >= 0) ++readers[static_cast<std::size_t>(l.input)];
    if (l.residual >= 0) {
      ++readers[static_cast<std::size_t>(l.residual)];
      joined_by[static_cast<std::size_t>(l.residual)] = i;
    }
  }
  const auto params_of = [&](std::size_t i, std::vector<TrainParam>& out) {
    const Layer& l = net.layers[i];
    if (l.kind == LayerKind::conv) {
      out.push_back({l.name + ".weight", i, false, false, {l.k, l.c, l.window, l.window}});
      if (!l.raw.bias.empty()) out.push_back({l.name + ".bias", i, true, false, {l.k}});
      if (!l.raw.bn_gamma.empty()) {
        const std::string bn = l.raw.bn_name.empty() ? l.name + ".bn" : l.raw.bn_name;
        out.push_back({bn + ".weight", i, false, true, {l.k}});
        out.push_back({bn + ".bias", i, true, true, {l.k}});
      }
    } else if (l.kind == LayerKind::fc) {
      out.push_back({l.name + ".weight", i, false, false, {l.k, l.in_size()}});
      out.push_back({l.name + ".bias", i, true, false, {l.k}});
    }
  };
  // A projection shortcut (a conv only a residual join reads) comes after
  // the conv that joins it: PyTorch's registration order.
  std::vector<std::vector<std::size_t>> deferred(net.layers.size());
  std::vector<TrainParam> out;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const int by = joined_by[i];
    if (net.layers[i].kind == LayerKind::conv && by >= 0 && readers[i] == 1) {
      deferred[static_cast<std::size_t>(by)].push_back(i);
      continue;
    }
    params_of(i, out);
    for (const std::size_t s : deferred[i]) params_of(s, out);
  }
  return out;
}

std::span<const float> param_values(const Network& net, const TrainParam& p) {
  const Layer& l = net.layers.at(p.layer);
  if (p.bn) return p.bias ? std::span<const float>(l.raw.bn_beta) : std::span<const float>(l.raw.bn_gamma);
  if (l.kind == LayerKind::conv) return p.bias ? std::span<const float>(l.raw.bias) : std::span<const float>(l.raw.weight);
  return p.bias ? std::span<const float>(l.bias) : std::span<const float>(l.weight);
}

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
