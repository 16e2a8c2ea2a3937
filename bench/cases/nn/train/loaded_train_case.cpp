#include "bench/cases/nn/train/loaded_train_case.h"

#include <string>

#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/epoch.h"
#include "reference/nn/train/train.h"

namespace dlb {
namespace {

constexpr std::uint64_t kSeed = 20261126;  // LoadCase's
constexpr nn::Augment kAugment{4, true};

}  // namespace

LoadedTrainCase::LoadedTrainCase(std::string_view network, std::int64_t batch, const nn::TrainVariant& row,
                                 int workers)
    : net_(nn::network(network)), data_(nn::fashion_mnist_train()), batch_(batch), row_(row), workers_(workers) {
  format_ = {net_.c, net_.h, net_.w, net_.input_mean, net_.input_std};
  DLB_REQUIRE(batch >= 1 && batch <= data_.n, "training batch " + std::to_string(batch) + " out of the training set");
  order_ = nn::epoch_order(kSeed, data_.n);
  step_ = row.make(net_, batch, nn::Sgd{});
}

std::unique_ptr<nn::BatchLoader> LoadedTrainCase::loader() const {
  return std::make_unique<nn::BatchLoader>(data_, order_, batch_, format_, kAugment, kSeed, workers_);
}

ref::Comparison LoadedTrainCase::validate() {
  // The first batch as the loader hands it out.
  const auto loading = loader();
  const nn::BatchLoader::Batch b = loading->next();
  const std::span<const std::int64_t> first(order_.data(), static_cast<std::size_t>(batch_));
  const std::span<const float> x(b.x, static_cast<std::size_t>(batch_ * net_.in_size()));
  const std::span<const std::uint8_t> labels(b.labels, static_cast<std::size_t>(batch_));
  ref::Comparison c = ref::compare(x, ref::augmented_batch(data_, first, format_, kAugment, kSeed), 0.0);
  for (std::int64_t i = 0; i < batch_; ++i)
    if (labels[static_cast<std::size_t>(i)] != data_.labels[static_cast<std::size_t>(first[static_cast<std::size_t>(i)])]) {
      c.ok = false;
      c.first = "the loader's label of batch position " + std::to_string(i) + " is wrong";
    }
  if (!c.ok) {
    c.first = "the loader's first batch: " + c.first;
    return c;
  }
  // The step's gradients on it.
  const std::unique_ptr<nn::TrainStep> made = row_.make(net_, batch_, nn::Sgd{});
  nn::TrainStep& fresh = *made;
  fresh.forward(b.x, b.labels);
  fresh.backward();
  const auto expected =
      ref::gradients(net_, ref::train_params(net_), x, labels, batch_);
  std::vector<std::span<const float>> got;
  for (std::size_t j = 0; j < fresh.params().size(); ++j) got.push_back(fresh.grad(j));
  const std::size_t batch_checked = c.checked;
  c = ref::compare_gradients(fresh.params(), got, expected, row_.tensor_tolerances(net_, batch_));
  c.checked += batch_checked;
  c.first = "on the loader's first batch, " + c.first;
  return c;
}

}  // namespace dlb
