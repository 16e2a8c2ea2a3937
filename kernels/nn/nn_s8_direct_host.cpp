// The host twin of gpu_own_s8 (nn_s8_direct.h): its plan on host buffers,
// each kernel's element function in an OpenMP loop over the elements a GPU
// grid would cover, log-softmax by the softmax family's cpu_fused (the GPU
// row uses gpu_fused: the only step whose rounding may differ).
#include <algorithm>
#include <vector>

#include "kernels/nn/nn_s8_direct.h"

namespace dlb::nn {
namespace {

struct HostTarget {
  static constexpr const char* name = "gpu_own_s8 (host twin)";
  static constexpr const char* implementation = "gpu_own_s8's element functions on the host";
  template <class T>
  using Buffer = HostBuffer<T>;
  template <class T>
  Buffer<T> upload(const std::vector<T>& values) const {
    Buffer<T> b(values.size());
    std::copy(values.begin(), values.end(), b.data());
    return b;
  }
  void fill(Buffer<std::uint8_t>& b, std::uint8_t value) const { std::fill(b.span().begin(), b.span().end(), value); }
  // Quantize, Conv, MaxPool, AvgPool: every element, as a grid would.
  template <class Params>
  void run(const Params& p) const {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < p.elements(); ++i) s8::element(p, i);
  }
  void log_softmax(const SoftmaxArgs& args) const { softmax_fused<SoftmaxKind::log_softmax>(args); }
};

}  // namespace

Run prepare_s8_direct_on_host(const NetArgs& args) { return s8::prepare_direct(args, HostTarget{}); }

}  // namespace dlb::nn
