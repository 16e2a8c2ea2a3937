#include "kernels/nn/data/batch_loader.h"

#include <string>

#include "kernels/common/error.h"

namespace dlb::nn {

BatchLoader::BatchLoader(const Dataset& data, std::vector<std::int64_t> order, std::int64_t batch,
                         const BatchFormat& format, const Augment& augment, std::uint64_t seed, int workers,
                         int prefetch)
    : data_(data), order_(std::move(order)), batch_(batch), format_(format), augment_(augment), seed_(seed),
      workers_(workers) {
  DLB_REQUIRE(workers >= 0, "batch loader: negative worker count " + std::to_string(workers));
  DLB_REQUIRE(prefetch >= 1, "batch loader: prefetch " + std::to_string(prefetch) + " is below 1");
  DLB_REQUIRE(batch >= 1 && batch <= static_cast<std::int64_t>(order_.size()),
              "batch loader: batch " + std::to_string(batch) + " is not in 1.." + std::to_string(order_.size()) +
                  " (the order's length)");
  for (std::size_t i = 0; i < order_.size(); ++i)
    if (order_[i] < 0 || order_[i] >= data_.n)
      throw Error("batch loader: index " + std::to_string(order_[i]) + " (order position " + std::to_string(i) +
                  ") is outside the data set's " + std::to_string(data_.n) + " images (" + data_.source + ")");
  slots_ = workers == 0 ? 1 : static_cast<std::size_t>(workers) * static_cast<std::size_t>(prefetch);
  x_.assign(slots_, std::vector<float>(static_cast<std::size_t>(batch * format.c * format.h * format.w)));
  labels_.assign(slots_, std::vector<std::uint8_t>(static_cast<std::size_t>(batch)));
  filled_.assign(slots_, -1);
  // The first batch here: load_batch's checks (format against the data set)
  // throw in the caller's thread, not in a worker's. With workers it is
  // theirs to hand out; without, next() loads it again when asked for.
  load(0, 0);
  filled_[0] = 0;
  for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { work(w); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  free_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchLoader::load(std::int64_t number, std::size_t slot) {
  const std::int64_t first = (number % batches()) * batch_;
  const std::span<const std::int64_t> indices(order_.data() + first, static_cast<std::size_t>(batch_));
  load_batch(data_, indices, format_, augment_, seed_, 0, x_[slot].data(), labels_[slot].data());
}

void BatchLoader::work(int w) {
  // Batch 0 is loaded by the constructor.
  for (std::int64_t number = w == 0 ? workers_ : w;; number += workers_) {
    const auto slot = static_cast<std::size_t>(number % static_cast<std::int64_t>(slots_));
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // The slot's previous batch (number - slots) must have been released.
      free_.wait(lock, [&] { return stop_ || number < released_ + static_cast<std::int64_t>(slots_); });
      if (stop_) return;
    }
    try {
      load(number, slot);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
      ready_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      filled_[slot] = number;
    }
    ready_.notify_all();
  }
}

BatchLoader::Batch BatchLoader::next() {
  const std::int64_t number = next_;
  std::size_t slot = 0;
  if (workers_ == 0) {
    load(number, 0);  // every batch when asked for, the first one too (the constructor's was a check)
  } else {
    slot = static_cast<std::size_t>(number % static_cast<std::int64_t>(slots_));
    std::unique_lock<std::mutex> lock(mutex_);
    released_ = number;  // the previous batch's buffer may be refilled
    free_.notify_all();
    ready_.wait(lock, [&] { return error_ != nullptr || filled_[slot] == number; });
    if (error_ != nullptr) std::rethrow_exception(error_);
  }
  ++next_;
  return {x_[slot].data(), labels_[slot].data(), number};
}

}  // namespace dlb::nn
