// One network's training step at one batch size (kernels/nn/train/train.h): the
// committed weights, the first `batch` Fashion-MNIST training images and
// their labels (no augmentation), the prepared step. Validation (before any
// timing) runs forward and backward once on a step of its own and compares
// every parameter's gradient with the double-precision reference
// (reference/nn/train/train.h) within the row's bound (nn::TrainVariant::tolerance).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/nn/data/loader.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_variants.h"
#include "reference/compare.h"

namespace dlb {

class TrainCase {
 public:
  // `row`: a CPU row of nn::train_variants(), which outlives the case.
  TrainCase(std::string_view network, std::int64_t batch, const nn::TrainVariant& row);
  ref::Comparison validate();
  nn::TrainStep& step() { return *step_; }
  const nn::Network& network() const { return net_; }
  std::int64_t batch() const { return batch_; }
  const float* x() const { return x_.data(); }
  const std::uint8_t* labels() const { return labels_.data(); }
  // The arithmetic of one step (nn::train_step_flops).
  double flops_per_step() const;

 private:
  const nn::Network& net_;
  std::int64_t batch_;
  const nn::TrainVariant& row_;
  std::vector<float> x_;
  std::vector<std::uint8_t> labels_;
  std::unique_ptr<nn::TrainStep> step_;
};

// The data-loading phase of `network`'s step (kernels/nn/data/loader.h): batches
// of the Fashion-MNIST training set in the order of a seeded permutation
// (an epoch's access pattern), cropped with padding 4 and flipped, on
// `threads` loader threads (0: the calling thread). Validation compares the
// first batch with the plain crop of network_input's images, bit for bit.
class LoadCase {
 public:
  LoadCase(std::string_view network, std::int64_t batch, int threads);
  ref::Comparison validate();
  // The next batch of the permutation (wrapping around at its end).
  void run();
  std::int64_t batch() const { return batch_; }

 private:
  const nn::Dataset& data_;
  nn::BatchFormat format_;
  std::int64_t batch_;
  int threads_;
  std::vector<std::int64_t> order_;
  std::int64_t next_ = 0;
  std::vector<float> x_;
  std::vector<std::uint8_t> labels_;
};

}  // namespace dlb
