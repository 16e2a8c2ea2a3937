// One network at one batch size set up for one backend: the committed
// weights, the real test images, the prepared pass. Validation (before any
// timing) runs the backend over PyTorch's reference images and compares its
// outputs with PyTorch's logits; accuracy runs it over the whole test set and
// holds its top-1 answers against PyTorch's. The benchmark times run(); the
// tests check validate() and accuracy() at odd batch sizes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/nn/infer/nn.h"
#include "reference/compare.h"

namespace dlb {

// An fp32 backend may disagree with PyTorch's top-1 class on at most this
// many of the 10,000 test images: near-ties flip under a different fp32
// summation order, a wrong layer flips hundreds.
inline constexpr std::int64_t kMaxDisagreements = 5;

// A reduced-precision row moves every logit by up to its tolerance, so it
// flips the near-ties within that margin: at most this fraction of the
// images it classifies may differ from PyTorch's fp32 top-1: 1%. Measured on
// the committed networks (AMD EPYC, AVX-512 BF16 and VNNI): bf16 at most 18
// of 10,000 (0.18%), int8 at most 36 (0.36%). A wrong layer flips thousands.
double max_disagreement_fraction(nn::NetPrecision precision);

struct NetAccuracy {
  double accuracy = 0;             // top-1 against the labels, a fraction
  double torch_accuracy = 0;       // PyTorch's fp32 on the same images (its committed predictions)
  std::int64_t disagreements = 0;  // images whose top-1 differs from PyTorch's
  std::int64_t allowed = kMaxDisagreements;  // for this row's precision and this many images
  std::int64_t images = 0;
  bool ok() const { return disagreements <= allowed; }
  // What this row's precision costs: PyTorch's fp32 accuracy minus this
  // row's, a fraction (0.01 is one point; negative: this row is better).
  double drop() const { return torch_accuracy - accuracy; }
  std::string summary() const;
};

// Steady-clock seconds since its epoch: prepare_span's and the layer timer's clock.
inline double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

class NetCase {
 public:
  // `first_pass`, if given, runs the first pass after prepare in place of
  // run() (a profiler timing its layers); it must leave the pass complete.
  NetCase(const nn::NetVariant& variant, std::string_view network, std::int64_t batch,
          const std::function<void(NetCase&)>& first_pass = {});

  // Outputs of the first `images` reference images (all of them by
  // default) against PyTorch's logits.
  ref::Comparison validate(std::int64_t images = -1);
  // Top-1 over the whole Fashion-MNIST test set, `images` of them (all by
  // default), in batches of this case's size.
  NetAccuracy accuracy(std::int64_t images = -1);
  nn::NetPrecision precision() const { return variant_.precision; }
  void run() { run_(); }
  const ExecContext& context() const { return ctx_; }
  const nn::Network& network() const { return net_; }
  const nn::NetReport& report() const { return report_; }
  std::int64_t batch() const { return batch_; }
  // Steady-clock seconds (since its epoch) at the start and end of prepare.
  std::pair<double, double> prepare_span() const { return prepare_span_; }
  // Writes the first test images into the input again (host, and the
  // device copy for a GPU backend, synchronously): the copy a pass's input
  // costs.
  void reload_input() { load_input(0); }
  // The memory a forward pass holds: what the prepared backend keeps (its
  // buffers, packed weights, library scratch and workspace) plus the peak
  // of one pass on top, and the input and output. CPU: growth of the
  // process's peak resident set (every page touched, whoever allocated
  // it), the peak reset after prepare so that prepare's own transients
  // (timing trials) do not count; NaN where the process cannot reset it
  // (/proc/self/clear_refs). GPU: growth of the device memory in use (the
  // GPU backends allocate nothing during a pass).
  double peak_bytes() const { return peak_bytes_; }
  // The outputs of test images [first, first + count) (count a multiple of
  // the batch), [count, classes].
  std::vector<float> outputs(std::int64_t first, std::int64_t count);

 private:
  const nn::NetVariant& variant_;
  const nn::Network& net_;
  std::int64_t batch_;
  ExecContext ctx_;
  Operand<float> x_, y_;  // host copies, and device copies for a GPU backend
  // Test images [first, first + batch) into x (host and device).
  void load_input(std::int64_t first);
  nn::NetReport report_;
  Run run_;
  double peak_bytes_ = 0;
  std::pair<double, double> prepare_span_{0, 0};
};

}  // namespace dlb
