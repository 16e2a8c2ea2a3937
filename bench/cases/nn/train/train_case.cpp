#include "bench/cases/nn/train/train_case.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"
#include "reference/nn/train/train.h"

namespace dlb {

TrainCase::TrainCase(std::string_view network, std::int64_t batch, const nn::TrainVariant& row)
    : net_(nn::network(network)), batch_(batch), row_(row) {
  const nn::Dataset& data = nn::fashion_mnist_train();
  DLB_REQUIRE(batch >= 1 && batch <= data.n, "training batch " + std::to_string(batch) + " out of the training set");
  x_.resize(static_cast<std::size_t>(batch * net_.in_size()));
  nn::network_input(data, 0, batch, net_.input_mean, net_.input_std, net_.c, net_.h, net_.w, x_.data());
  labels_.assign(data.labels.begin(), data.labels.begin() + batch);
  step_ = row.make(net_, batch, nn::Sgd{});
}

ref::Comparison TrainCase::validate() {
  const std::unique_ptr<nn::TrainStep> made = row_.make(net_, batch_, nn::Sgd{});
  nn::TrainStep& fresh = *made;
  fresh.forward(x_.data(), labels_.data());
  fresh.backward();
  const auto expected = ref::gradients(net_, ref::train_params(net_), x_, labels_, batch_);
  std::vector<std::span<const float>> got;
  for (std::size_t j = 0; j < fresh.params().size(); ++j) got.push_back(fresh.grad(j));
  // cpu_onednn's counts its fp32 batch-norm sums, cpu_onednn_wino's its Winograd sums per tensor.
  return ref::compare_gradients(fresh.params(), got, expected, row_.tensor_tolerances(net_, batch_));
}

double TrainCase::flops_per_step() const { return nn::train_step_flops(net_, batch_); }

constexpr std::uint64_t kLoadSeed = 20261126;
constexpr nn::Augment kLoadAugment{4, true};

LoadCase::LoadCase(std::string_view network, std::int64_t batch, int threads)
    : data_(nn::fashion_mnist_train()), batch_(batch), threads_(threads) {
  const nn::Network& net = nn::network(network);
  format_ = {net.c, net.h, net.w, net.input_mean, net.input_std};
  DLB_REQUIRE(batch >= 1 && batch <= data_.n, "loader batch " + std::to_string(batch) + " out of the training set");
  order_.resize(static_cast<std::size_t>(data_.n));
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  std::shuffle(order_.begin(), order_.end(), std::mt19937_64(kLoadSeed));
  x_.resize(static_cast<std::size_t>(batch * net.in_size()));
  labels_.resize(static_cast<std::size_t>(batch));
}

ref::Comparison LoadCase::validate() {
  const std::span<const std::int64_t> first(order_.data(), static_cast<std::size_t>(batch_));
  std::fill(x_.begin(), x_.end(), std::nanf(""));
  nn::load_batch(data_, first, format_, kLoadAugment, kLoadSeed, threads_, x_.data(), labels_.data());
  const auto expected = ref::augmented_batch(data_, first, format_, kLoadAugment, kLoadSeed);
  auto c = ref::compare(std::span<const float>(x_), expected, 0.0);
  for (std::int64_t i = 0; i < batch_; ++i)
    if (labels_[static_cast<std::size_t>(i)] != data_.labels[static_cast<std::size_t>(first[static_cast<std::size_t>(i)])]) {
      c.ok = false;
      c.first = "label of batch position " + std::to_string(i) + " wrong";
    }
  return c;
}

void LoadCase::run() {
  if (next_ + batch_ > data_.n) next_ = 0;
  const std::span<const std::int64_t> indices(order_.data() + next_, static_cast<std::size_t>(batch_));
  nn::load_batch(data_, indices, format_, kLoadAugment, kLoadSeed, threads_, x_.data(), labels_.data());
  next_ += batch_;
}

}  // namespace dlb
