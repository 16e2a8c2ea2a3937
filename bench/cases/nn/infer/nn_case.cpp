#include "bench/cases/nn/infer/nn_case.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>

#include "kernels/common/error.h"
#if DLB_HAVE_CUDA
#include "kernels/common/cuda_check.h"
#endif
#include "kernels/common/random.h"
#include "kernels/nn/data/dataset.h"

namespace dlb {
namespace {

// Resident memory of the process, from /proc/self/status ("VmRSS", "VmHWM"), bytes.
double status_bytes(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(status, line))
    if (line.rfind(key, 0) == 0) return std::stod(line.substr(key.size())) * 1024.0;
  throw Error(std::string("/proc/self/status has no ") + field);
}

// Resets the process's peak resident set (VmHWM) to its resident set,
// after returning free heap to the system; false where the process may not.
bool reset_peak() {
  malloc_trim(0);
  std::ofstream reset("/proc/self/clear_refs");
  reset << "5";
  return static_cast<bool>(reset.flush());
}

// The memory a pass holds: what `prepare` leaves allocated plus the peak of
// `pass` on top. CPU: growth of the peak resident set over the resident set
// before prepare, the peak reset after prepare (so prepare's own transients,
// such as timing trials, do not count), every page touched counting,
// whoever allocated it; NaN where the peak cannot be reset. GPU: growth of
// the device memory in use (cudaMemGetInfo) across both, the GPU backends
// allocating nothing during a pass.
template <class Prepare, class Pass>
double pass_memory(Device device, Prepare&& prepare, Pass&& pass) {
#if DLB_HAVE_CUDA
  if (device == Device::gpu) {
    const auto used = [] {
      std::size_t free = 0, total = 0;
      DLB_CUDA_CHECK(cudaDeviceSynchronize());
      DLB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
      return static_cast<double>(total - free);
    };
    const double before = used();
    prepare();
    pass();
    return used() - before;
  }
#endif
  (void)device;
  malloc_trim(0);
  const double before = status_bytes("VmRSS");
  prepare();
  if (!reset_peak()) {
    pass();
    return std::numeric_limits<double>::quiet_NaN();
  }
  pass();
  return status_bytes("VmHWM") - before;
}

std::int64_t top1(const float* row, std::int64_t classes) {
  return std::max_element(row, row + classes) - row;
}

}  // namespace

double max_disagreement_fraction(nn::NetPrecision precision) {
  switch (precision) {
    case nn::NetPrecision::f32: return 0;  // kMaxDisagreements, whatever the count
    case nn::NetPrecision::bf16:
    case nn::NetPrecision::f16:
    case nn::NetPrecision::tf32:
    case nn::NetPrecision::s8: return 0.01;
  }
  return 0;
}

std::string NetAccuracy::summary() const {
  return "top-1 " + std::to_string(accuracy) + " on " + std::to_string(images) + " test images (PyTorch " +
         std::to_string(torch_accuracy) + "), " + std::to_string(disagreements) +
         " images classified differently from PyTorch (at most " + std::to_string(allowed) + " allowed)";
}

NetCase::NetCase(const nn::NetVariant& variant, std::string_view network, std::int64_t batch,
                 const std::function<void(NetCase&)>& first_pass)
    : variant_(variant),
      net_(nn::network(network)),
      batch_(batch),
      ctx_(variant.device),
      x_(static_cast<std::size_t>(batch * net_.in_size()), variant.device),
      y_(static_cast<std::size_t>(batch * net_.classes), variant.device) {
  DLB_REQUIRE(batch >= 1, "batch must be at least 1");
  const auto& data = nn::fashion_mnist_test();
  const auto& reference = nn::reference(network);
  if (!std::equal(reference.labels.begin(), reference.labels.end(), data.labels.begin(), data.labels.end()))
    throw Error("the reference of " + net_.name + " was made on other test labels than " + data.source);
  DLB_REQUIRE(batch <= data.n, "batch larger than the test set");
  load_input(0);
  peak_bytes_ = pass_memory(
      variant.device,
      [&] {
        prepare_span_.first = steady_seconds();
        run_ = variant.prepare(nn::NetArgs{&net_, batch, x_.data(), y_.data(), &report_}, ctx_.exec());
        prepare_span_.second = steady_seconds();
      },
      [&] {
        if (first_pass) {
          first_pass(*this);
        } else {
          run_();
        }
        ctx_.synchronize();
      });
  peak_bytes_ += static_cast<double>(x_.bytes() + y_.bytes());
}

void NetCase::load_input(std::int64_t first) {
  nn::network_input(nn::fashion_mnist_test(), first, batch_, net_.input_mean, net_.input_std, net_.c, net_.h,
                    net_.w, x_.host().data());
  x_.upload();
}

std::vector<float> NetCase::outputs(std::int64_t first, std::int64_t count) {
  const auto& data = nn::fashion_mnist_test();
  DLB_REQUIRE(count % batch_ == 0 && first + count <= data.n, "outputs: whole batches inside the test set");
  std::vector<float> out(static_cast<std::size_t>(count * net_.classes));
  for (std::int64_t b = first; b < first + count; b += batch_) {
    load_input(b);
    poison_nan(y_.host());
    y_.upload();
    run_();
    ctx_.synchronize();
    y_.download();
    std::copy(y_.host().begin(), y_.host().end(), out.begin() + (b - first) * net_.classes);
  }
  return out;
}

ref::Comparison NetCase::validate(std::int64_t images) {
  const auto& reference = nn::reference(net_.name);
  if (images < 0 || images > reference.images) images = reference.images;
  const std::int64_t count = (images + batch_ - 1) / batch_ * batch_;
  const auto got = outputs(0, count);
  const std::vector<double> expected(reference.logits.begin(),
                                     reference.logits.begin() + images * net_.classes);
  auto c = ref::compare(std::span<const float>(got).first(expected.size()), expected, variant_.tolerance_for(nn::NetArgs{&net_}));
  load_input(0);  // the input the timed call sees
  return c;
}

NetAccuracy NetCase::accuracy(std::int64_t images) {
  const auto& data = nn::fashion_mnist_test();
  const auto& reference = nn::reference(net_.name);
  if (images < 0) images = data.n;
  const std::int64_t count = images / batch_ * batch_;
  NetAccuracy a;
  a.images = count;
  a.allowed = std::max(kMaxDisagreements, static_cast<std::int64_t>(std::ceil(
                                              max_disagreement_fraction(precision()) * static_cast<double>(count))));
  const auto got = outputs(0, count);
  std::int64_t correct = 0, torch_correct = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const auto at = static_cast<std::size_t>(i);
    const std::int64_t predicted = top1(got.data() + i * net_.classes, net_.classes);
    correct += predicted == data.labels[at];
    torch_correct += reference.predictions[at] == data.labels[at];
    a.disagreements += predicted != reference.predictions[at];
  }
  const double images_done = static_cast<double>(std::max<std::int64_t>(count, 1));
  a.accuracy = static_cast<double>(correct) / images_done;
  a.torch_accuracy = static_cast<double>(torch_correct) / images_done;
  // On the whole set, PyTorch's predictions must give the accuracy PyTorch
  // reported: otherwise the reference file is not what train.py wrote.
  if (count == data.n && std::abs(a.torch_accuracy - reference.accuracy) > 0.5 / images_done)
    throw Error("reference file of " + net_.name + ": its predictions give accuracy " +
                std::to_string(a.torch_accuracy) + ", its metadata says " + std::to_string(reference.accuracy));
  load_input(0);
  return a;
}

}  // namespace dlb
