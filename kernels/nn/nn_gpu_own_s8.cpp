// gpu_own_s8: a network in int8 from first principles on own CUDA kernels
// (see nn.h and nn_s8_direct.h): direct convolutions on u8 x s8 dp4a with
// the requantizing epilogue fused, pools on the codes, gpu_fused log-softmax.
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/nn/nn_gpu.h"
#include "kernels/nn/nn_s8_direct.h"

namespace dlb::nn {
namespace {

struct DeviceTarget {
  static constexpr const char* name = "gpu_own_s8";
  static constexpr const char* implementation =
      "own direct conv, u8 x s8 dp4a, requantization fused, NHWC u8, weight scales per channel";
  cudaStream_t stream = nullptr;
  template <class T>
  using Buffer = DeviceBuffer<T>;
  template <class T>
  Buffer<T> upload(const std::vector<T>& values) const {
    return to_device<T>(std::span<const T>(values));
  }
  void fill(Buffer<std::uint8_t>& b, std::uint8_t value) const {
    DLB_CUDA_CHECK(cudaMemsetAsync(b.data(), value, b.bytes(), stream));
    DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  void run(const s8::Quantize& p) const { launch_s8_quantize(p, stream); }
  void run(const s8::Conv& p) const { launch_s8_conv(p, stream); }
  void run(const s8::MaxPool& p) const { launch_s8_max_pool(p, stream); }
  void run(const s8::AvgPool& p) const { launch_s8_avg_pool(p, stream); }
  void log_softmax(const SoftmaxArgs& args) const { launch_softmax_fused<SoftmaxKind::log_softmax>(args, stream); }
};

}  // namespace

Run prepare_net_gpu_own_s8(const NetArgs& args, const Exec& exec) {
  DLB_REQUIRE(exec.stream != nullptr, "gpu_own_s8 runs on a CUDA stream");
  return s8::prepare_direct(args, DeviceTarget{exec.stream});
}

}  // namespace dlb::nn
