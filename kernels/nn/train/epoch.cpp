#include "kernels/nn/train/epoch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/common/error.h"
#include "kernels/nn/data/batch_loader.h"
#include "kernels/nn/train/epoch_parts.h"
#include "kernels/nn/train/train_variants.h"

namespace dlb::nn {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

float init_value(std::uint64_t seed, std::size_t j, std::uint64_t i, std::int64_t fan) {
  const std::uint64_t r = splitmix64(splitmix64(seed + j) ^ i);
  const double u = static_cast<double>(r >> 40) * 0x1p-24;  // exact: 24 bits
  return static_cast<float>((2.0 * u - 1.0) / std::sqrt(static_cast<double>(fan)));
}

std::int64_t fan_in(const Network& net, const TrainParam& p) {
  const Layer& l = net.layers.at(p.layer);
  return l.kind == LayerKind::conv ? l.c * l.window * l.window : l.in_size();
}

std::vector<float> fresh_values(const Network& net, const TrainParam& p, std::uint64_t seed, std::size_t j) {
  const std::int64_t fan = fan_in(net, p);
  std::vector<float> values(static_cast<std::size_t>(p.size()));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = init_value(seed, j, i, fan);
  return values;
}

void init_params(TrainStep& step, const Network& net, std::uint64_t seed) {
  const auto& params = step.params();
  for (std::size_t j = 0; j < params.size(); ++j) {
    const std::vector<float> values = fresh_values(net, params[j], seed, j);
    std::ranges::copy(values, step.param(j).begin());
  }
}

std::vector<std::int64_t> epoch_order(std::uint64_t seed, std::int64_t n) {
  DLB_REQUIRE(n >= 1, "epoch order: " + std::to_string(n) + " images");
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  const std::uint64_t key = splitmix64(seed);
  for (std::int64_t i = n - 1; i >= 1; --i) {
    const auto j = static_cast<std::int64_t>(splitmix64(key ^ static_cast<std::uint64_t>(i)) %
                                             static_cast<std::uint64_t>(i + 1));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

std::int64_t epoch_steps(const Dataset& train, const EpochConfig& config) {
  DLB_REQUIRE(config.batch >= 1 && config.batch <= train.n,
              "epoch: batch " + std::to_string(config.batch) + " is not in 1.." + std::to_string(train.n));
  const std::int64_t per_epoch = train.n / config.batch;
  DLB_REQUIRE(config.steps >= 0 && config.steps <= per_epoch,
              "epoch: " + std::to_string(config.steps) + " steps, an epoch of batch " + std::to_string(config.batch) +
                  " has " + std::to_string(per_epoch));
  return config.steps == 0 ? per_epoch : config.steps;
}

void evaluate_test(const Network& net, const Dataset& test, const std::function<EvalStep(std::int64_t count)>& make,
                   EpochResult& r) {
  const std::int64_t eval_batch = std::min<std::int64_t>(500, test.n), full = test.n / eval_batch;
  std::vector<float> x;
  std::int64_t correct = 0;
  double loss_sum = 0;
  const auto evaluate = [&](std::int64_t first, std::int64_t count, std::int64_t batches) {
    const EvalStep eval = make(count);
    x.resize(static_cast<std::size_t>(count * net.in_size()));
    for (std::int64_t k = 0; k < batches; ++k) {
      const std::int64_t at = first + k * count;
      network_input(test, at, count, net.input_mean, net.input_std, net.c, net.h, net.w, x.data());
      const std::uint8_t* labels = test.labels.data() + at;
      const Evaluated e = eval(x.data(), labels);
      loss_sum += e.loss * static_cast<double>(count);
      for (std::int64_t n = 0; n < count; ++n) {
        const float* row = e.log_probs.data() + n * net.classes;
        correct += std::max_element(row, row + net.classes) - row == labels[n];
      }
    }
  };
  evaluate(0, eval_batch, full);
  if (full * eval_batch < test.n) evaluate(full * eval_batch, test.n - full * eval_batch, 1);
  r.test_accuracy = static_cast<double>(correct) / static_cast<double>(test.n);
  r.test_loss = loss_sum / static_cast<double>(test.n);
}

EpochResult train_epoch(const Network& net, const Dataset& train, const Dataset& test, const EpochConfig& config,
                        const std::function<void(std::int64_t, double)>& on_step) {
  const std::int64_t steps = epoch_steps(train, config);
  const TrainVariant& row = train_variant(config.impl, "the epoch's implementation");
  if (row.device == Device::gpu) return train_epoch_gpu(row, net, train, test, config, steps, on_step);
  const std::unique_ptr<TrainStep> made = row.make(net, config.batch, config.sgd);
  TrainStep& step = *made;
  init_params(step, net, config.init_seed);
  const BatchFormat format{net.c, net.h, net.w, net.input_mean, net.input_std};
  BatchLoader loader(train, epoch_order(config.order_seed, train.n), config.batch, format, config.augment,
                     config.augment_seed, config.workers);
  EpochResult r;
  r.losses.reserve(static_cast<std::size_t>(steps));
  const double start = now();
  for (std::int64_t s = 0; s < steps; ++s) {
    const double t0 = now();
    const BatchLoader::Batch b = loader.next();
    const double t1 = now();
    const double loss = step.forward(b.x, b.labels);
    const double t2 = now();
    step.backward();
    const double t3 = now();
    step.update();
    const double t4 = now();
    r.load_seconds += t1 - t0, r.forward_seconds += t2 - t1, r.backward_seconds += t3 - t2,
        r.optimizer_seconds += t4 - t3;
    r.losses.push_back(loss);
    if (on_step) on_step(s, loss);
  }
  r.seconds = now() - start;
  if (!config.evaluate) return r;
  // The test set through the same forward with the trained parameters.
  std::unique_ptr<TrainStep> eval;
  evaluate_test(net, test, [&](std::int64_t count) -> EvalStep {
    eval = row.make(net, count, config.sgd);
    for (std::size_t j = 0; j < step.params().size(); ++j)
      std::ranges::copy(std::as_const(step).param(j), eval->param(j).begin());
    return [&](const float* x, const std::uint8_t* labels) {
      Evaluated e;
      e.loss = eval->forward(x, labels);
      const std::span<const float> lp = eval->log_probs();
      e.log_probs.assign(lp.begin(), lp.end());
      return e;
    };
  }, r);
  return r;
}

#if !DLB_HAVE_CUDNN
EpochResult train_epoch_gpu(const TrainVariant& row, const Network&, const Dataset&, const Dataset&,
                            const EpochConfig&, std::int64_t, const std::function<void(std::int64_t, double)>&) {
  throw Error("epoch: " + std::string(row.name) + " is a GPU row, and this build has no CUDA");
}
#endif

std::string epoch_reference_path(std::string_view network) {
  return models_dir() + "/" + std::string(network) + ".epoch-reference.json";
}

EpochReference load_epoch_reference(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw Error("epoch reference '" + path + "' cannot be read (scripts/train.py --epoch-reference writes it)");
  EpochReference r;
  r.path = path;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    r.network = j.at("network").get<std::string>();
    r.torch = j.at("torch").get<std::string>();
    r.threads = j.at("threads").get<int>();
    r.config.batch = j.at("batch").get<std::int64_t>();
    r.config.sgd = {j.at("lr").get<double>(), j.at("momentum").get<double>(), j.at("weight_decay").get<double>()};
    r.config.init_seed = j.at("init_seed").get<std::uint64_t>();
    r.config.order_seed = j.at("order_seed").get<std::uint64_t>();
    DLB_REQUIRE(j.at("augmentation").get<std::string>() == "none", "augmentation other than none");
    r.train_images = j.at("train_images").get<std::int64_t>();
    for (const auto& [name, v] : j.at("init_check").items())
      r.init.push_back({name, v.at("first").get<std::vector<float>>(), v.at("sum").get<double>()});
    r.order_head = j.at("order_head").get<std::vector<std::int64_t>>();
    r.losses = j.at("losses").get<std::vector<double>>();
    DLB_REQUIRE(static_cast<std::int64_t>(r.losses.size()) == j.at("steps").get<std::int64_t>(),
                "the number of losses is not 'steps'");
    r.test_images = j.at("test_images").get<std::int64_t>();
    r.test_accuracy = j.at("test_accuracy").get<double>();
    r.test_loss = j.at("test_loss").get<double>();
    for (const auto& run : j.at("other_runs")) {
      r.other_runs.push_back({run.at("threads").get<int>(), run.at("losses").get<std::vector<double>>(),
                              run.at("test_accuracy").get<double>()});
      DLB_REQUIRE(r.other_runs.back().losses.size() == r.losses.size(), "another run with a different step count");
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error("epoch reference '" + path + "': " + e.what());
  } catch (const Error& e) {
    throw Error("epoch reference '" + path + "': " + e.what());
  }
  return r;
}

double EpochReference::mean_test_accuracy() const {
  double sum = test_accuracy;
  for (const auto& run : other_runs) sum += run.test_accuracy;
  return sum / static_cast<double>(1 + other_runs.size());
}

std::vector<double> window_means(std::span<const double> values, std::int64_t window) {
  DLB_REQUIRE(window >= 1, "window of " + std::to_string(window) + " steps");
  std::vector<double> means;
  for (std::size_t i = 0; i < values.size(); i += static_cast<std::size_t>(window)) {
    const std::size_t end = std::min(values.size(), i + static_cast<std::size_t>(window));
    double sum = 0;
    for (std::size_t k = i; k < end; ++k) sum += values[k];
    means.push_back(sum / static_cast<double>(end - i));
  }
  return means;
}

}  // namespace dlb::nn
