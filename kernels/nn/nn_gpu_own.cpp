// gpu_own: a network on own CUDA kernels (nn_gpu_kernels.cu): direct
// convolutions with the bias, residual and ReLU fused, own fc, pools, and the
// softmax family's gpu_fused log-softmax. Weights and activations on the
// device, allocated once in prepare.
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/nn/layers.h"
#include "kernels/nn/nn_gpu.h"
#include "kernels/softmax/softmax.h"

namespace dlb::nn {

Run prepare_net_gpu_own(const NetArgs& args, const Exec& exec) {
  DLB_REQUIRE(exec.stream != nullptr, "gpu_own runs on a CUDA stream");
  const Network& net = *args.net;
  const std::int64_t n = args.batch;
  cudaStream_t stream = exec.stream;
  auto act = std::make_shared<Activations<DeviceBuffer<float>>>(args);
  std::vector<Run> calls;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    const float* x = act->input(i);
    const float* residual = act->residual(i);
    float* y = act->output(i);
    auto upload = [](const std::vector<float>& host) {
      return std::make_shared<DeviceBuffer<float>>(to_device<float>(host));
    };
    switch (l.kind) {
      case LayerKind::conv: {
        auto w = upload(l.weight), b = upload(l.bias);
        calls.push_back([act, w, b, &l, n, x, residual, y, stream] {
          launch_conv_direct_fused(l, n, x, w->data(), b->data(), residual, y, stream);
        });
        break;
      }
      case LayerKind::fc: {
        auto w = upload(l.weight), b = upload(l.bias);
        calls.push_back([act, w, b, &l, n, x, y, stream] { launch_fc(l, n, x, w->data(), b->data(), y, stream); });
        break;
      }
      case LayerKind::max_pool:
        calls.push_back([act, &l, n, x, y, stream] { launch_max_pool(l, n, x, y, stream); });
        break;
      case LayerKind::global_avg_pool:
        calls.push_back([act, &l, n, x, y, stream] { launch_global_avg_pool(l, n, x, y, stream); });
        break;
      case LayerKind::log_softmax:
        calls.push_back([act, sm = SoftmaxArgs{n, l.k, x, y}, stream] {
          launch_softmax_fused<SoftmaxKind::log_softmax>(sm, stream);
        });
        break;
    }
  }
  if (args.report != nullptr) args.report->implementation = "own direct conv, epilogue fused";
  return run_layers(std::move(calls), args.report);
}

}  // namespace dlb::nn
