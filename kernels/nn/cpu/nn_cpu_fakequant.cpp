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
#include "kernels/nn/model/calibration.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/infer/walk.h"

namespace dlb::nn {
namespace {

// x <- scale * (clamp(round(x / scale) + zero_point, 0, 255) - zero_point)
void fake_quantize(float* x, std::int64_t count, AffineU8 q) {
  const float inv = 1.0f / q.scale, zp = static_cast<float>(q.zero_point);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    x[i] = (std::clamp(std::nearbyint(x[i] * inv) + zp, 0.0f, 255.0f) - zp) * q.scale;
}

// cpu_own's layers with the rounding after each (walk.h).
class FakeQuantLayers final : public AroundLayers {
 public:
  FakeQuantLayers(const NetArgs& args, const Exec& exec, std::shared_ptr<Network> net,
                  std::shared_ptr<HostBuffer<float>> input)
      : AroundLayers(own_cpu_layers(args.batch, exec)), args_(args), net_(std::move(net)), input_(std::move(input)),
        quant_(activation_quant(*args.net, calibration(args.net->name))) {}
  std::string implementation() const override {
    return "fp32 " + inner().implementation() + ", int8-rounded weights and activations";
  }

 private:
  Run around(const Layer& l, const LayerIo& io, Run call) override {
    const bool rounded = !dequantized_output(*net_, io.index);
    const std::int64_t count = args_.batch * l.out_size();
    return [net = net_, input = input_, layer = std::move(call), first = io.index == 0, rounded, count, y = io.y,
            x = args_.x, input_q = quant_.input, q = quant_.outputs[io.index]] {
      if (first) {
        std::copy_n(x, input->size(), input->data());
        fake_quantize(input->data(), static_cast<std::int64_t>(input->size()), input_q);
      }
      layer();
      if (rounded) fake_quantize(y, count, q);
    };
  }

  const NetArgs args_;
  std::shared_ptr<Network> net_;
  std::shared_ptr<HostBuffer<float>> input_;
  const ActivationQuant quant_;
};

}  // namespace

Run prepare_net_cpu_fakequant_s8(const NetArgs& args, const Exec& exec) {
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
  FakeQuantLayers backend(args, exec, net, input);
  NetArgs inner = args;
  inner.net = net.get();
  inner.x = input->data();
  return walk<HostBuffer<float>>(inner, backend);
}

}  // namespace dlb::nn
