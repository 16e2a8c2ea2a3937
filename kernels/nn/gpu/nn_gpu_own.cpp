// gpu_own: a network on own CUDA kernels (nn_gpu_kernels.cu): direct
// convolutions with the bias, residual and ReLU fused, own fc, pools, and the
// softmax family's gpu_fused log-softmax. Weights and activations on the
// device, allocated once in prepare.
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/gpu/nn_gpu.h"
#include "kernels/nn/infer/walk.h"
#include "kernels/softmax/softmax.h"

namespace dlb::nn {

namespace {

// gpu_own's functions for the walk (walk.h): device NCHW buffers, weights
// uploaded per layer as the walk reaches it.
class GpuOwnLayers final : public LayerBackend {
 public:
  GpuOwnLayers(std::int64_t batch, cudaStream_t stream) : n_(batch), stream_(stream) {}

  Run conv(const Layer& l, const LayerIo& io) override {
    auto w = upload(l.weight), b = upload(l.bias);
    return [w, b, &l, n = n_, x = io.x, residual = io.residual, y = io.y, stream = stream_] {
      launch_conv_direct_fused(l, n, x, w->data(), b->data(), residual, y, stream);
    };
  }
  Run fc(const Layer& l, const LayerIo& io) override {
    auto w = upload(l.weight), b = upload(l.bias);
    return [w, b, &l, n = n_, x = io.x, y = io.y, stream = stream_] {
      launch_fc(l, n, x, w->data(), b->data(), y, stream);
    };
  }
  Run max_pool(const Layer& l, const LayerIo& io) override {
    return [&l, n = n_, x = io.x, y = io.y, stream = stream_] { launch_max_pool(l, n, x, y, stream); };
  }
  Run global_avg_pool(const Layer& l, const LayerIo& io) override {
    return [&l, n = n_, x = io.x, y = io.y, stream = stream_] { launch_global_avg_pool(l, n, x, y, stream); };
  }
  Run log_softmax(const Layer& l, const LayerIo& io) override {
    return [sm = SoftmaxArgs{n_, l.k, io.x, io.y}, stream = stream_] {
      launch_softmax_fused<SoftmaxKind::log_softmax>(sm, stream);
    };
  }
  std::string implementation() const override { return "own direct conv, epilogue fused"; }

 private:
  static std::shared_ptr<DeviceBuffer<float>> upload(const std::vector<float>& host) {
    return std::make_shared<DeviceBuffer<float>>(to_device<float>(host));
  }
  std::int64_t n_;
  cudaStream_t stream_;
};

}  // namespace

Run prepare_net_gpu_own(const NetArgs& args, const Exec& exec) {
  DLB_REQUIRE(exec.stream != nullptr, "gpu_own runs on a CUDA stream");
  GpuOwnLayers backend(args.batch, exec.stream);
  return walk<DeviceBuffer<float>>(args, backend);
}

}  // namespace dlb::nn
