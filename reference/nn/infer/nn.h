// Reference forward pass of a network (kernels/nn/model/network.h), in double
// precision with plain loops, from the unfolded parameters: conv (+ its own
// bias), then batch-norm with the running statistics as PyTorch applies it,
// the residual add, ReLU, pools, fc, log-softmax. The oracle for every
// network backend in the tests; the tests also hold it against PyTorch's
// logits, which ties the network description to the trained module.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/nn/model/network.h"

namespace dlb::ref {

// x: [batch, c, h, w] network input; returns [batch, classes].
std::vector<double> forward(const nn::Network& net, std::span<const float> x, std::int64_t batch);

// The same pass, keeping per layer the smallest and largest value of its
// output over the batch: {min, max} per layer, in network order.
std::vector<std::pair<double, double>> output_ranges(const nn::Network& net, std::span<const float> x,
                                                     std::int64_t batch);

}  // namespace dlb::ref
