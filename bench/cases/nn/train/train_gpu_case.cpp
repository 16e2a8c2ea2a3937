#include "bench/cases/nn/train/train_gpu_case.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/train/train_plan.h"
#include "kernels/nn/train/train.h"
#include "reference/nn/train/train.h"

namespace dlb {

const char* h2d_name(H2d mode) {
  switch (mode) {
    case H2d::pageable: return "pageable";
    case H2d::pinned: return "pinned";
    case H2d::overlap: return "overlap";
  }
  return "unknown";
}

namespace {

// The reference gradients of (network, batch) on its training batch, once
// per process: the three copy modes of a batch share them (at batch 256 the
// double-precision reference takes seconds).
const ref::TrainGradients& reference_for(const nn::Network& net, std::int64_t batch, const std::vector<float>& x,
                                         const std::vector<std::uint8_t>& labels) {
  static std::map<std::pair<std::string, std::int64_t>, ref::TrainGradients> cache;
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  const auto key = std::make_pair(net.name, batch);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, ref::gradients(net, ref::train_params(net), x, labels, batch)).first;
  return it->second;
}

}  // namespace

GpuTrainCase::GpuTrainCase(std::string_view network, std::int64_t batch, H2d mode, const nn::TrainVariant& row)
    : ctx_(Device::gpu), net_(nn::network(network)), batch_(batch), mode_(mode), row_(row), marks_(5) {
  const nn::Dataset& data = nn::fashion_mnist_train();
  DLB_REQUIRE(batch >= 1 && batch <= data.n, "training batch " + std::to_string(batch) + " out of the training set");
  x_.resize(static_cast<std::size_t>(batch * net_.in_size()));
  nn::network_input(data, 0, batch, net_.input_mean, net_.input_std, net_.c, net_.h, net_.w, x_.data());
  labels_.assign(data.labels.begin(), data.labels.begin() + batch);
  nn::check_labels(net_, labels_.data(), batch);
  x_pinned_ = PinnedBuffer<float>(x_.size());
  labels_pinned_ = PinnedBuffer<std::uint8_t>(labels_.size());
  std::copy(x_.begin(), x_.end(), x_pinned_.data());
  std::copy(labels_.begin(), labels_.end(), labels_pinned_.data());

  watch_ = std::make_unique<DeviceBytePeak>();
  for (int b = 0; b < (mode == H2d::overlap ? 2 : 1); ++b) {
    x_dev_[b] = DeviceBuffer<float>(x_.size());
    labels_dev_[b] = DeviceBuffer<std::uint8_t>(labels_.size());
  }
  step_ = row.make_gpu(net_, batch, nn::Sgd{}, ctx_.exec().stream);
}

void GpuTrainCase::copy_next(cudaStream_t stream, int into) {
  const bool pageable = mode_ == H2d::pageable;
  const float* x = pageable ? x_.data() : x_pinned_.data();
  const std::uint8_t* labels = pageable ? labels_.data() : labels_pinned_.data();
  DLB_CUDA_CHECK(cudaMemcpyAsync(x_dev_[into].data(), x, x_dev_[into].bytes(), cudaMemcpyHostToDevice, stream));
  DLB_CUDA_CHECK(
      cudaMemcpyAsync(labels_dev_[into].data(), labels, labels_dev_[into].bytes(), cudaMemcpyHostToDevice, stream));
}

ref::Comparison GpuTrainCase::validate() {
  const cudaStream_t s = ctx_.exec().stream;
  if (mode_ == H2d::overlap) {
    // The first batch, as every later one: on the copy stream, then waited for.
    copy_start_[current_].record(copy_stream_.get());
    copy_next(copy_stream_.get(), current_);
    copy_done_[current_].record(copy_stream_.get());
    DLB_CUDA_CHECK(cudaStreamWaitEvent(s, copy_done_[current_].get(), 0));
  } else {
    copy_next(s, 0);
  }
  const int in = mode_ == H2d::overlap ? current_ : 0;
  step_->forward(x_dev_[in].data(), labels_dev_[in].data());
  step_->backward();
  std::vector<std::vector<float>> grads;
  for (std::size_t j = 0; j < step_->params().size(); ++j) grads.push_back(step_->grad(j));
  const std::vector<std::span<const float>> got(grads.begin(), grads.end());
  const auto& expected = reference_for(net_, batch_, x_, labels_);
  ref::Comparison c = ref::compare_gradients(step_->params(), got, expected, row_.tolerance(net_, batch_));
  // The loss too: the forward's fp32 bound (nn.cpp's kNetworkTolerance).
  const double loss = step_->loss();  // waits for the step
  if (watch_) {
    measured_bytes_ = watch_->rise();
    watch_.reset();
  }
  if (!(std::abs(loss - expected.loss) <= 1e-5 * std::abs(expected.loss))) {
    c.ok = false;
    c.mismatches += 1;
    c.first = "loss " + std::to_string(loss) + ", reference " + std::to_string(expected.loss) + "; " + c.first;
  }
  return c;
}

GpuTrainCase::Times GpuTrainCase::run() {
  const cudaStream_t s = ctx_.exec().stream;
  const int in = mode_ == H2d::overlap ? current_ : 0;
  marks_[0].record(s);
  if (mode_ == H2d::overlap) {
    DLB_CUDA_CHECK(cudaStreamWaitEvent(s, copy_done_[in].get(), 0));
    // The next batch into the other buffer, beside this step. The step that
    // read that buffer last (the one before this) has finished: run()
    // waits for its step before it returns.
    const int next = 1 - in;
    copy_start_[next].record(copy_stream_.get());
    copy_next(copy_stream_.get(), next);
    copy_done_[next].record(copy_stream_.get());
  } else {
    copy_next(s, 0);
  }
  marks_[1].record(s);
  Times t;
  t.phases = step_->launch() != nn::GpuLaunch::graph;
  if (t.phases) {
    step_->forward(x_dev_[in].data(), labels_dev_[in].data());
    marks_[2].record(s);
    step_->backward();
    marks_[3].record(s);
    step_->update();
  } else {
    step_->step(x_dev_[in].data(), labels_dev_[in].data());  // one graph launch
  }
  marks_[4].record(s);
  marks_[4].synchronize();
  const auto seconds = [&](int from, int to) { return 1e-3 * marks_[to].elapsed_ms_since(marks_[from]); };
  t.h2d_exposed = seconds(0, 1);
  if (t.phases) {
    t.forward = seconds(1, 2);
    t.backward = seconds(2, 3);
    t.optimizer = seconds(3, 4);
  }
  t.total = seconds(0, 4);
  if (mode_ == H2d::overlap) {
    // This step's batch: its copy is complete (the stream waited for it).
    t.h2d = 1e-3 * copy_done_[in].elapsed_ms_since(copy_start_[in]);
    current_ = 1 - in;
  } else {
    t.h2d = t.h2d_exposed;
  }
  return t;
}

std::vector<std::pair<std::string, double>> GpuTrainCase::profile(int steps) {
  // overlap: the batch the next run() reads, once its copy has landed.
  if (mode_ == H2d::overlap) DLB_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()));
  const int in = mode_ == H2d::overlap ? current_ : 0;
  return step_->profile(x_dev_[in].data(), labels_dev_[in].data(), steps);
}

double GpuTrainCase::flops_per_step() const { return nn::train_step_flops(net_, batch_); }

std::int64_t GpuTrainCase::input_bytes() const {
  std::int64_t bytes = 0;
  for (int b = 0; b < 2; ++b) bytes += static_cast<std::int64_t>(x_dev_[b].bytes() + labels_dev_[b].bytes());
  return bytes;
}

}  // namespace dlb
