// Reference training step (kernels/nn/train/train.h) in double precision with
// plain loops, layer by layer over the whole batch: the forward pass
// keeping every layer's output, batch-norm in training mode (the batch's
// mean and biased variance per channel, two passes), residual joins, the
// mean negative log-likelihood of log-softmax, the backward pass (ReLU
// masks where the output is > 0, max pooling routed to the first maximum of
// each window, as PyTorch's CPU max_pool2d, batch-norm's backward with its
// batch-statistics terms, a join's gradient to both of its inputs), and SGD
// with momentum. The oracle for the fp32 step; the tests hold it against
// central finite differences of its own loss, and against PyTorch's
// autograd (models/fashion-mnist/<net>.train-reference.safetensors).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/nn/data/augment.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train_params.h"
#include "reference/compare.h"

namespace dlb::ref {

// One vector per trainable tensor, in nn::trainable_params(net) order.
using Params = std::vector<std::vector<double>>;

// The network's parameters, widened to double.
Params train_params(const nn::Network& net);

struct TrainGradients {
  double loss = 0;               // mean over the batch
  Params grads;                  // d loss / d parameter
  // The same backward pass on magnitudes: |W| for every weight, |x| for the
  // input and every activation, |softmax - onehot| / batch at the top, the
  // ReLU masks and pool routes of the real pass. Each element is the sum of
  // the magnitudes of the terms whose sum is that gradient element (through
  // the whole chain): what its rounding errors scale with. See
  // tests/test_train.cpp for the bound built on it.
  Params magnitudes;
  std::vector<double> log_probs;  // [batch, classes]
  // Per layer, for a conv with batch-norm (empty otherwise): the batch's
  // mean and biased variance per channel (over N, H, W).
  std::vector<std::vector<double>> batch_mean, batch_var;
  // What their rounding errors scale with (gradients() only): per channel,
  // the mean over the batch of the conv output's magnitude m_z (the sum of
  // |w| |x| over its terms), and 2 mean(|z - mean| (m_z + that mean)), the
  // first-order sensitivity of the variance to errors of that size.
  std::vector<std::vector<double>> batch_mean_scale, batch_var_scale;
};

// x: [batch, c, h, w], labels: [batch]. Throws dlb::Error for sizes that do
// not match, or what nn::trainable_params rejects.
TrainGradients gradients(const nn::Network& net, const Params& p, std::span<const float> x,
                         std::span<const std::uint8_t> labels, std::int64_t batch);

// The forward pass alone: the loss, log-probabilities and batch
// statistics of `gradients`, without gradients.
TrainGradients forward(const nn::Network& net, const Params& p, std::span<const float> x,
                       std::span<const std::uint8_t> labels, std::int64_t batch);

// Batch-norm's running statistics per layer (empty for a layer without).
struct RunningStats {
  std::vector<std::vector<double>> mean, var;
};
// The network's (the committed running_mean, running_var).
RunningStats running_stats(const nn::Network& net);
// One training-mode forward's update, as nn.BatchNorm2d's: running =
// (1 - momentum) running + momentum batch, running_var with the unbiased
// variance (batch_var M / (M - 1), M = batch oh ow).
void update_running_stats(const nn::Network& net, RunningStats& s, const TrainGradients& g, std::int64_t batch);

// The loss alone (the forward pass): what finite differences perturb.
double loss(const nn::Network& net, const Params& p, std::span<const float> x, std::span<const std::uint8_t> labels,
            std::int64_t batch);

// Gradients against the reference, per tensor, by compare_scaled's rule
// (reference/compare.h): each tensor's error relative to its largest
// magnitude, max_i |got_i - grads_i| / max_i magnitudes_i (the normwise form
// of nn::gradient_tolerance's bound), held to `tolerance`. `got`: one span
// per tensor in trainable_params order. `first` begins "gradients relative
// to their magnitudes: " and names every tensor over the bound.
Comparison compare_gradients(const std::vector<nn::TrainParam>& params, const std::vector<std::span<const float>>& got,
                             const TrainGradients& ref, double tolerance);
// The same with a bound per tensor (`tolerances`, one per tensor in
// trainable_params order: nn::TrainVariant::tensor_tolerances); the
// Comparison's tolerance is the widest.
Comparison compare_gradients(const std::vector<nn::TrainParam>& params, const std::vector<std::span<const float>>& got,
                             const TrainGradients& ref, std::span<const double> tolerances);

// torch.optim.SGD's update in double: v = momentum v + (g + wd p); p -= lr v.
void sgd_update(Params& p, Params& velocity, const Params& grads, const nn::Sgd& sgd);

// nn::load_batch's batch the plain way: each image normalized as the
// network's input is defined, (p / 255 - mean) / std in float (PyTorch's
// ToTensor and Normalize), centred in the h x w input with zeros around it,
// then zero-padded by augment.pad, the h x w window at the image's (dy, dx)
// (nn::augment_of's draw) taken and flipped where it says. [n, c, h, w].
// Its own loops: nn::network_input and the loader are what it checks.
std::vector<double> augmented_batch(const nn::Dataset& data, std::span<const std::int64_t> indices,
                                    const nn::BatchFormat& format, const nn::Augment& augment, std::uint64_t seed);

}  // namespace dlb::ref
