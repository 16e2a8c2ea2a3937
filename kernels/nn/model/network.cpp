#include "kernels/nn/model/network.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include "kernels/common/error.h"
#include "kernels/nn/model/cache.h"
#include "kernels/nn/model/safetensors.h"

namespace dlb::nn {

namespace {

// Builds a network layer by layer from a state_dict, tracking the current
// shape and every tensor it reads, so that what the file has beyond them is
// reported as extra.
class Builder {
 public:
  Builder(const SafeTensors& st, Network& net) : st_(st), net_(net) {}

  int conv(const std::string& name, int input, std::int64_t k, std::int64_t window, std::int64_t stride,
           std::int64_t pad, bool bias, const std::string& bn, bool relu, int residual = -1) {
    Layer l = next_layer(name, LayerKind::conv, input);
    l.k = k;
    l.window = window;
    l.stride = stride;
    l.pad = pad;
    l.oh = (l.h + 2 * pad - window) / stride + 1;
    l.ow = (l.w + 2 * pad - window) / stride + 1;
    l.relu = relu;
    l.residual = residual;
    l.raw.weight = take_f32(name + ".weight", {k, l.c, window, window});
    if (bias) l.raw.bias = take_f32(name + ".bias", {k});
    if (!bn.empty()) {
      l.raw.bn_name = bn;
      l.raw.bn_gamma = take_f32(bn + ".weight", {k});
      l.raw.bn_beta = take_f32(bn + ".bias", {k});
      l.raw.bn_mean = take_f32(bn + ".running_mean", {k});
      l.raw.bn_var = take_f32(bn + ".running_var", {k});
      take_i64(bn + ".num_batches_tracked", {});
    }
    if (residual >= 0) {
      const Layer& r = net_.layers[static_cast<std::size_t>(residual)];
      DLB_REQUIRE(r.k == l.k && r.oh == l.oh && r.ow == l.ow, "residual shape differs from the conv output: " + name);
    }
    fold(l);
    return push(std::move(l));
  }

  int fc(const std::string& name, int input, std::int64_t k, bool relu) {
    Layer l = next_layer(name, LayerKind::fc, input);
    l.k = k;
    l.oh = l.ow = 1;
    l.relu = relu;
    l.weight = take_f32(name + ".weight", {k, l.in_size()});
    l.bias = take_f32(name + ".bias", {k});
    return push(std::move(l));
  }

  int max_pool(const std::string& name, int input, std::int64_t window) {
    Layer l = next_layer(name, LayerKind::max_pool, input);
    l.window = l.stride = window;
    l.k = l.c;
    l.oh = l.h / window;  // floor, as PyTorch's max_pool2d
    l.ow = l.w / window;
    return push(std::move(l));
  }

  int global_avg_pool(const std::string& name, int input) {
    Layer l = next_layer(name, LayerKind::global_avg_pool, input);
    l.window = l.h;
    l.k = l.c;
    l.oh = l.ow = 1;
    return push(std::move(l));
  }

  int log_softmax(const std::string& name, int input) {
    Layer l = next_layer(name, LayerKind::log_softmax, input);
    l.k = l.in_size();
    l.oh = l.ow = 1;
    return push(std::move(l));
  }

  void finish() {
    for (const auto& [name, info] : st_.tensors()) {
      if (!taken_.count(name)) {
        throw Error("safetensors file '" + st_.origin() + "': tensor '" + name + "' is not a parameter of " +
                    net_.name + " (extra tensor: a different network or version?)");
      }
    }
    net_.classes = net_.layers.back().k;
  }

 private:
  Layer next_layer(const std::string& name, LayerKind kind, int input) {
    Layer l;
    l.name = name;
    l.kind = kind;
    l.input = input;
    if (input < 0) {
      l.c = net_.c, l.h = net_.h, l.w = net_.w;
    } else {
      const Layer& in = net_.layers[static_cast<std::size_t>(input)];
      l.c = in.k, l.h = in.oh, l.w = in.ow;
    }
    return l;
  }
  int push(Layer l) {
    net_.layers.push_back(std::move(l));
    return static_cast<int>(net_.layers.size()) - 1;
  }
  std::vector<float> take_f32(const std::string& name, const std::vector<std::int64_t>& shape) {
    taken_.insert(name);
    return st_.f32(name, shape);
  }
  void take_i64(const std::string& name, const std::vector<std::int64_t>& shape) {
    taken_.insert(name);
    st_.i64(name, shape);
  }
  // Batch-norm into the conv, in double, rounded once.
  static void fold(Layer& l) {
    const auto per_k = static_cast<std::size_t>(l.c * l.window * l.window);
    l.weight.resize(l.raw.weight.size());
    l.bias.assign(static_cast<std::size_t>(l.k), 0.0f);
    for (std::size_t o = 0; o < static_cast<std::size_t>(l.k); ++o) {
      double scale = 1.0, shift = 0.0;
      const double b = l.raw.bias.empty() ? 0.0 : l.raw.bias[o];
      if (!l.raw.bn_gamma.empty()) {
        scale = l.raw.bn_gamma[o] / std::sqrt(static_cast<double>(l.raw.bn_var[o]) + l.raw.bn_eps);
        shift = l.raw.bn_beta[o] - l.raw.bn_mean[o] * scale;
      }
      for (std::size_t i = 0; i < per_k; ++i)
        l.weight[o * per_k + i] = static_cast<float>(l.raw.weight[o * per_k + i] * scale);
      l.bias[o] = static_cast<float>(b * scale + shift);
    }
  }

  const SafeTensors& st_;
  Network& net_;
  std::set<std::string> taken_;
};

void build_resnet20(Builder& b) {
  int x = b.conv("conv1", -1, 16, 3, 1, 1, false, "bn1", true);
  std::int64_t channels = 16;
  for (int stage = 1; stage <= 3; ++stage) {
    const std::int64_t k = 16 << (stage - 1);
    for (int block = 0; block < 3; ++block) {
      const std::string p = "stage" + std::to_string(stage) + "." + std::to_string(block) + ".";
      const std::int64_t stride = (block == 0 && stage > 1) ? 2 : 1;
      const int in = x;
      const int mid = b.conv(p + "conv1", in, k, 3, stride, 1, false, p + "bn1", true);
      // The projection shortcut (1x1 conv + BN) where the shape changes,
      // identity elsewhere. PyTorch names it downsample.0 / downsample.1.
      int shortcut = in;
      if (stride != 1 || channels != k) {
        shortcut = b.conv(p + "downsample.0", in, k, 1, stride, 0, false, p + "downsample.1", false);
      }
      x = b.conv(p + "conv2", mid, k, 3, 1, 1, false, p + "bn2", true, shortcut);
      channels = k;
    }
  }
  x = b.global_avg_pool("avgpool", x);
  b.fc("fc", x, 10, false);
}

void build_mnist_cnn(Builder& b) {
  int x = b.conv("conv1", -1, 32, 3, 1, 0, true, "", true);
  x = b.conv("conv2", x, 64, 3, 1, 0, true, "", true);
  x = b.max_pool("max_pool2d", x, 2);
  x = b.fc("fc1", x, 128, true);
  x = b.fc("fc2", x, 10, false);
  b.log_softmax("log_softmax", x);
}

void build_mnist_lenet(Builder& b) {
  int x = b.conv("conv1", -1, 20, 5, 1, 0, true, "", true);
  x = b.max_pool("max_pool2d_1", x, 2);
  x = b.conv("conv2", x, 50, 5, 1, 0, true, "", true);
  x = b.max_pool("max_pool2d_2", x, 2);
  x = b.fc("fc1", x, 500, true);
  x = b.fc("fc2", x, 10, false);
  b.log_softmax("log_softmax", x);
}

struct Description {
  std::string_view name;
  std::int64_t c, h, w;
  void (*build)(Builder&);
};
constexpr Description kDescriptions[] = {
    {"resnet20", 3, 32, 32, build_resnet20},
    {"mnist_cnn", 1, 28, 28, build_mnist_cnn},
    {"mnist_lenet", 1, 28, 28, build_mnist_lenet},
};
// The names, in the order of kDescriptions.
constexpr auto kNames = [] {
  std::array<std::string_view, std::size(kDescriptions)> names{};
  for (std::size_t i = 0; i < names.size(); ++i) names[i] = kDescriptions[i].name;
  return names;
}();

float metadata_float(const SafeTensors& st, const std::string& key) {
  const std::string& text = st.metadata(key);
  char* end = nullptr;
  const float v = std::strtof(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
    throw Error("safetensors file '" + st.origin() + "': metadata '" + key + "' = '" + text + "' is not a number");
  return v;
}

}  // namespace

std::span<const std::string_view> network_names() { return kNames; }

Network load_network(std::string_view name, const std::string& path) {
  const Description* d = nullptr;
  for (const auto& desc : kDescriptions)
    if (desc.name == name) d = &desc;
  if (d == nullptr) {
    std::string known;
    for (const auto n : kNames) known.append(known.empty() ? "" : ", ").append(n);
    throw Error("unknown network '" + std::string(name) + "' (known: " + known + ")");
  }
  const SafeTensors st = SafeTensors::read(path);
  Network net;
  net.name = name;
  net.c = d->c, net.h = d->h, net.w = d->w;
  net.weights_path = path;
  net.input_mean = metadata_float(st, "input_mean");
  net.input_std = metadata_float(st, "input_std");
  if (!(net.input_std > 0)) throw Error("safetensors file '" + path + "': metadata input_std must be positive");
  Builder builder(st, net);
  d->build(builder);
  builder.finish();
  return net;
}

std::string models_dir() {
  if (const char* dir = std::getenv("DLB_MODELS_DIR"); dir != nullptr && *dir != '\0') return dir;
  return DLB_SOURCE_DIR "/models/fashion-mnist";
}

std::string weights_path(std::string_view name) { return models_dir() + "/" + std::string(name) + ".safetensors"; }
std::string reference_path(std::string_view name) {
  return models_dir() + "/" + std::string(name) + ".reference.safetensors";
}

const Network& network(std::string_view name) {
  return load_once<Network>(name, [name] { return load_network(name, weights_path(name)); });
}

NetworkReference load_reference(const std::string& path, std::int64_t classes) {
  const SafeTensors st = SafeTensors::read(path);
  NetworkReference r;
  const auto logits = st.tensors().find("logits");
  if (logits == st.tensors().end() || logits->second.shape.size() != 2)
    throw Error("reference file '" + path + "': no 2-D tensor 'logits'");
  r.images = logits->second.shape[0];
  r.logits = st.f32("logits", {r.images, classes});
  const auto predictions = st.tensors().find("predictions");
  if (predictions == st.tensors().end() || predictions->second.shape.size() != 1)
    throw Error("reference file '" + path + "': no 1-D tensor 'predictions'");
  const std::int64_t n = predictions->second.shape[0];
  r.predictions = st.u8("predictions", {n});
  r.labels = st.u8("labels", {n});
  const std::string& text = st.metadata("accuracy");
  char* end = nullptr;
  r.accuracy = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !(r.accuracy >= 0 && r.accuracy <= 1))
    throw Error("reference file '" + path + "': metadata accuracy '" + text + "' is not a fraction");
  return r;
}

const NetworkReference& reference(std::string_view name) {
  return load_once<NetworkReference>(name,
                                     [name] { return load_reference(reference_path(name), network(name).classes); });
}

}  // namespace dlb::nn
