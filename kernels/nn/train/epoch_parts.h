// What the epoch's CPU loop (epoch.cpp) and GPU loop (epoch_gpu.cpp) share.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/nn/data/dataset.h"
#include "kernels/nn/model/network.h"
#include "kernels/nn/train/epoch.h"
#include "kernels/nn/train/train_variants.h"

namespace dlb::nn {

// The steps the configuration runs (all of the epoch's for steps = 0);
// throws dlb::Error for a batch or a step count the training set cannot give.
std::int64_t epoch_steps(const Dataset& train, const EpochConfig& config);

// The fresh values of trainable tensor j (init_value's, element by element).
std::vector<float> fresh_values(const Network& net, const TrainParam& p, std::uint64_t seed, std::size_t j);

// One forward of a step made for `count` images on the host's normalized
// images and labels: the mean loss and the log-probabilities [count, classes].
struct Evaluated {
  double loss = 0;
  std::vector<float> log_probs;
};
using EvalStep = std::function<Evaluated(const float* x, const std::uint8_t* labels)>;
// The test set through make(count)'s forward, in batches of up to 500 (and
// one more step made for the remainder): r.test_accuracy and r.test_loss.
void evaluate_test(const Network& net, const Dataset& test, const std::function<EvalStep(std::int64_t count)>& make,
                   EpochResult& r);

// train_epoch on a GPU row, `steps` steps (CUDA builds: epoch_gpu.cpp).
EpochResult train_epoch_gpu(const TrainVariant& row, const Network& net, const Dataset& train, const Dataset& test,
                            const EpochConfig& config, std::int64_t steps,
                            const std::function<void(std::int64_t, double)>& on_step);

}  // namespace dlb::nn
