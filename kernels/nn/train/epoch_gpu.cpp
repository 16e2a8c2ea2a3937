// train_epoch on a GPU row (epoch.h says what it does; issue 46). Unverified
// on hardware until a GPU run: docs/training.md lists what that run checks.
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/error.h"
#include "kernels/common/gpu.h"
#include "kernels/nn/data/batch_loader.h"
#include "kernels/nn/train/epoch_parts.h"
#include "kernels/nn/train/train_gpu.h"
#include "kernels/nn/train/train_walk.h"

namespace dlb::nn {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Fills a new GPU step's parameters with what `values(j)` gives for tensor j.
template <class Values>
void set_params(GpuTrainStep& step, const Values& values) {
  for (std::size_t j = 0; j < step.params().size(); ++j) {
    const std::vector<float> v = values(j);
    step.set_param(j, v);
  }
}

// One batch's place on each side: page-locked on the host (what the loader
// gave, copied), on the device (what a step reads), and the events that say
// when each side is free again.
struct Slot {
  Slot(std::int64_t batch, std::int64_t in_size)
      : host_x(static_cast<std::size_t>(batch * in_size)), host_labels(static_cast<std::size_t>(batch)),
        x(host_x.size()), labels(host_labels.size()) {}
  PinnedBuffer<float> host_x;
  PinnedBuffer<std::uint8_t> host_labels;
  DeviceBuffer<float> x;
  DeviceBuffer<std::uint8_t> labels;
  Event copied;    // on the copy stream: the host side may be refilled, the step may read
  Event consumed;  // on the step's stream: the step that read the device side has finished
  bool used = false;
};

}  // namespace

EpochResult train_epoch_gpu(const TrainVariant& row, const Network& net, const Dataset& train, const Dataset& test,
                            const EpochConfig& config, std::int64_t steps,
                            const std::function<void(std::int64_t, double)>& on_step) {
  if (gpu_count() == 0)
    throw Error("epoch: " + std::string(row.name) + " runs on a GPU, and this machine has no CUDA device");
  Stream stream, copies;
  const std::unique_ptr<GpuTrainStep> step = row.make_gpu(net, config.batch, config.sgd, stream.get());
  set_params(*step, [&](std::size_t j) { return fresh_values(net, step->params()[j], config.init_seed, j); });
  const BatchFormat format{net.c, net.h, net.w, net.input_mean, net.input_std};
  BatchLoader loader(train, epoch_order(config.order_seed, train.n), config.batch, format, config.augment,
                     config.augment_seed, config.workers);
  Slot slots[2] = {{config.batch, net.in_size()}, {config.batch, net.in_size()}};
  // Every step's per-row losses, copied back as the steps go (a step
  // overwrites the device's), read once the last step is done.
  PinnedBuffer<double> loss_rows(static_cast<std::size_t>(steps * config.batch));
  std::vector<Event> copy_marks(static_cast<std::size_t>(2 * steps)), step_marks(static_cast<std::size_t>(2 * steps));
  // step()'s graphs for both device buffers before the clock starts (a
  // capture waits for an eager step first), the step left at its start.
  for (Slot& slot : slots) {
    DLB_CUDA_CHECK(cudaMemsetAsync(slot.x.data(), 0, slot.x.bytes(), stream.get()));
    DLB_CUDA_CHECK(cudaMemsetAsync(slot.labels.data(), 0, slot.labels.bytes(), stream.get()));
    step->prepare(slot.x.data(), slot.labels.data());
  }
  EpochResult r;
  r.gpu = true;
  const double start = now();
  for (std::int64_t s = 0; s < steps; ++s) {
    Slot& slot = slots[s % 2];
    const double t0 = now();
    const BatchLoader::Batch b = loader.next();
    check_labels(net, b.labels, config.batch);  // a kernel cannot throw
    r.load_seconds += now() - t0;
    // The copy two steps back read this host side; the step two back, its device side.
    if (slot.used) {
      slot.copied.synchronize();
      DLB_CUDA_CHECK(cudaStreamWaitEvent(copies.get(), slot.consumed.get(), 0));
    }
    std::memcpy(slot.host_x.data(), b.x, slot.host_x.bytes());
    std::memcpy(slot.host_labels.data(), b.labels, slot.host_labels.bytes());
    const auto at = static_cast<std::size_t>(2 * s);
    copy_marks[at].record(copies.get());
    DLB_CUDA_CHECK(cudaMemcpyAsync(slot.x.data(), slot.host_x.data(), slot.x.bytes(), cudaMemcpyHostToDevice,
                                   copies.get()));
    DLB_CUDA_CHECK(cudaMemcpyAsync(slot.labels.data(), slot.host_labels.data(), slot.labels.bytes(),
                                   cudaMemcpyHostToDevice, copies.get()));
    copy_marks[at + 1].record(copies.get());
    slot.copied.record(copies.get());
    DLB_CUDA_CHECK(cudaStreamWaitEvent(stream.get(), slot.copied.get(), 0));
    step_marks[at].record(stream.get());
    step->step(slot.x.data(), slot.labels.data());
    step_marks[at + 1].record(stream.get());
    step->copy_loss_rows(loss_rows.data() + s * config.batch);
    slot.consumed.record(stream.get());
    slot.used = true;
  }
  stream.synchronize();
  copies.synchronize();
  r.seconds = now() - start;
  r.losses.reserve(static_cast<std::size_t>(steps));
  for (std::int64_t s = 0; s < steps; ++s) {
    // As GpuTrainStep::loss(): the rows summed in order, over the batch.
    double sum = 0;
    for (std::int64_t i = 0; i < config.batch; ++i) sum += loss_rows[static_cast<std::size_t>(s * config.batch + i)];
    r.losses.push_back(sum / static_cast<double>(config.batch));
    const auto at = static_cast<std::size_t>(2 * s);
    r.h2d_seconds += 1e-3 * copy_marks[at + 1].elapsed_ms_since(copy_marks[at]);
    r.step_seconds += 1e-3 * step_marks[at + 1].elapsed_ms_since(step_marks[at]);
    if (on_step) on_step(s, r.losses.back());
  }
  if (!config.evaluate) return r;
  // The test set through the same forward (eager: each evaluation step runs
  // a handful of times), with the trained parameters.
  std::unique_ptr<GpuTrainStep> eval;
  DeviceBuffer<float> x;
  DeviceBuffer<std::uint8_t> labels;
  evaluate_test(net, test, [&](std::int64_t count) -> EvalStep {
    const TrainVariant& eager = train_variant("gpu_cudnn", Device::gpu, "the evaluation's step");
    eval = eager.make_gpu(net, count, config.sgd, stream.get());
    set_params(*eval, [&](std::size_t j) { return step->param(j); });
    x = DeviceBuffer<float>(static_cast<std::size_t>(count * net.in_size()));
    labels = DeviceBuffer<std::uint8_t>(static_cast<std::size_t>(count));
    return [&](const float* host_x, const std::uint8_t* host_labels) {
      check_labels(net, host_labels, eval->batch());
      DLB_CUDA_CHECK(cudaMemcpyAsync(x.data(), host_x, x.bytes(), cudaMemcpyHostToDevice, stream.get()));
      DLB_CUDA_CHECK(
          cudaMemcpyAsync(labels.data(), host_labels, labels.bytes(), cudaMemcpyHostToDevice, stream.get()));
      eval->forward(x.data(), labels.data());
      Evaluated e;
      e.loss = eval->loss();  // waits
      e.log_probs = eval->log_probs();
      return e;
    };
  }, r);
  return r;
}

}  // namespace dlb::nn
