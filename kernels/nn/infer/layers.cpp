#include "kernels/nn/infer/layers.h"

#include <algorithm>
#include <span>

#include "kernels/common/error.h"
#include "kernels/gemm/quant.h"

namespace dlb::nn {

ConvShape conv_shape(const Layer& l, std::int64_t batch) {
  return ConvShape{batch, l.c, l.h, l.w, l.k, l.window, l.window, l.stride, l.pad};
}

void max_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y) {
#pragma omp parallel for schedule(static)
  for (std::int64_t plane = 0; plane < batch * l.c; ++plane) {
    const float* in = x + plane * l.h * l.w;
    float* out = y + plane * l.oh * l.ow;
    for (std::int64_t i = 0; i < l.oh; ++i) {
      for (std::int64_t j = 0; j < l.ow; ++j) {
        const float* window = in + i * l.stride * l.w + j * l.stride;
        float m = window[0];
        for (std::int64_t a = 0; a < l.window; ++a)
          for (std::int64_t b = 0; b < l.window; ++b) m = std::max(m, window[a * l.w + b]);
        out[i * l.ow + j] = m;
      }
    }
  }
}

void global_avg_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y) {
  const std::int64_t plane = l.h * l.w;
  const float inv = 1.0f / static_cast<float>(plane);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < batch * l.c; ++p) {
    float sum = 0;
    for (std::int64_t i = 0; i < plane; ++i) sum += x[p * plane + i];
    y[p] = sum * inv;
  }
}

ActivationQuant activation_quant(const Network& net, const Calibration& c) {
  check_calibration(c, net, "for " + net.name);
  ActivationQuant q{affine_u8(c.input.min, c.input.max), {}};
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    const AffineU8 in = l.input < 0 ? q.input : q.outputs[static_cast<std::size_t>(l.input)];
    const bool pool = l.kind == LayerKind::max_pool || l.kind == LayerKind::global_avg_pool;
    q.outputs.push_back(pool ? in : affine_u8(c.outputs[i].min, c.outputs[i].max));
  }
  return q;
}

S8Weights quantize_weights(const Layer& l, WeightScales scales) {
  DLB_REQUIRE(l.kind == LayerKind::conv || l.kind == LayerKind::fc, "quantize_weights: " + l.name + " has no weights");
  const auto per_channel = l.weight.size() / static_cast<std::size_t>(l.k);
  S8Weights w{std::vector<std::int8_t>(l.weight.size()), std::vector<float>(static_cast<std::size_t>(l.k))};
  const float whole = calibrate_s8(l.weight);
  for (std::size_t k = 0; k < w.scales.size(); ++k) {
    const std::span<const float> channel(l.weight.data() + k * per_channel, per_channel);
    w.scales[k] = scales == WeightScales::per_tensor ? whole : calibrate_s8(channel);
    quantize_s8(channel, w.scales[k], std::span<std::int8_t>(w.values.data() + k * per_channel, per_channel));
  }
  return w;
}

bool dequantized_output(const Network& net, std::size_t i) {
  if (i + 1 == net.layers.size()) return true;
  for (const auto& l : net.layers)
    if (l.input == static_cast<int>(i) && l.kind == LayerKind::log_softmax) return true;
  return false;
}

namespace {

// [k][c][plane] -> [k][plane][c].
std::vector<float> channels_last(const Layer& l, std::int64_t plane) {
  DLB_REQUIRE(l.weight.size() == static_cast<std::size_t>(l.k * l.c * plane), "weights of " + l.name + " misshaped");
  std::vector<float> out(l.weight.size());
  for (std::int64_t o = 0; o < l.k; ++o)
    for (std::int64_t ch = 0; ch < l.c; ++ch)
      for (std::int64_t p = 0; p < plane; ++p)
        out[static_cast<std::size_t>((o * plane + p) * l.c + ch)] =
            l.weight[static_cast<std::size_t>((o * l.c + ch) * plane + p)];
  return out;
}

}  // namespace

std::vector<float> conv_weights_krsc(const Layer& l) {
  DLB_REQUIRE(l.kind == LayerKind::conv, "conv_weights_krsc: " + l.name + " is not a conv");
  return channels_last(l, l.window * l.window);
}

std::vector<float> fc_weights_nhwc(const Layer& l) {
  DLB_REQUIRE(l.kind == LayerKind::fc, "fc_weights_nhwc: " + l.name + " is not an fc");
  return channels_last(l, l.h * l.w);
}

}  // namespace dlb::nn
