// One epoch of Fashion-MNIST with the training step against PyTorch's from
// the same start (kernels/nn/train/epoch.h, issue 35), and the batch loader that
// runs beside the step (kernels/nn/data/batch_loader.h).
//
// PyTorch's side is committed: models/fashion-mnist/<net>.epoch-reference.json,
// written by scripts/train.py --epoch-reference (no PyTorch in CI). Checked:
//   - the shared start: our generator's fresh parameters and order against
//     the values PyTorch's side drew (scripts/dlbench/epoch.py);
//   - the first step's loss against PyTorch's, to the forward's fp32 bound;
//   - the whole epoch: the test accuracy within 0.5 point of PyTorch's (the
//     issue's criterion; PyTorch's: the mean of its runs on 1 and 2 threads)
//     and the loss curve, in windows of 100 steps, within
//     kWindowLossTolerance (derived below from measured spreads);
//   - the loader: batches the same at 0, 1, 2 workers, in order, bit for bit
//     load_batch's; bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/common/error.h"
#include "kernels/nn/data/batch_loader.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/epoch.h"
#include "kernels/nn/train/train_variants.h"
#include "tests/expect_error.h"
#include "tests/sanitizer.h"

namespace dlb {
namespace {

constexpr double kU = 0x1p-24;  // fp32's unit roundoff

using test::expect_error;

TEST(EpochGenerator, Splitmix64IsTheReferenceOne) {
  // The first outputs of Vigna's splitmix64.c from state 0 (its generator
  // adds the constant before mixing, as ours does on x, x + c, ...).
  EXPECT_EQ(nn::splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(nn::splitmix64(0x9E3779B97F4A7C15ull), 0x6E789E6AA1B965F4ull);
}

// Our fresh parameters and order against what PyTorch's side drew: the first
// values exactly (the generator is integer arithmetic and correctly rounded
// double operations), each tensor's sum (in double, summed in another order
// by torch) within the worst case of recursive summation, (n - 1) 2^-53
// sum |x| <= (n - 1) 2^-53 n max|x|, and the first indices of the order.
TEST(EpochGenerator, MatchesPyTorchsStart) {
  for (const std::string_view name : {"mnist_cnn", "mnist_lenet"}) {
    SCOPED_TRACE(std::string(name));
    const nn::Network& net = nn::network(name);
    const nn::EpochReference ref = nn::load_epoch_reference(nn::epoch_reference_path(name));
    const auto made = nn::train_variant("cpu_eigen", Device::cpu, "row").make(net, 1, ref.config.sgd);
    nn::TrainStep& step = *made;
    nn::init_params(step, net, ref.config.init_seed);
    ASSERT_EQ(ref.init.size(), step.params().size());
    for (const auto& want : ref.init) {
      SCOPED_TRACE(want.name);
      const auto& params = step.params();
      const auto it = std::ranges::find(params, want.name, &nn::TrainParam::name);
      ASSERT_NE(it, params.end());
      const auto values = step.param(static_cast<std::size_t>(it - params.begin()));
      const double bound = 1.0 / std::sqrt(static_cast<double>(nn::fan_in(net, *it)));
      double sum = 0, largest = 0;
      for (const float v : values) {
        sum += v, largest = std::max(largest, std::abs(static_cast<double>(v)));
        ASSERT_LE(std::abs(v), bound);
      }
      for (std::size_t i = 0; i < want.first.size(); ++i) EXPECT_EQ(values[i], want.first[i]) << "element " << i;
      const double n = static_cast<double>(values.size());
      EXPECT_NEAR(sum, want.sum, (n - 1) * 0x1p-53 * n * largest);
      // Uniform in (-bound, bound): the largest value is near the bound.
      EXPECT_GT(largest, 0.9 * bound);
    }
    const auto order = nn::epoch_order(ref.config.order_seed, ref.train_images);
    ASSERT_GE(order.size(), ref.order_head.size());
    for (std::size_t i = 0; i < ref.order_head.size(); ++i) EXPECT_EQ(order[i], ref.order_head[i]) << "position " << i;
    auto sorted = order;
    std::ranges::sort(sorted);
    for (std::size_t i = 0; i < sorted.size(); ++i) ASSERT_EQ(sorted[i], static_cast<std::int64_t>(i));
  }
}

// The first step's loss (the forward pass from the fresh start on the first
// batch of the order) against PyTorch's, to the forward pass's fp32 bound
// (1e-5 relative, as tests/test_train.cpp holds the loss): it validates the
// shared start and order before the epoch diverges.
TEST(Epoch, FirstStepMatchesPyTorch) {
  for (const std::string_view name : {"mnist_cnn", "mnist_lenet"}) {
    SCOPED_TRACE(std::string(name));
    const nn::EpochReference ref = nn::load_epoch_reference(nn::epoch_reference_path(name));
    nn::EpochConfig config = ref.config;
    config.steps = 1;
    config.evaluate = false;
    const auto r = nn::train_epoch(nn::network(name), nn::fashion_mnist_train(), nn::fashion_mnist_test(), config);
    ASSERT_EQ(r.losses.size(), 1u);
    EXPECT_NEAR(r.losses[0], ref.losses[0], 1e-5 * ref.losses[0]);
  }
}

// The loss curve's tolerance: the largest difference allowed between our and
// PyTorch's mean loss over a window of kWindow steps (10 windows, the last
// one of 37 steps). Two fp32 trainings from the same start on the same
// batches diverge: a rounding difference in one step changes the next
// step's parameters, and the difference grows (chaotically) until the two
// runs are two nearby trajectories whose losses on the same batch differ
// by the noise of training itself. The tolerance is that noise, measured on
// pairs of runs doing the same math with different rounding: our step with
// Eigen and with oneDNN on 1 and 2 OpenMP threads (the conv weight
// gradients' per-thread partial sums, the GEMMs' blocking), PyTorch on 1 and
// 2 threads (scripts/train.py --epoch-reference writes both). Over those 7
// same-library pairs (every pair of our 4 runs, PyTorch's pair), the
// window means differ by
//     mnist_cnn:   rms 1.3e-3 over windows 2..9 (1e-4 and less in the first
//                  two: the runs have not diverged yet), largest 3.4e-3
//     mnist_lenet: rms 0.9e-3, largest 2.8e-3
// and ours against PyTorch's (8 pairs) by rms 1.7e-3 (largest 3.6e-3) and
// 0.8e-3 (2.5e-3): the same spread, as it should be if the two steps differ
// by rounding alone. Taken as a zero-mean normal variable with sigma = 1.3e-3
// (the larger rms), a window exceeds 5 sigma = 6.5e-3 with probability
// 6e-7. What it detects: the same epoch with lr 0.011 instead of 0.01 (10%)
// differs from PyTorch's by 3.2e-2 in the first window and 5e-3 to 1e-2 in
// the others (six of ten windows over), with momentum 0.85 instead of 0.9
// by 1.9e-2 to 4.8e-2 in nine. Our step is not bitwise reproducible from
// run to run either: two runs on the same thread count part after a few
// steps, and with address-space randomization off (setarch -R) they are
// identical, so the heap's addresses change some rounding (alignment-
// dependent code paths in the GEMM libraries, likely): each run of this
// test is a fresh sample of the spread above.
constexpr std::int64_t kWindow = 100;
constexpr double kWindowLossTolerance = 6.5e-3;
// The test accuracy: the criterion, 0.5 point of PyTorch's. A single
// run's accuracy after one epoch moves with rounding alone (mnist_cnn:
// PyTorch 87.38% on 2 threads, 87.85% on 1; ours 87.50 to 87.71% with
// Eigen, oneDNN, 1 and 2 threads), so PyTorch's is the mean of its runs on
// 1 and 2 threads (EpochReference::mean_test_accuracy): ours were within
// 0.12 point of it (mnist_lenet: 0.16).
constexpr double kAccuracyPoints = 0.5;  // the criterion

void expect_epoch_matches(std::string_view name, std::string_view impl) {
  const nn::EpochReference ref = nn::load_epoch_reference(nn::epoch_reference_path(name));
  nn::EpochConfig config = ref.config;
  config.impl = std::string(impl);
  const auto r = nn::train_epoch(nn::network(name), nn::fashion_mnist_train(), nn::fashion_mnist_test(), config);
  ASSERT_EQ(r.losses.size(), ref.losses.size());
  EXPECT_NEAR(100 * r.test_accuracy, 100 * ref.mean_test_accuracy(), kAccuracyPoints);
  const auto ours = nn::window_means(r.losses, kWindow), theirs = nn::window_means(ref.losses, kWindow);
  for (std::size_t w = 0; w < ours.size(); ++w)
    EXPECT_NEAR(ours[w], theirs[w], kWindowLossTolerance) << "steps " << w * kWindow << ".." << (w + 1) * kWindow - 1;
}

// Each GEMM library on one network: mnist_cnn with oneDNN (the faster: about
// 16 s on 2 cores in a Release build, 21 s with Eigen), mnist_lenet with
// Eigen (about 6 s). The sanitizer build runs the first step and the loader
// instead: a whole epoch there takes minutes.
TEST(Epoch, MnistCnnMatchesPyTorch) {
  DLB_SKIP_VOLUME_UNDER_SANITIZERS("Epoch.FirstStepMatchesPyTorch and the loader's tests");
#if DLB_HAVE_ONEDNN
  expect_epoch_matches("mnist_cnn", "cpu_onednn");
#else
  expect_epoch_matches("mnist_cnn", "cpu_eigen");
#endif
}

TEST(Epoch, MnistLenetMatchesPyTorch) {
  DLB_SKIP_VOLUME_UNDER_SANITIZERS("Epoch.FirstStepMatchesPyTorch and the loader's tests");
  expect_epoch_matches("mnist_lenet", "cpu_eigen");
}

TEST(Epoch, BadInput) {
  const nn::Network& net = nn::network("mnist_lenet");
  const auto& train = nn::fashion_mnist_train();
  const auto& test = nn::fashion_mnist_test();
  nn::EpochConfig config;
  config.batch = 0;
  expect_error([&] { nn::train_epoch(net, train, test, config); }, "batch 0");
  config.batch = 64;
  config.steps = 938;
  expect_error([&] { nn::train_epoch(net, train, test, config); }, "has 937");
  expect_error([] { nn::epoch_order(1, 0); }, "0 images");
  expect_error([] { nn::load_epoch_reference("no/such/file.json"); }, "no/such/file.json");
  expect_error([] { nn::window_means(std::vector<double>{1.0}, 0); }, "window");
}

// The loader: the same batches, in order, at 0, 1 and 2 workers and prefetch
// 1 and 2, bit for bit load_batch's, over more than one pass of the order.
TEST(BatchLoader, BatchesAreLoadBatchsInOrder) {
  const auto& data = nn::fashion_mnist_train();
  const nn::BatchFormat format{1, 28, 28, 0.286f, 0.353f};
  const nn::Augment augment{4, true};
  std::vector<std::int64_t> order = nn::epoch_order(7, data.n);
  order.resize(10 * 16 + 5);  // 10 batches of 16 a pass, the 5 left dropped
  std::vector<float> want(16 * 28 * 28);
  std::vector<std::uint8_t> want_labels(16);
  for (const int workers : {0, 1, 2})
    for (const int prefetch : {1, 2}) {
      SCOPED_TRACE("workers " + std::to_string(workers) + ", prefetch " + std::to_string(prefetch));
      nn::BatchLoader loader(data, order, 16, format, augment, 9, workers, prefetch);
      ASSERT_EQ(loader.batches(), 10);
      for (std::int64_t b = 0; b < 25; ++b) {
        const auto got = loader.next();
        ASSERT_EQ(got.number, b);
        const std::span<const std::int64_t> indices(order.data() + (b % 10) * 16, 16);
        nn::load_batch(data, indices, format, augment, 9, 0, want.data(), want_labels.data());
        ASSERT_TRUE(std::equal(want.begin(), want.end(), got.x)) << "batch " << b;
        ASSERT_TRUE(std::equal(want_labels.begin(), want_labels.end(), got.labels)) << "batch " << b;
      }
    }
}

TEST(BatchLoader, BadInput) {
  const auto& data = nn::fashion_mnist_train();
  const nn::BatchFormat format{1, 28, 28, 0, 1};
  const std::vector<std::int64_t> order{0, 1, 2, 3};
  expect_error([&] { nn::BatchLoader(data, order, 5, format, {}, 0, 0); }, "batch 5");
  expect_error([&] { nn::BatchLoader(data, order, 0, format, {}, 0, 0); }, "batch 0");
  expect_error([&] { nn::BatchLoader(data, order, 2, format, {}, 0, -1); }, "negative worker count");
  expect_error([&] { nn::BatchLoader(data, order, 2, format, {}, 0, 1, 0); }, "prefetch 0");
  expect_error([&] { nn::BatchLoader(data, {0, 60000}, 2, format, {}, 0, 1); }, "index 60000 (order position 1)");
  expect_error([&] { nn::BatchLoader(data, order, 2, nn::BatchFormat{1, 20, 20, 0, 1}, {}, 0, 2); }, "smaller");
}

}  // namespace
}  // namespace dlb
