// What a network's description says of itself (network.h): the kinds'
// names, each layer's op, label and MACs, the network's MACs and parameter
// count. Pure functions of the description, in dlb_description with no
// loading (safetensors, the models directory: network.cpp), so that the
// reference links them without the loaders.
#include "kernels/nn/model/network.h"

#include <string>

#include "kernels/common/error.h"

namespace dlb::nn {

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv: return "conv";
    case LayerKind::max_pool: return "max_pool";
    case LayerKind::global_avg_pool: return "avg_pool";
    case LayerKind::fc: return "fc";
    case LayerKind::log_softmax: return "log_softmax";
  }
  return "?";
}

void unknown_layer_kind(const Layer& l) { throw Error("layer " + l.name + ": unknown layer kind"); }

double Layer::macs() const {
  if (kind == LayerKind::conv) return static_cast<double>(k * oh * ow) * static_cast<double>(c * window * window);
  if (kind == LayerKind::fc) return static_cast<double>(k) * static_cast<double>(in_size());
  return 0;
}

std::string Layer::op() const {
  std::string s = layer_kind_name(kind);
  if (kind == LayerKind::conv || kind == LayerKind::fc) s += "+bias";
  if (residual >= 0) s += "+add";
  if (relu) s += "+relu";
  return s;
}

std::string Layer::label() const {
  std::string s = name + " " + op();
  // Appended piece by piece: in this file GCC 12 at -O3 warns on
  // `" " + std::to_string(..)` (-Wrestrict, a false positive of its
  // std::string inlining).
  const auto dims = [&s](std::int64_t a, const char* sep, std::int64_t b) {
    s += ' ';
    s += std::to_string(a);
    s += sep;
    s += std::to_string(b);
  };
  if (kind == LayerKind::conv) {
    dims(c, "->", k);
    dims(window, "x", window);
    if (stride != 1) {
      s += " s";
      s += std::to_string(stride);
    }
  } else if (kind == LayerKind::fc) {
    dims(in_size(), "->", k);
  } else if (kind == LayerKind::max_pool) {
    dims(window, "x", window);
  }
  return s;
}

double Network::macs() const {
  double total = 0;
  for (const auto& l : layers) total += l.macs();
  return total;
}

std::int64_t Network::parameters() const {
  std::int64_t total = 0;
  for (const auto& l : layers) {
    if (l.kind == LayerKind::fc) total += static_cast<std::int64_t>(l.weight.size() + l.bias.size());
    if (l.kind == LayerKind::conv) {
      total += static_cast<std::int64_t>(l.raw.weight.size() + l.raw.bias.size() + l.raw.bn_gamma.size() +
                                         l.raw.bn_beta.size());
    }
  }
  return total;
}

}  // namespace dlb::nn
