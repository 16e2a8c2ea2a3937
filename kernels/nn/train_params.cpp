// The trainable tensors of a network (train.h): what the training step and
// its reference (reference/train.h) share, built with or without Eigen.
#include <algorithm>
#include <cmath>

#include "kernels/common/error.h"
#include "kernels/nn/train.h"

namespace dlb::nn {

std::int64_t TrainParam::size() const {
  std::int64_t n = 1;
  for (const auto d : shape) n *= d;
  return n;
}

std::vector<TrainParam> trainable_params(const Network& net) {
  DLB_REQUIRE(!net.layers.empty(), "training step: network '" + net.name + "' has no layers");
  std::vector<TrainParam> out;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    const std::string where = "training step: " + net.name + " layer '" + l.name + "': ";
    if (l.input != static_cast<int>(i) - 1)
      throw Error(where + "does not read the layer before it (only chains of layers are supported)");
    if (l.residual >= 0) throw Error(where + "residual joins are not supported yet");
    if (l.kind == LayerKind::conv && !l.raw.bn_gamma.empty())
      throw Error(where + "batch-norm in training mode (batch statistics) is not supported yet");
    if (l.kind == LayerKind::log_softmax && i + 1 != net.layers.size())
      throw Error(where + "log_softmax is supported as the last layer only");
    if (l.kind == LayerKind::max_pool && l.window * l.window > 255)
      throw Error(where + "pool windows over 255 elements are not supported");
    if (l.kind == LayerKind::conv) {
      out.push_back({l.name + ".weight", i, false, {l.k, l.c, l.window, l.window}});
      if (!l.raw.bias.empty()) out.push_back({l.name + ".bias", i, true, {l.k}});
    } else if (l.kind == LayerKind::fc) {
      out.push_back({l.name + ".weight", i, false, {l.k, l.in_size()}});
      out.push_back({l.name + ".bias", i, true, {l.k}});
    }
  }
  return out;
}

std::span<const float> param_values(const Network& net, const TrainParam& p) {
  const Layer& l = net.layers.at(p.layer);
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

}  // namespace dlb::nn
