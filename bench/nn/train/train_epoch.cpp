// train_epoch: one epoch of Fashion-MNIST with the training step
// (kernels/nn/train/epoch.h), from the fresh start PyTorch's reference epoch used
// (scripts/train.py --epoch-reference), its loss curve beside PyTorch's,
// window by window, and the test accuracy after it. Issue 35.
//
//   build/train_epoch [--network=mnist_cnn] [--impl=cpu_eigen|...|gpu_cudnn_graph] [--workers=N]
//                     [--window=50]
//                     [--steps=N] [--augment] [--lr=X] [--momentum=X] [--losses=FILE.json]
//   build/train_epoch --list_impls
//
// --impl takes the rows of the training table
// (kernels/nn/train/train_variants.h) this build has, CPU and GPU (a GPU row
// needs a CUDA device; without one the error says so); --list_impls prints
// every row, one a line: the name and the device.
//
// The configuration is the reference's (batch 64, SGD lr 0.01 momentum 0.9,
// seed 35, no augmentation); --steps runs the first N steps only (N >= 1;
// without --steps the whole epoch runs), --augment
// crops (padding 4) and flips as the loader can (then no PyTorch column: the
// reference has no augmentation), as do --lr and --momentum other than the
// reference's (to see what the comparison detects), and a training set
// other than the reference's (DLB_FASHION_MNIST_DIR holding fewer images, as
// the GPU kit's). --workers: loader threads preparing
// batches ahead (0: in the calling thread). --losses writes every step's
// loss, the test accuracy and loss, the seconds and images/s as JSON. --network takes the networks that have a
// PyTorch epoch reference in the models folder (scripts/train.py
// --epoch-reference writes mnist_cnn's and mnist_lenet's). Exit 0 on
// success, 2 on bad arguments or input files (with a message).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "bench/cli.h"
#include "kernels/common/error.h"
#include "kernels/common/gpu.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/epoch.h"
#include "kernels/nn/model/network.h"
#include "kernels/nn/train/train_variants.h"

namespace {

std::string usage() {
  std::string impls;
  for (const auto& row : dlb::nn::train_variants()) impls.append(impls.empty() ? "" : "|").append(row.name);
  return "usage: train_epoch [--network=mnist_cnn|mnist_lenet] [--impl=" + impls + "] [--workers=N] "
         "[--window=N] "
         "[--steps=N] [--augment] [--lr=X] [--momentum=X] [--losses=FILE.json]\n"
         "       train_epoch --list_impls\n"
         "  --steps=N     the first N steps (N >= 1); without it, the whole epoch\n"
         "  --list_impls  every row of the training table, one a line: name and device (a gpu row needs a CUDA device)";
}

// The networks train_epoch runs: those with a PyTorch epoch reference to
// start from and compare with.
std::vector<std::string> networks_with_a_reference() {
  std::vector<std::string> out;
  for (const std::string_view n : dlb::nn::network_names())
    if (std::filesystem::exists(dlb::nn::epoch_reference_path(n))) out.emplace_back(n);
  return out;
}

void require_network(const std::string& network) {
  const std::vector<std::string> runs = networks_with_a_reference();
  std::string list;
  for (const auto& n : runs) list.append(list.empty() ? "" : ", ").append(n);
  if (list.empty()) list = "none: no <network>.epoch-reference.json in " + dlb::nn::models_dir();
  for (const auto& n : runs)
    if (n == network) return;
  bool known = false;
  for (const std::string_view n : dlb::nn::network_names()) known = known || n == network;
  if (known)
    throw dlb::Error("--network=" + network + ": no PyTorch epoch reference to start from and compare with ('" +
                     dlb::nn::epoch_reference_path(network) +
                     "' does not exist; scripts/train.py --epoch-reference writes mnist_cnn's and mnist_lenet's); "
                     "train_epoch runs " + list);
  throw dlb::Error("--network=" + network + ": unknown network; train_epoch runs " + list);
}

double parse_real(std::string_view flag, std::string_view text) {
  const std::string s(text);
  std::size_t end = 0;
  double v = -1;
  try {
    v = std::stod(s, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end != s.size() || !(v >= 0) || !std::isfinite(v))
    throw dlb::Error(std::string(flag) + " needs a non-negative number, got '" + s + "'");
  return v;
}

int run(int argc, char** argv) {
  std::string network = "mnist_cnn", impl = "cpu_eigen", losses_path;
  long long workers = 0, window = 50, steps = 0;
  bool augment = false, steps_given = false;
  double lr = -1, momentum = -1;
  bool list_impls = false;
  const auto count = [](long long& to, const char* flag) {
    return [&to, flag](std::string_view v) { to = dlb::cli::parse_count(flag, v); };
  };
  const auto real = [](double& to, const char* flag) { return [&to, flag](std::string_view v) { to = parse_real(flag, v); }; };
  if (!dlb::cli::parse_flags(argc, argv,
                             {{"--list_impls", [&](std::string_view) { list_impls = true; }, false},
                              {"--network", [&](std::string_view v) { network = v; }},
                              {"--impl", [&](std::string_view v) { impl = v; }},
                              {"--workers", count(workers, "--workers")},
                              {"--window", count(window, "--window")},
                              {"--steps", [&](std::string_view v) {
                                 steps = dlb::cli::parse_count("--steps", v);
                                 steps_given = true;
                               }},
                              {"--losses", [&](std::string_view v) { losses_path = v; }},
                              {"--lr", real(lr, "--lr")},
                              {"--momentum", real(momentum, "--momentum")},
                              {"--augment", [&](std::string_view) { augment = true; }, false}},
                             usage()))
    return 0;
  if (list_impls) {
    for (const auto& row : dlb::nn::train_variants())
      std::printf("%s %s\n", std::string(row.name).c_str(), std::string(dlb::device_name(row.device)).c_str());
    return 0;
  }
  const dlb::nn::TrainVariant& row = dlb::nn::train_variant(impl, "--impl");
  if (window < 1) throw dlb::Error("--window needs at least 1 step");
  if (row.device == dlb::Device::gpu && dlb::gpu_count() == 0)
    throw dlb::Error("--impl=" + impl + " runs on a GPU, and this machine has no CUDA device");
  if (workers > 64) throw dlb::Error("--workers: " + std::to_string(workers) + " loader threads is too many (64 at most)");
  require_network(network);
  const dlb::nn::Network& net = dlb::nn::network(network);
  const dlb::nn::EpochReference ref = dlb::nn::load_epoch_reference(dlb::nn::epoch_reference_path(network));
  // 0 is the epoch's own "all steps" internally; on the command line it
  // would run the whole epoch while asking for none.
  if (steps_given && steps == 0)
    throw dlb::Error("--steps=0: give at least 1 step, or leave --steps out for the whole epoch (" +
                     std::to_string(ref.losses.size()) + " steps)");
  dlb::nn::EpochConfig config = ref.config;
  config.impl = std::string(row.name);
  config.workers = static_cast<int>(workers);
  config.steps = steps;
  if (augment) config.augment = {4, true};
  if (lr >= 0) config.sgd.lr = lr;
  if (momentum >= 0) config.sgd.momentum = momentum;
  const auto& train = dlb::nn::fashion_mnist_train();
  const auto& test = dlb::nn::fashion_mnist_test();
  // PyTorch's column only where its epoch is this one: the same
  // hyperparameters and the same training set (the order is a permutation
  // of its images: the GPU kit carries only the first of them).
  const bool same_data = train.n == ref.train_images;
  const bool compare = !augment && same_data && config.sgd.lr == ref.config.sgd.lr &&
                       config.sgd.momentum == ref.config.sgd.momentum;
  if (!same_data)
    std::printf("no PyTorch column: its epoch ran over %lld training images, this one over %lld\n",
                static_cast<long long>(ref.train_images), static_cast<long long>(train.n));
  std::printf("train_epoch: %s, %s, batch %lld, SGD lr %g momentum %g, seed %llu, %s, %d loader workers\n",
              network.c_str(), impl.c_str(), static_cast<long long>(config.batch), config.sgd.lr,
              config.sgd.momentum, static_cast<unsigned long long>(config.init_seed),
              augment ? "crop (pad 4) + flip" : "no augmentation", config.workers);
  if (compare)
    std::printf("PyTorch: %s (torch %s, %d threads, the same start, order and hyperparameters)\n", ref.path.c_str(),
                ref.torch.c_str(), ref.threads);
  std::printf("%-13s %12s %12s %12s\n", "steps", "loss (ours)", compare ? "loss (torch)" : "", compare ? "difference" : "");
  double sum = 0;
  std::int64_t in_window = 0;
  const auto on_step = [&](std::int64_t s, double loss) {
    sum += loss, ++in_window;
    const std::int64_t total = steps > 0 ? steps : static_cast<std::int64_t>(ref.losses.size());
    if (in_window < window && s + 1 < total) return;
    const std::int64_t first = s + 1 - in_window;
    const double ours = sum / static_cast<double>(in_window);
    const std::string span = std::to_string(first) + "-" + std::to_string(s);
    if (compare && s < static_cast<std::int64_t>(ref.losses.size())) {
      double theirs = 0;
      for (std::int64_t k = first; k <= s; ++k) theirs += ref.losses[static_cast<std::size_t>(k)];
      theirs /= static_cast<double>(in_window);
      std::printf("%-13s %12.4f %12.4f %+12.4f\n", span.c_str(), ours, theirs, ours - theirs);
    } else {
      std::printf("%-13s %12.4f\n", span.c_str(), ours);
    }
    std::fflush(stdout);
    sum = 0, in_window = 0;
  };
  const dlb::nn::EpochResult r = dlb::nn::train_epoch(net, train, test, config, on_step);
  if (compare && steps == 0) {
    // PyTorch's accuracy as the test holds ours to it: the mean of its runs
    // (on ref.threads threads and on 1: rounding alone moves one run's).
    const double theirs = ref.mean_test_accuracy();
    std::printf("test accuracy: ours %.4f, PyTorch %.4f (%+.2f points; the mean of its %zu runs, %.4f on %d threads); "
                "test loss: ours %.4f, PyTorch %.4f\n",
                r.test_accuracy, theirs, 100 * (r.test_accuracy - theirs), 1 + ref.other_runs.size(),
                ref.test_accuracy, ref.threads, r.test_loss, ref.test_loss);
  }
  else
    std::printf("test accuracy: %.4f; test loss: %.4f\n", r.test_accuracy, r.test_loss);
  const double images = static_cast<double>(r.losses.size() * static_cast<std::size_t>(config.batch));
  if (r.gpu)
    std::printf("time: %.2f s for %zu steps (%.0f images/s): load %.2f s (host), H2D %.3f s (copy stream, beside "
                "the steps), GPU steps %.3f s\n",
                r.seconds, r.losses.size(), images / r.seconds, r.load_seconds, r.h2d_seconds, r.step_seconds);
  else
    std::printf("time: %.1f s for %zu steps (%.0f images/s): load %.2f s, forward %.1f s, backward %.1f s, "
                "optimizer %.2f s\n",
                r.seconds, r.losses.size(), images / r.seconds, r.load_seconds, r.forward_seconds,
                r.backward_seconds, r.optimizer_seconds);
  if (!losses_path.empty()) {
    std::ofstream out(losses_path);
    if (!out) throw dlb::Error("cannot write '" + losses_path + "'");
    out << "{\"network\": \"" << network << "\", \"impl\": \"" << impl << "\", \"augment\": " << (augment ? "true" : "false")
        << ", \"test_accuracy\": " << r.test_accuracy << ", \"test_loss\": " << r.test_loss
        << ", \"seconds\": " << r.seconds << ", \"images_per_second\": " << images / r.seconds << ", \"losses\": [";
    char buf[32];
    for (std::size_t i = 0; i < r.losses.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.9g", r.losses[i]);
      out << (i ? ", " : "") << buf;
    }
    out << "]}\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlb::cli::main_reporting_errors("train_epoch", run, argc, argv); }
