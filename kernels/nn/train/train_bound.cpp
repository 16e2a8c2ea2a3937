// The bound on a training step's gradients and a step's FLOPs (train.h),
// built with or without Eigen; and whether the training inputs are there.
// Kernel code beside the steps: the trainable tensors they count over are
// train_params.cpp's description.
#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

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
