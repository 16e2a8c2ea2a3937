// Networks and batches for the training-step tests: small chains with random
// parameters (built as load_network would), random batches, and the first
// Fashion-MNIST training images as a network reads them; TinyNet also
// builds batch-norm and residual joins (tiny_resnet) and max pools whose windows overlap (stride below the window).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/nn/data/dataset.h"
#include "kernels/nn/model/network.h"

namespace dlb::test {

class TinyNet {
 public:
  TinyNet(std::int64_t c, std::int64_t h, std::int64_t w, std::uint32_t seed) : rng_(seed) {
    net_.name = "tiny";
    net_.c = c, net_.h = h, net_.w = w;
  }
  TinyNet& conv(std::int64_t k, std::int64_t r, std::int64_t stride, std::int64_t pad, bool relu, bool bias = true) {
    return conv_from(-2, k, r, stride, pad, relu, bias, false, -1);
  }
  // A conv reading layer `input` (-2: the one before; -1: the network
  // input), with batch-norm (random gamma, beta, running statistics) and a
  // residual join where asked.
  TinyNet& conv_from(int input, std::int64_t k, std::int64_t r, std::int64_t stride, std::int64_t pad, bool relu,
                     bool bias, bool bn, int residual) {
    nn::Layer l = next(nn::LayerKind::conv, input);
    l.residual = residual;
    l.k = k, l.window = r, l.stride = stride, l.pad = pad, l.relu = relu;
    l.oh = (l.h + 2 * pad - r) / stride + 1;
    l.ow = (l.w + 2 * pad - r) / stride + 1;
    l.raw.weight = random(l.k * l.c * r * r, 1.0 / std::sqrt(static_cast<double>(l.c * r * r)));
    if (bias) l.raw.bias = random(l.k, 0.3);
    l.weight = l.raw.weight;
    l.bias = bias ? l.raw.bias : std::vector<float>(static_cast<std::size_t>(k), 0.0f);
    if (bn) {
      l.raw.bn_name = l.name + "_bn";
      l.raw.bn_gamma = random(k, 0.5);
      for (auto& v : l.raw.bn_gamma) v += 1.0f;
      l.raw.bn_beta = random(k, 0.3);
      l.raw.bn_mean = random(k, 0.1);
      l.raw.bn_var = random(k, 0.1);
      for (auto& v : l.raw.bn_var) v = 1.0f + std::abs(v);
    }
    return push(std::move(l));
  }
  TinyNet& fc(std::int64_t k, bool relu) {
    nn::Layer l = next(nn::LayerKind::fc);
    l.k = k, l.oh = l.ow = 1, l.relu = relu;
    l.weight = random(k * l.in_size(), 1.0 / std::sqrt(static_cast<double>(l.in_size())));
    l.bias = random(k, 0.3);
    return push(std::move(l));
  }
  // stride 0: the window (PyTorch's default); a smaller stride overlaps the windows.
  TinyNet& max_pool(std::int64_t window, std::int64_t stride = 0) {
    nn::Layer l = next(nn::LayerKind::max_pool);
    l.window = window, l.stride = stride > 0 ? stride : window, l.k = l.c;
    l.oh = (l.h - window) / l.stride + 1, l.ow = (l.w - window) / l.stride + 1;
    return push(std::move(l));
  }
  TinyNet& global_avg_pool() {
    nn::Layer l = next(nn::LayerKind::global_avg_pool);
    l.window = l.h, l.k = l.c, l.oh = l.ow = 1;
    return push(std::move(l));
  }
  TinyNet& log_softmax() {
    nn::Layer l = next(nn::LayerKind::log_softmax);
    l.k = l.in_size(), l.oh = l.ow = 1;
    return push(std::move(l));
  }
  nn::Network done() {
    net_.classes = net_.layers.back().k;
    return net_;
  }
  std::vector<float> random(std::int64_t n, double scale) {
    std::normal_distribution<double> normal(0.0, scale);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = static_cast<float>(normal(rng_));
    return v;
  }

 private:
  nn::Layer next(nn::LayerKind kind, int input = -2) {
    nn::Layer l;
    l.name = std::string(nn::layer_kind_name(kind)) + std::to_string(net_.layers.size());
    l.kind = kind;
    l.input = input == -2 ? static_cast<int>(net_.layers.size()) - 1 : input;
    if (l.input < 0) {
      l.c = net_.c, l.h = net_.h, l.w = net_.w;
    } else {
      const auto& in = net_.layers[static_cast<std::size_t>(l.input)];
      l.c = in.k, l.h = in.oh, l.w = in.ow;
    }
    return l;
  }
  TinyNet& push(nn::Layer l) {
    net_.layers.push_back(std::move(l));
    return *this;
  }
  nn::Network net_;
  std::mt19937 rng_;
};

// Every layer kind, padding, stride 2, a conv without bias, max pools after
// a conv with ReLU (2x2, 3x3, and 3x3 windows at stride 2, which overlap:
// an input can be the maximum of two windows), after a pool, a global
// average pool after a conv with ReLU, with and without log-softmax.
inline std::vector<nn::Network> tiny_train_nets() {
  std::vector<nn::Network> nets;
  nets.push_back(TinyNet(2, 8, 8, 1).conv(3, 3, 1, 1, true).conv(4, 3, 2, 1, true).max_pool(2).fc(6, true).fc(3, false)
                     .log_softmax().done());
  nets.push_back(TinyNet(1, 9, 9, 2).conv(4, 3, 1, 0, true, false).max_pool(3).max_pool(2).conv(5, 1, 1, 0, true)
                     .global_avg_pool().fc(4, false).done());
  nets.push_back(TinyNet(3, 11, 11, 3).conv(4, 3, 1, 1, true).max_pool(3, 2).conv(6, 2, 1, 0, false).fc(5, true)
                     .fc(4, false).log_softmax().done());
  return nets;
}

// A small residual network as resnet20 is made: a stem conv + batch-norm +
// ReLU, a block with an identity join, a block with a stride-2 3x3 conv and
// a projection shortcut (1x1 conv stride 2 + batch-norm, no ReLU) joined
// before the last ReLU, global average pooling, fc, no log-softmax.
inline nn::Network tiny_resnet() {
  TinyNet t(2, 8, 8, 3);
  t.conv_from(-1, 4, 3, 1, 1, true, false, true, -1);  // 0 stem
  t.conv_from(0, 4, 3, 1, 1, true, false, true, -1);   // 1 block 1, conv1
  t.conv_from(1, 4, 3, 1, 1, true, false, true, 0);    // 2 block 1, conv2 + identity join
  t.conv_from(2, 6, 3, 2, 1, true, false, true, -1);   // 3 block 2, conv1, stride 2
  t.conv_from(2, 6, 1, 2, 0, false, false, true, -1);  // 4 block 2, the projection shortcut
  t.conv_from(3, 6, 3, 1, 1, true, false, true, 4);    // 5 block 2, conv2 + projection join
  return t.global_avg_pool().fc(3, false).done();
}

struct TrainBatch {
  std::vector<float> x;
  std::vector<std::uint8_t> labels;
};

inline TrainBatch random_train_batch(const nn::Network& net, std::int64_t batch, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  TrainBatch b{std::vector<float>(static_cast<std::size_t>(batch * net.in_size())), {}};
  for (auto& v : b.x) v = normal(rng);
  for (std::int64_t n = 0; n < batch; ++n) b.labels.push_back(static_cast<std::uint8_t>(rng() % net.classes));
  return b;
}

// The first `batch` Fashion-MNIST training images, as the network reads them.
inline TrainBatch fashion_train_batch(const nn::Network& net, std::int64_t batch) {
  const nn::Dataset& data = nn::fashion_mnist_train();
  TrainBatch b{std::vector<float>(static_cast<std::size_t>(batch * net.in_size())), {}};
  nn::network_input(data, 0, batch, net.input_mean, net.input_std, net.c, net.h, net.w, b.x.data());
  b.labels.assign(data.labels.begin(), data.labels.begin() + batch);
  return b;
}

}  // namespace dlb::test
