// The trainable tensors of a network (train_params.h): what the training
// step and its reference (reference/nn/train/train.h) share. A description,
// in dlb_description with the network's (the reference links it, not the
// steps); the bound on a step's gradients is train_bound.cpp's.
#include "kernels/nn/train/train_params.h"

#include <string>
#include <vector>

#include "kernels/common/error.h"

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

}  // namespace dlb::nn
