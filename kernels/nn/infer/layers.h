// What the network backends share: the activation buffers of a prepared
// network, the CPU pools, and a conv layer's shape. Internal to kernels/nn.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/conv/conv.h"
#include "kernels/gemm/quant.h"
#include "kernels/nn/model/calibration.h"
#include "kernels/nn/infer/nn.h"

namespace dlb::nn {

// One buffer per layer output, [batch, ...] NCHW, allocated once; the last
// layer writes the caller's y. `Buffer`: HostBuffer<float> or (GPU
// backends) DeviceBuffer<float>.
template <class Buffer>
class Activations {
 public:
  explicit Activations(const NetArgs& args) : args_(args) {
    const auto& layers = args.net->layers;
    for (std::size_t i = 0; i + 1 < layers.size(); ++i) {
      buffers_.emplace_back(static_cast<std::size_t>(args.batch * layers[i].out_size()));
      // Host buffers zeroed: a backend that times its kernel choices in
      // prepare does so before any layer has written them, and reused heap
      // may hold denormals, which would slow one candidate down.
      if constexpr (std::is_same_v<Buffer, HostBuffer<float>>)
        std::fill(buffers_.back().span().begin(), buffers_.back().span().end(), 0.0f);
    }
  }
  // Layer i's input, residual (nullptr: none) and output.
  const float* input(std::size_t i) const { return of(args_.net->layers[i].input, args_.x); }
  const float* residual(std::size_t i) const { return of(args_.net->layers[i].residual, nullptr); }
  float* output(std::size_t i) { return i + 1 == args_.net->layers.size() ? args_.y : buffers_[i].data(); }

 private:
  const float* of(int layer, const float* none) const {
    return layer < 0 ? none : buffers_[static_cast<std::size_t>(layer)].data();
  }
  const NetArgs args_;
  std::vector<Buffer> buffers_;  // per layer but the last
};
using CpuActivations = Activations<HostBuffer<float>>;

// The conv family's problem for a conv layer at this batch size.
ConvShape conv_shape(const Layer& l, std::int64_t batch);

// The u8 quantization of every activation, as the int8 rows use it: the
// input's and each layer's output's from its calibrated range (affine_u8),
// except that max and average pooling keep their input's (they run on the
// codes: the max of codes is the code of the max, the mean of codes the
// code of the mean, rounded).
struct ActivationQuant {
  AffineU8 input;
  std::vector<AffineU8> outputs;  // per layer
};
ActivationQuant activation_quant(const Network& net, const Calibration& calibration);

// A conv's or fc's weights in int8, symmetric, one scale per output channel
// (quant.h: scale = max|w| / 127 over the channel's weights), or one for the
// whole layer (the max over all of them, repeated per channel), in the
// layer's own layout ([k, c, r, r] or [k, in]).
struct S8Weights {
  std::vector<std::int8_t> values;
  std::vector<float> scales;  // [k]
};
enum class WeightScales { per_channel, per_tensor };
S8Weights quantize_weights(const Layer& l, WeightScales scales = WeightScales::per_channel);

// Whether an int8 backend writes layer i's output in fp32 (dequantized):
// the last layer's, and the input of log-softmax.
bool dequantized_output(const Network& net, std::size_t i);

// Weights for NHWC activations: a conv's [k, c, r, r] as [k, r, r, c]
// (KRSC, the filter layout of NHWC convolutions), and an fc's [k, c*h*w]
// (PyTorch flattens its NCHW input) as [k, h*w*c], for an input image
// flattened from NHWC.
std::vector<float> conv_weights_krsc(const Layer& l);
std::vector<float> fc_weights_nhwc(const Layer& l);

// Window x window max pool, stride = window, no padding (floor): NCHW.
void max_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y);
// Mean over each h x w plane: [batch, c, h, w] -> [batch, c].
void global_avg_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y);

}  // namespace dlb::nn
