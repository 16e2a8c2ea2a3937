// One epoch of training with nn::TrainStep (issue 35), from a start both
// sides can make: the parameters drawn afresh from a counter-based
// generator, the batches in a permutation drawn from it, so that PyTorch's
// step (scripts/train.py --epoch-reference, scripts/dlbench/epoch.py) and
// ours begin from the same weights and see the same batches, with no
// weights file between them.
//
// The generator: splitmix64 (Steele, Lea and Flood; data/augment.h), the
// one the loader's augmentation draws from, keyed by a seed and a counter.
//
//   init:  parameter j (state_dict order), element i:
//            r = splitmix64(splitmix64(seed + j) ^ i)
//            u = (r >> 40) 2^-24                 (24 bits, uniform in [0, 1))
//            value = float((2u - 1) / sqrt(fan_in))   (in double, rounded once)
//          fan_in: a conv's c r r, an fc's inputs; its bias the same. The
//          bound is PyTorch's default for Conv2d and Linear
//          (kaiming_uniform_ with a = sqrt(5), and its bias init): 1/sqrt(fan_in).
//   order: Fisher-Yates over [0, n): for i = n-1 down to 1,
//            j = splitmix64(splitmix64(seed) ^ i) mod (i + 1), swap order[i], order[j]
//
// Every operation is an integer one or a correctly rounded IEEE double one,
// so NumPy computes the same bits.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/nn/data/augment.h"  // splitmix64
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/data/loader.h"
#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train.h"

namespace dlb::nn {


// The fresh value of element i of trainable tensor j (see above).
float init_value(std::uint64_t seed, std::size_t j, std::uint64_t i, std::int64_t fan_in);
// A conv's or an fc's fan_in for the tensor (weight or bias).
std::int64_t fan_in(const Network& net, const TrainParam& p);
// Overwrites every parameter of `step` with its fresh value (the step's
// momentum buffers are left: a new step has them at zero).
void init_params(TrainStep& step, const Network& net, std::uint64_t seed);

// The permutation of [0, n) (see above). Throws dlb::Error for n < 1.
std::vector<std::int64_t> epoch_order(std::uint64_t seed, std::int64_t n);

struct EpochConfig {
  std::int64_t batch = 64;
  // SGD as the bench cases and the training reference: lr 0.01, momentum 0.9.
  Sgd sgd{0.01, 0.9, 0.0};
  std::uint64_t init_seed = 35;   // issue 35
  std::uint64_t order_seed = 35;
  Augment augment{0, false};      // none: the comparison with PyTorch is without augmentation
  std::uint64_t augment_seed = 35;
  int workers = 0;                // loader threads (BatchLoader); 0: in the calling thread
  // The row of the training table (train_variants.h) whose step runs it: a
  // CPU row, or in a CUDA build a GPU row (on device 0; see train_epoch).
  std::string impl = "cpu_eigen";
  // Steps to run: 0 runs the whole epoch, n / batch steps (the last partial
  // batch dropped, as DataLoader's drop_last=True).
  std::int64_t steps = 0;
  bool evaluate = true;           // the test set's accuracy and loss after the steps
};

struct EpochResult {
  std::vector<double> losses;     // each step's mean loss over its batch
  double test_accuracy = 0;       // top-1 over the test set, in [0, 1]
  double test_loss = 0;           // mean over the test set
  double seconds = 0;             // the steps' wall time (not the evaluation)
  // The host's wall time in the loader; a CPU row's in each phase of its steps.
  double load_seconds = 0, forward_seconds = 0, backward_seconds = 0, optimizer_seconds = 0;
  // A GPU row's: the batches' copies to the device (CUDA events on the copy
  // stream, beside the steps) and the steps (events on the step's stream).
  bool gpu = false;
  double h2d_seconds = 0, step_seconds = 0;
};

// Trains a fresh `net` (init_params) for one epoch of `train` in
// epoch_order(order_seed) with the row's step, then evaluates it on `test`.
// on_step(step, loss) is called after each step (a GPU row: after the last
// step, for each in order: the GPU keeps the losses until then, so the host
// never waits for a step). Throws dlb::Error for a batch below 1 or above
// the training set, steps beyond the epoch, a GPU row without a device, or
// what the step and load_batch reject.
//
// A GPU row (GpuTrainStep; gpu_cudnn_graph: one CUDA graph per step) gets
// its batches from the same loader, each copied into page-locked memory and
// from there to the device on a second stream, into one of two device
// buffers: batch s+1's copy runs beside step s, and a buffer is reused once
// the step that read it (its backward reads the input too) has finished.
EpochResult train_epoch(const Network& net, const Dataset& train, const Dataset& test, const EpochConfig& config,
                        const std::function<void(std::int64_t, double)>& on_step = {});

// What PyTorch's epoch from the same start gave (scripts/train.py
// --epoch-reference): <models_dir>/<net>.epoch-reference.json.
struct EpochReference {
  std::string path, network, torch;
  int threads = 0;                 // PyTorch's thread count
  EpochConfig config;              // batch, sgd, seeds (augmentation: none)
  std::int64_t train_images = 0;
  struct Init {
    std::string name;
    std::vector<float> first;      // the tensor's first values
    double sum = 0;                // the sum of its values, in double
  };
  std::vector<Init> init;          // per trainable tensor (in name order)
  std::vector<std::int64_t> order_head;
  std::vector<double> losses;      // every step's
  std::int64_t test_images = 0;
  double test_accuracy = 0, test_loss = 0;
  // The same epoch on other thread counts ("other_runs": another rounding
  // of the same computation): their threads, losses and test accuracies.
  struct Run {
    int threads = 0;
    std::vector<double> losses;
    double test_accuracy = 0;
  };
  std::vector<Run> other_runs;
  // The mean test accuracy over this run and the other runs.
  double mean_test_accuracy() const;
};
std::string epoch_reference_path(std::string_view network);
// Throws dlb::Error naming the file and the field for a missing or
// malformed file.
EpochReference load_epoch_reference(const std::string& path);

// The mean of each run of `window` consecutive values (the last run shorter).
std::vector<double> window_means(std::span<const double> values, std::int64_t window);

}  // namespace dlb::nn
