// A training step fed by the loader (issue 35's breakdown per step): each
// step takes its batch from nn::BatchLoader (the epoch's permutation of the
// Fashion-MNIST training set, crop with padding 4 and horizontal flip, as
// LoadCase), loaded in the calling thread before the step (workers 0) or
// prepared ahead by `workers` loader threads while the step runs. The step
// starts from the committed weights, as TrainCase's.
//
// Validation (before any timing): the first batch of the order, loaded as
// the loader loads it, bit for bit the plain crop of network_input's images
// (ref::augmented_batch), and a fresh step's gradients on that batch against
// the double reference within nn::gradient_tolerance.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kernels/nn/data/batch_loader.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_variants.h"
#include "reference/compare.h"

namespace dlb {

class LoadedTrainCase {
 public:
  // `row`: a CPU row of nn::train_variants(), which outlives the case.
  LoadedTrainCase(std::string_view network, std::int64_t batch, const nn::TrainVariant& row, int workers);
  ref::Comparison validate();
  nn::TrainStep& step() { return *step_; }
  // A loader at the start of the order, its workers started.
  std::unique_ptr<nn::BatchLoader> loader() const;
  std::int64_t batch() const { return batch_; }
  const nn::Network& network() const { return net_; }

 private:
  const nn::Network& net_;
  const nn::Dataset& data_;
  nn::BatchFormat format_;
  std::int64_t batch_;
  const nn::TrainVariant& row_;
  int workers_;
  std::vector<std::int64_t> order_;
  std::unique_ptr<nn::TrainStep> step_;
};

}  // namespace dlb
