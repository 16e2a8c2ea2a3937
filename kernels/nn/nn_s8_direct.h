// The plan of gpu_own_s8 and gpu_cublaslt_s8 (see nn.h), built once for
// each target: the GPU (nn_gpu_own_s8.cpp: device buffers, the kernels of
// nn_gpu_kernels.cu, cuBLASLt) and the host twins (nn_s8_direct_host.cpp:
// host buffers, the same element functions of s8_direct_math.h in loops),
// which the CPU tests run.
//
// The quantization is the int8 rows' (calibration.h, layers.h): the input and
// every activation u8 per tensor, weights s8 per output channel, pools on the
// codes, fp32 from the last conv/fc (and the input of log-softmax) on. Each
// conv and fc is what the target makes of it (Target::conv): one direct int8
// convolution with the bias, residual join, ReLU and requantization in its
// epilogue, or patches, a library GEMM and that epilogue. Internal to
// kernels/nn.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/nn/calibration.h"
#include "kernels/nn/layers.h"
#include "kernels/nn/s8_direct_math.h"
#include "kernels/softmax/softmax.h"

namespace dlb::nn {

namespace s8 {

inline int rounded_to_4(std::int64_t channels) { return static_cast<int>((channels + 3) / 4 * 4); }

// A conv's or fc's weights quantized (per output channel) and packed as
// s8_direct_math.h's Conv reads them, with their per-channel constants.
struct PackedWeights {
  std::vector<std::uint32_t> words;        // [rh][rw][words][k]
  std::vector<std::int32_t> compensation;  // [k]
  std::vector<float> scale;                // [k]
};

// rh x rw: the conv's window, or the fc's input image (PyTorch's fc weight
// [k, c*h*w] is [k][c][h][w], a conv's [k][c][r][r]: one formula for both).
inline PackedWeights pack_weights(const Layer& l, int rh, int rw, int words, AffineU8 in_q) {
  const S8Weights w = quantize_weights(l, WeightScales::per_channel);
  PackedWeights p;
  p.words.assign(static_cast<std::size_t>(rh) * rw * words * l.k, 0u);
  p.compensation.assign(static_cast<std::size_t>(l.k), 0);
  p.scale.resize(static_cast<std::size_t>(l.k));
  for (std::int64_t o = 0; o < l.k; ++o) {
    std::int32_t sum = 0;
    for (std::int64_t ch = 0; ch < l.c; ++ch)
      for (int a = 0; a < rh; ++a)
        for (int b = 0; b < rw; ++b) {
          const std::int8_t q = w.values[static_cast<std::size_t>(((o * l.c + ch) * rh + a) * rw + b)];
          sum += q;
          const auto word = static_cast<std::size_t>(((a * rw + b) * words + ch / 4) * l.k + o);
          p.words[word] |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(q)) << (8 * (ch % 4));
        }
    p.compensation[static_cast<std::size_t>(o)] = in_q.zero_point * sum;
    p.scale[static_cast<std::size_t>(o)] = in_q.scale * w.scales[static_cast<std::size_t>(o)];
  }
  return p;
}

// B [rh * rw * 4 * words, k] row-major s8, the packed weights one byte a
// row: what a library GEMM takes (Patches' columns in the same order).
inline std::vector<std::int8_t> weights_as_rows(const PackedWeights& p, int k) {
  std::vector<std::int8_t> rows(p.words.size() * 4);
  for (std::size_t word = 0; word < p.words.size() / static_cast<std::size_t>(k); ++word)
    for (std::size_t o = 0; o < static_cast<std::size_t>(k); ++o)
      for (std::size_t byte = 0; byte < 4; ++byte)
        rows[(word * 4 + byte) * static_cast<std::size_t>(k) + o] =
            static_cast<std::int8_t>((p.words[word * static_cast<std::size_t>(k) + o] >> (8 * byte)) & 0xffu);
  return rows;
}

// Target: what the plan runs on. It provides
//   template <class T> using Buffer = ...;    (HostBuffer or DeviceBuffer)
//   template <class T> Buffer<T> upload(const std::vector<T>&) const;
//   void fill(Buffer<std::uint8_t>&, std::uint8_t) const;  (complete on return)
//   void run(const Quantize&) const; run(const MaxPool&); run(const AvgPool&);
//   Run conv(const Conv&, const PackedWeights&) const;  (made once: what runs the conv)
//   void log_softmax(const SoftmaxArgs&) const;
//   static constexpr const char* name;            (the row, for messages)
//   static constexpr const char* implementation;  (the report's)
// and is copied into every call.
template <class Target>
Run prepare_direct(const NetArgs& args, const Target& target) {
  const Network& net = *args.net;
  const ActivationQuant quant = activation_quant(net, calibration(net.name));
  const std::int64_t batch = args.batch;
  const auto& layers = net.layers;
  const std::string row = Target::name;
  struct Buffers {
    typename Target::template Buffer<std::uint8_t> input;                  // the quantized network input
    std::vector<typename Target::template Buffer<std::uint8_t>> u8;        // per layer, or empty
    std::vector<typename Target::template Buffer<float>> f32;              // per layer if not y, or empty
    std::vector<typename Target::template Buffer<std::uint32_t>> weights;  // per conv/fc
    std::vector<typename Target::template Buffer<std::int32_t>> compensation;
    std::vector<typename Target::template Buffer<float>> scale, bias;
  };
  auto buffers = std::make_shared<Buffers>();
  Buffers& b = *buffers;
  b.u8.resize(layers.size());
  b.f32.resize(layers.size());
  const auto u8_buffer = [&](std::int64_t pixels, int pitch, std::int32_t zero_point) {
    typename Target::template Buffer<std::uint8_t> buffer(static_cast<std::size_t>(pixels * pitch));
    target.fill(buffer, static_cast<std::uint8_t>(zero_point));  // the channels past the tensor's: its zero point
    return buffer;
  };
  const int input_pitch = rounded_to_4(net.c);
  DLB_REQUIRE(!layers.empty() && (layers[0].kind == LayerKind::conv || layers[0].kind == LayerKind::fc),
              row + ": the first layer of " + net.name + " is not a conv or fc");
  b.input = u8_buffer(batch * net.h * net.w, input_pitch, quant.input.zero_point);
  std::vector<Run> calls;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const bool f32 = dequantized_output(net, i);
    const bool last = i + 1 == layers.size();
    const auto from = static_cast<std::size_t>(l.input);
    const AffineU8 in_q = l.input < 0 ? quant.input : quant.outputs[from];
    const AffineU8 out_q = quant.outputs[i];
    const int in_pitch = l.input < 0 ? input_pitch : rounded_to_4(l.c);
    const std::uint8_t* in = l.input < 0 ? b.input.data() : b.u8[from].data();
    const int out_pitch = rounded_to_4(l.k);
    const std::int64_t out_pixels = batch * l.oh * l.ow;
    DLB_REQUIRE(l.kind == LayerKind::log_softmax || !f32 || l.kind == LayerKind::conv || l.kind == LayerKind::fc,
                row + ": " + l.name + " would have to write fp32");
    DLB_REQUIRE(!f32 || l.kind == LayerKind::log_softmax || l.oh * l.ow == 1,
                row + ": " + l.name + " writes fp32 NHWC, which is the network's layout only for 1 x 1 outputs");
    if (f32 && !last)
      b.f32[i] = typename Target::template Buffer<float>(static_cast<std::size_t>(batch * l.out_size()));
    if (!f32) b.u8[i] = u8_buffer(out_pixels, out_pitch, out_q.zero_point);
    float* out_f32 = !f32 ? nullptr : last ? args.y : b.f32[i].data();
    std::uint8_t* out_u8 = f32 ? nullptr : b.u8[i].data();
    switch (l.kind) {
      case LayerKind::log_softmax: {
        DLB_REQUIRE(last && l.input >= 0 && b.f32[from].size() > 0, row + ": log-softmax must end the network");
        calls.push_back([buffers, target, sm = SoftmaxArgs{batch, l.k, b.f32[from].data(), args.y}] {
          target.log_softmax(sm);
        });
        break;
      }
      case LayerKind::max_pool: {
        const MaxPool p{batch, static_cast<int>(l.c), static_cast<int>(l.h), static_cast<int>(l.w),
                        static_cast<int>(l.oh), static_cast<int>(l.ow), static_cast<int>(l.window),
                        static_cast<int>(l.stride), in_pitch, in, out_u8};
        calls.push_back([buffers, target, p] { target.run(p); });
        break;
      }
      case LayerKind::global_avg_pool: {
        const AvgPool p{batch, static_cast<int>(l.c), static_cast<int>(l.h * l.w), in_pitch,
                        1.0f / static_cast<float>(l.h * l.w), in, out_u8};
        calls.push_back([buffers, target, p] { target.run(p); });
        break;
      }
      case LayerKind::conv:
      case LayerKind::fc: {
        const bool conv = l.kind == LayerKind::conv;
        const int rh = static_cast<int>(conv ? l.window : l.h), rw = static_cast<int>(conv ? l.window : l.w);
        const PackedWeights packed = pack_weights(l, rh, rw, in_pitch / 4, in_q);
        b.weights.push_back(target.upload(packed.words));
        b.compensation.push_back(target.upload(packed.compensation));
        b.scale.push_back(target.upload(packed.scale));
        b.bias.push_back(target.upload(l.bias));
        Conv c;
        c.batch = batch;
        c.h = static_cast<int>(l.h);
        c.w = static_cast<int>(l.w);
        c.words = in_pitch / 4;
        c.k = static_cast<int>(l.k);
        c.oh = static_cast<int>(l.oh);
        c.ow = static_cast<int>(l.ow);
        c.rh = rh;
        c.rw = rw;
        c.stride = conv ? static_cast<int>(l.stride) : 1;
        c.pad = conv ? static_cast<int>(l.pad) : 0;
        c.x = in;  // the buffers' starts are aligned, pitches multiples of 4
        c.pad_word = 0x01010101u * static_cast<std::uint32_t>(in_q.zero_point);
        c.weights = b.weights.back().data();
        c.compensation = b.compensation.back().data();
        c.scale = b.scale.back().data();
        c.bias = b.bias.back().data();
        if (l.residual >= 0) {
          const auto r = static_cast<std::size_t>(l.residual);
          DLB_REQUIRE(b.u8[r].size() == static_cast<std::size_t>(out_pixels * out_pitch),
                      row + ": the residual of " + l.name + " has another shape");
          c.out.residual = b.u8[r].data();
          c.out.residual_scale = quant.outputs[r].scale;
          c.out.residual_zero_point = quant.outputs[r].zero_point;
        }
        c.out.relu = l.relu;
        c.out.out_u8 = out_u8;
        c.out.out_pitch = out_pitch;
        c.out.inv_out_scale = 1.0f / out_q.scale;
        c.out.out_zero_point = out_q.zero_point;
        c.out.out_f32 = out_f32;
        Run conv_call = target.conv(c, packed);
        if (l.input < 0) {
          const Quantize q{batch,      static_cast<int>(net.c), static_cast<int>(net.h), static_cast<int>(net.w),
                           input_pitch, args.x, 1.0f / in_q.scale, in_q.zero_point, b.input.data()};
          calls.push_back([buffers, target, q, conv_call] {
            target.run(q);
            conv_call();
          });
        } else {
          calls.push_back([buffers, conv_call] { conv_call(); });
        }
        break;
      }
    }
  }
  if (args.report != nullptr)
    args.report->implementation = std::string(Target::implementation);
  return run_layers(std::move(calls), args.report);
}

}  // namespace s8

// The host twins (nn_s8_direct_host.cpp): gpu_own_s8's plan and element
// functions on host memory, or with as_gemm gpu_cublaslt_s8's (each conv and
// fc with a multiple of 4 outputs as patches, an exact GEMM with cuBLASLt's
// output stage, and the requantizing epilogue), for the CPU tests.
Run prepare_s8_direct_on_host(const NetArgs& args, bool as_gemm = false);

}  // namespace dlb::nn
