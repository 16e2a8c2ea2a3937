// cpu_fakequant_s8: the quantization tutorial's int8 network, simulated in
// fp32 ("fake quantization"): cpu_own's fp32 layers, with every weight
// replaced by its int8 value dequantized (per output channel, as the int8
// rows quantize it) and every activation the int8 rows keep in u8 rounded
// to its u8 grid and back (quantize, dequantize) after the layer that
// writes it. Its accuracy is what int8 costs; its speed is fp32's plus the
// rounding passes: what running the int8 arithmetic (cpu_own_s8,
// cpu_onednn_s8) buys over simulating it.
#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/common/buffer.h"
#include "kernels/nn/calibration.h"
#include "kernels/nn/layers.h"

namespace dlb::nn {
namespace {

// x <- scale * (clamp(round(x / scale) + zero_point, 0, 255) - zero_point)
void fake_quantize(float* x, std::int64_t count, AffineU8 q) {
  const float inv = 1.0f / q.scale, zp = static_cast<float>(q.zero_point);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    x[i] = (std::clamp(std::nearbyint(x[i] * inv) + zp, 0.0f, 255.0f) - zp) * q.scale;
}

}  // namespace

Run prepare_net_cpu_fakequant_s8(const NetArgs& args, const Exec& exec) {
  const ActivationQuant quant = activation_quant(*args.net, calibration(args.net->name));
  // The network with its weights on the int8 grid (biases stay fp32, as the int8 rows keep them).
  auto net = std::make_shared<Network>(*args.net);
  for (auto& l : net->layers) {
    if (l.kind != LayerKind::conv && l.kind != LayerKind::fc) continue;
    const S8Weights w = quantize_weights(l);
    const auto per_channel = l.weight.size() / w.scales.size();
    for (std::size_t i = 0; i < l.weight.size(); ++i)
      l.weight[i] = static_cast<float>(w.values[i]) * w.scales[i / per_channel];
  }
  // The input rounded into a buffer of its own (the caller's x is const).
  auto input = std::make_shared<HostBuffer<float>>(static_cast<std::size_t>(args.batch * net->in_size()));
  NetArgs inner = args;
  inner.net = net.get();
  inner.x = input->data();
  inner.report = nullptr;
  OwnCpuPlan plan = build_own_cpu(inner, exec);
  std::vector<Run> calls;
  for (std::size_t i = 0; i < net->layers.size(); ++i) {
    const bool rounded = !dequantized_output(*net, i);
    const std::int64_t count = args.batch * net->layers[i].out_size();
    calls.push_back([net, input, act = plan.act, layer = std::move(plan.calls[i]), first = i == 0, rounded, count,
                     i, x = args.x, q = quant] {
      if (first) {
        std::copy_n(x, input->size(), input->data());
        fake_quantize(input->data(), static_cast<std::int64_t>(input->size()), q.input);
      }
      layer();
      if (rounded) fake_quantize(act->output(i), count, q.outputs[i]);
    });
  }
  if (args.report != nullptr)
    args.report->implementation = "fp32 " + plan.implementation + ", int8-rounded weights and activations";
  return run_layers(std::move(calls), args.report);
}

}  // namespace dlb::nn
