// What a network trains and how (train.h's step, its reference
// reference/nn/train/train.h and PyTorch's all hold to it): the trainable tensors in
// PyTorch's order with their state_dict names, and the optimizer's
// settings. A description, as network.h is, with no computation of a step:
// the reference may use it (docs/architecture.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/nn/model/network.h"

namespace dlb::nn {

struct Sgd {
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0.0;
};

// A trainable tensor: a conv's or an fc's weight or bias, or a conv's
// batch-norm weight (gamma) or bias (beta), with PyTorch's state_dict name
// ("conv1.weight", "fc2.bias", "stage1.0.bn1.weight") and shape.
struct TrainParam {
  std::string name;
  std::size_t layer = 0;  // index in Network::layers
  bool bias = false;      // a ".bias": the layer's bias, or beta where bn
  bool bn = false;        // the layer's batch-norm: gamma (bias false) or beta
  std::vector<std::int64_t> shape;
  std::int64_t size() const;
};

// The trainable tensors of `net` in PyTorch's named_parameters order: layer
// by layer, a conv's weight, bias, batch-norm weight and bias; a projection
// shortcut (a conv whose output only a later conv's residual join reads:
// resnet20's downsample.0 + downsample.1) after the conv that joins it, as
// PyTorch's BasicBlock registers downsample after conv2 and bn2. Throws
// dlb::Error naming the layer for what the step does not support (a layer
// reading a later one, a log-softmax that is not the last layer, a layer
// whose input is also its residual).
std::vector<TrainParam> trainable_params(const Network& net);
// The values of a trainable tensor as the network holds them.
std::span<const float> param_values(const Network& net, const TrainParam& p);

}  // namespace dlb::nn
