// A network: a short chain of layers with residual joins, described once and
// read by every backend, the reference forward pass, the benchmarks and the
// tests. Built from a name (resnet20, mnist_cnn, mnist_lenet) and a
// safetensors state_dict with PyTorch's parameter names (scripts/train.py,
// scripts/dlbench/nets.py hold the same modules).
//
// Layers are in execution order; each reads one earlier layer's output (or
// the network input) and a conv may add another earlier output before its
// ReLU (ResNet's join). Inference semantics: batch-norm with its running
// statistics. At load time every conv's batch-norm is folded into the conv
// (weight' = weight * gamma / sqrt(var + eps), bias' = beta + (bias - mean) *
// gamma / sqrt(var + eps), computed in double, rounded once): the backends
// see conv + bias (+ residual) (+ ReLU). The unfolded parameters are kept for
// the reference forward pass (reference/nn/infer/nn.h), which applies batch-norm as
// PyTorch does.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace dlb::nn {

enum class LayerKind { conv, max_pool, global_avg_pool, fc, log_softmax };

const char* layer_kind_name(LayerKind kind);

// The unfolded parameters of a conv (+ batch-norm), as in the state_dict.
struct RawConv {
  std::vector<float> weight;  // [k, c, r, r]
  std::vector<float> bias;    // [k], or empty (a conv before batch-norm has none)
  std::vector<float> bn_gamma, bn_beta, bn_mean, bn_var;  // [k] each, or all empty
  double bn_eps = 1e-5;
  // nn.BatchNorm2d's running-average factor (its default; the state_dict
  // does not carry it): what a training step's forward uses.
  double bn_momentum = 0.1;
  std::string bn_name;  // the batch-norm module's state_dict prefix: "bn1", "stage2.0.downsample.1"
};

struct Layer {
  std::string name;  // PyTorch's module path: "stage1.0.conv1", "fc1"
  LayerKind kind = LayerKind::conv;
  int input = -1;     // index of the layer whose output is read; -1: the network input
  int residual = -1;  // conv: layer whose output is added before the ReLU; -1: none
  bool relu = false;  // conv, fc: ReLU on the output
  // Per image: input c x h x w, output k x oh x ow (fc: k x 1 x 1, its input
  // flattened as torch.flatten does on NCHW).
  std::int64_t c = 0, h = 0, w = 0;
  std::int64_t k = 0, oh = 0, ow = 0;
  std::int64_t window = 1, stride = 1, pad = 0;  // conv filter / pool window (square)
  // conv: [k, c, window, window] with batch-norm folded; fc: [k, c*h*w]
  std::vector<float> weight;
  std::vector<float> bias;  // conv, fc: [k]
  RawConv raw;              // conv: the unfolded parameters

  std::int64_t in_size() const { return c * h * w; }
  std::int64_t out_size() const { return k * oh * ow; }
  double macs() const;  // per image; 0 for pools and softmax
  // The fused operation a backend runs for this layer, what profiles group by:
  // "conv+bias+relu", "conv+bias+add+relu" (residual join), "conv+bias",
  // "fc+bias+relu", "fc+bias", "max_pool", "global_avg_pool", "log_softmax".
  std::string op() const;
  // Name, op and shape: "stage1.0.conv1 conv+bias+relu 16->16 3x3",
  // "stage2.0.downsample.0 conv+bias 16->32 1x1 s2", "fc1 fc+bias+relu 9216->128"
  std::string label() const;
};

// The one switch over LayerKind that walks a network: `on` (a backend of
// kernels/nn/infer/walk.h, the reference's image pass) has one member function
// per kind, on.conv(l, io), on.fc, on.max_pool, on.global_avg_pool and
// on.log_softmax, and this calls the one for l's kind. Adding a kind adds
// its case here and its function to each walker that supports it.
[[noreturn]] void unknown_layer_kind(const Layer& l);
template <class On, class Io>
decltype(auto) by_kind(On& on, const Layer& l, const Io& io) {
  switch (l.kind) {
    case LayerKind::conv: return on.conv(l, io);
    case LayerKind::fc: return on.fc(l, io);
    case LayerKind::max_pool: return on.max_pool(l, io);
    case LayerKind::global_avg_pool: return on.global_avg_pool(l, io);
    case LayerKind::log_softmax: return on.log_softmax(l, io);
  }
  unknown_layer_kind(l);
}

// by_kind's functions as callables, for a walker whose state is a function's
// locals: `nn::KindFns on{conv, fc, max_pool, global_avg_pool, log_softmax};
// nn::by_kind(on, l, io);` with each a lambda taking (const Layer&, io).
template <class Conv, class Fc, class MaxPool, class AvgPool, class LogSoftmax>
struct KindFns {
  Conv conv;
  Fc fc;
  MaxPool max_pool;
  AvgPool global_avg_pool;
  LogSoftmax log_softmax;
};
template <class... F>
KindFns(F...) -> KindFns<F...>;

struct Network {
  std::string name;
  std::int64_t c = 0, h = 0, w = 0;  // input per image
  std::int64_t classes = 0;
  float input_mean = 0, input_std = 1;  // from the weights' metadata (network_input)
  std::vector<Layer> layers;
  std::string weights_path;

  std::int64_t in_size() const { return c * h * w; }
  double macs() const;  // per image
  std::int64_t parameters() const;  // as PyTorch counts them (batch-norm's 4 vectors counted as 2: gamma, beta)
  const Layer& output() const { return layers.back(); }
};

// The networks this build knows, in the order benchmarks list them.
std::span<const std::string_view> network_names();

// Builds `name` from a safetensors state_dict. Throws dlb::Error naming the
// file and the tensor for a missing, extra, mis-shaped or mis-typed tensor,
// an unknown network name, or metadata the input normalization needs.
Network load_network(std::string_view name, const std::string& weights_path);

// The committed models: $DLB_MODELS_DIR, else models/fashion-mnist in the
// source tree this binary was built from.
std::string models_dir();
std::string weights_path(std::string_view name);    // <models_dir>/<name>.safetensors
std::string reference_path(std::string_view name);  // <models_dir>/<name>.reference.safetensors

// Loaded once per process and kept (the networks are small).
const Network& network(std::string_view name);

// What PyTorch computed for the committed weights (scripts/train.py).
struct NetworkReference {
  std::int64_t images = 0;             // logits of test images [0, images)
  std::vector<float> logits;           // [images, classes]
  std::vector<std::uint8_t> predictions;  // PyTorch's top-1 for every test image
  std::vector<std::uint8_t> labels;       // the test labels it saw (checked against the data set)
  double accuracy = 0;                    // PyTorch's top-1 accuracy on the test set
};
NetworkReference load_reference(const std::string& path, std::int64_t classes);
const NetworkReference& reference(std::string_view name);

}  // namespace dlb::nn
