// cpu_own_s8: a network in int8 from first principles, on dlbench's own
// AVX-512 VNNI GEMM (see nn.h). What is computed:
//
// - Activations: u8, per tensor, asymmetric: x ~ scale * (q - zero_point),
//   scale and zero point from the calibrated range of that tensor
//   (calibration.h; quant.h's affine_u8). NHWC, so that an output pixel's
//   channels, and a conv's 3x3 patch of them, are contiguous bytes.
// - The network input is quantized once, in the first layer's call (fp32
//   NCHW -> u8 NHWC).
// - Conv and fc: weights s8, symmetric, one scale per output channel
//   (max|w| / 127), quantized and packed once in prepare. The layer is one
//   u8 x s8 -> s32 GEMM [pixels, r*r*c] x [r*r*c, k] (the patches gathered
//   tile by tile inside the GEMM into a buffer that stays in L1, padding
//   with the input's zero point, which is the code of 0; a 1x1 stride-1
//   conv reads its input in place), whose output
//   stage in registers scales the int32 sums back, adds the bias and the
//   dequantized residual, applies ReLU and requantizes to the next tensor's
//   u8 (gemm_vnni.h). fc weights are permuted once to the NHWC flattening.
// - Max pool and global average pool on the u8 codes (max commutes with
//   the monotonic quantization, the mean with the affine one): the output
//   keeps its input's scale and zero point, as in oneDNN's int8 pooling.
// - Dequantized only at the end: the last conv/fc writes fp32 (the logits,
//   or the input of log-softmax, which runs in fp32 on the softmax family's
//   cpu_fused).
// cpu_own_pertensor_s8: the same with one weight scale per layer instead of
// one per output channel: what per-channel scales are for.
// Requires AVX-512 VNNI (registered where the CPU has it).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/common/error.h"
#include "kernels/gemm/gemm_vnni.h"
#include "kernels/gemm/quant.h"
#include "kernels/nn/calibration.h"
#include "kernels/nn/layers.h"
#include "kernels/softmax/softmax.h"

namespace dlb::nn {
namespace {

// Everything a prepared pass touches, owned by its calls.
struct State {
  HostBuffer<std::uint8_t> input;                    // the quantized network input, NHWC
  std::vector<HostBuffer<std::uint8_t>> u8;          // per layer: its u8 output (NHWC), or empty
  std::vector<HostBuffer<float>> f32;                // per layer: its fp32 output if not y, or empty
  std::vector<AffineU8> params;                      // per layer: its output's quantization
};

void quantize_input(const NetArgs& args, AffineU8 q, std::uint8_t* out) {
  const Network& net = *args.net;
  const std::int64_t plane = net.h * net.w;
  const float inv = 1.0f / q.scale;
#pragma omp parallel for
  for (std::int64_t n = 0; n < args.batch; ++n)
    for (std::int64_t c = 0; c < net.c; ++c) {
      const float* x = args.x + (n * net.c + c) * plane;
      std::uint8_t* y = out + n * plane * net.c + c;
      for (std::int64_t p = 0; p < plane; ++p)
        y[p * net.c] = static_cast<std::uint8_t>(std::clamp(std::nearbyint(x[p] * inv) + q.zero_point, 0.0f, 255.0f));
    }
}

// memcpy of n bytes, inlined for the sizes of the networks' patch rows
// (r * c: 3, 5 and 9 for the first convs, 48, 96 and 192 for 3x3 convs of 16,
// 32 and 64 channels): a call per 16-byte copy would cost more than the copy.
inline void copy_bytes(std::uint8_t* dst, const std::uint8_t* src, std::int64_t n) {
  switch (n) {
    case 3: std::memcpy(dst, src, 3); return;
    case 5: std::memcpy(dst, src, 5); return;
    case 9: std::memcpy(dst, src, 9); return;
    case 48: std::memcpy(dst, src, 48); return;
    case 96: std::memcpy(dst, src, 96); return;
    case 192: std::memcpy(dst, src, 192); return;
    default: std::memcpy(dst, src, static_cast<std::size_t>(n));
  }
}

// Rows [row0, row0 + rows) of the conv's patch matrix [batch * oh * ow,
// r * r * c]: per output pixel its r x r x c patch of the NHWC input,
// `pad_code` (the input's zero point: the code of 0) outside the image. The
// r taps of one patch row are r * c contiguous input bytes.
void patch_rows(const Layer& l, const std::uint8_t* x, std::uint8_t pad_code, std::int64_t row0, int rows,
                std::uint8_t* dst) {
  const std::int64_t r = l.window, c = l.c;
  // The pixel of row0, then stepped (no division per row).
  std::int64_t ox = row0 % l.ow, oy = row0 / l.ow % l.oh, n = row0 / (l.ow * l.oh);
  for (int row = 0; row < rows; ++row) {
    const std::int64_t ix0 = ox * l.stride - l.pad;
    for (std::int64_t a = 0; a < r; ++a, dst += r * c) {
      const std::int64_t iy = oy * l.stride + a - l.pad;
      const std::uint8_t* src = x + ((n * l.h + iy) * l.w + ix0) * c;
      if (iy >= 0 && iy < l.h && ix0 >= 0 && ix0 + r <= l.w) {
        copy_bytes(dst, src, r * c);
        continue;
      }
      for (std::int64_t b = 0; b < r; ++b) {
        const std::int64_t ix = ix0 + b;
        if (iy < 0 || iy >= l.h || ix < 0 || ix >= l.w) {
          std::memset(dst + b * c, pad_code, static_cast<std::size_t>(c));
        } else {
          std::memcpy(dst + b * c, src + b * c, static_cast<std::size_t>(c));
        }
      }
    }
    if (++ox == l.ow) {
      ox = 0;
      if (++oy == l.oh) {
        oy = 0;
        ++n;
      }
    }
  }
}

// The layer's quantized weights as B [r*r*c (or the fc's NHWC-flattened
// input), k]: row (a * r + b) * c + ci for a conv; (y * w + x) * c + ci for an
// fc whose input is an image (PyTorch flattens NCHW: ci * h * w + y * w + x).
std::vector<std::int8_t> weights_as_b(const Layer& l, const std::vector<std::int8_t>& w) {
  const std::int64_t plane = l.kind == LayerKind::conv ? l.window * l.window : l.h * l.w;
  const std::int64_t rows = plane * l.c;
  std::vector<std::int8_t> b(static_cast<std::size_t>(rows * l.k));
  for (std::int64_t k = 0; k < l.k; ++k)
    for (std::int64_t ci = 0; ci < l.c; ++ci)
      for (std::int64_t p = 0; p < plane; ++p)
        b[static_cast<std::size_t>((p * l.c + ci) * l.k + k)] = w[static_cast<std::size_t>((k * l.c + ci) * plane + p)];
  return b;
}

// Channel vectors of one output pixel: out = max(out, in), byte-wise; the
// pointers never overlap (restrict lets the compiler vectorize).
inline void max_bytes(std::uint8_t* __restrict out, const std::uint8_t* __restrict in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = out[i] > in[i] ? out[i] : in[i];
}

void max_pool_u8(const Layer& l, std::int64_t batch, const std::uint8_t* x, std::uint8_t* y) {
#pragma omp parallel for
  for (std::int64_t ny = 0; ny < batch * l.oh; ++ny) {
    const std::int64_t n = ny / l.oh, oy = ny % l.oh;
    for (std::int64_t ox = 0; ox < l.ow; ++ox) {
      std::uint8_t* out = y + (ny * l.ow + ox) * l.c;
      const auto at = [&](std::int64_t a, std::int64_t b) {
        return x + ((n * l.h + oy * l.stride + a) * l.w + ox * l.stride + b) * l.c;
      };
      std::memcpy(out, at(0, 0), static_cast<std::size_t>(l.c));
      for (std::int64_t a = 0; a < l.window; ++a)
        for (std::int64_t b = a == 0 ? 1 : 0; b < l.window; ++b) max_bytes(out, at(a, b), l.c);
    }
  }
}

// The mean of each channel's codes, rounded: the output keeps the input's
// scale and zero point (the mean of x / s + z is mean(x) / s + z).
void global_avg_pool_u8(const Layer& l, std::int64_t batch, const std::uint8_t* x, std::uint8_t* y) {
  const std::int64_t plane = l.h * l.w;
  const float inv = 1.0f / static_cast<float>(plane);
#pragma omp parallel for
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t c = 0; c < l.c; ++c) {
      std::int32_t sum = 0;
      for (std::int64_t p = 0; p < plane; ++p) sum += x[(n * plane + p) * l.c + c];
      y[n * l.c + c] = static_cast<std::uint8_t>(std::nearbyint(static_cast<float>(sum) * inv));
    }
}

Run prepare_own_s8(const NetArgs& args, WeightScales weight_scales) {
  const Network& net = *args.net;
  const ActivationQuant quant = activation_quant(net, calibration(net.name));
  const std::int64_t batch = args.batch;
  const auto& layers = net.layers;
  auto st = std::make_shared<State>();
  st->input = HostBuffer<std::uint8_t>(static_cast<std::size_t>(batch * net.in_size()));
  const AffineU8 input_q = quant.input;
  st->u8.resize(layers.size());
  st->f32.resize(layers.size());
  st->params.resize(layers.size());

  std::vector<Run> calls;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const bool f32 = dequantized_output(net, i);
    const bool last = i + 1 == layers.size();
    const auto from = static_cast<std::size_t>(l.input);
    const AffineU8 in_q = l.input < 0 ? input_q : st->params[from];
    const std::uint8_t* in = l.input < 0 ? st->input.data() : st->u8[from].data();
    st->params[i] = quant.outputs[i];
    const auto out_elements = static_cast<std::size_t>(batch * l.out_size());
    if (f32 && !last) st->f32[i] = HostBuffer<float>(out_elements);
    if (!f32) st->u8[i] = HostBuffer<std::uint8_t>(out_elements);
    std::uint8_t* out_u8 = f32 ? nullptr : st->u8[i].data();
    float* out_f32 = !f32 ? nullptr : last ? args.y : st->f32[i].data();
    DLB_REQUIRE(l.input >= 0 || l.kind == LayerKind::conv || l.kind == LayerKind::fc,
                "cpu_own_s8: the first layer of " + net.name + " is not a conv or fc");
    DLB_REQUIRE(l.kind == LayerKind::log_softmax || !f32 || l.kind == LayerKind::conv || l.kind == LayerKind::fc,
                "cpu_own_s8: " + l.name + " would have to write fp32");
    if (l.kind == LayerKind::log_softmax) {
      DLB_REQUIRE(last && l.input >= 0 && st->f32[from].size() > 0, "cpu_own_s8: log-softmax must end the network");
      calls.push_back([st, sm = SoftmaxArgs{batch, l.k, st->f32[from].data(), args.y}] {
        softmax_fused<SoftmaxKind::log_softmax>(sm);
      });
      continue;
    }
    if (l.kind == LayerKind::max_pool) {
      calls.push_back([st, &l, batch, in, out_u8] { max_pool_u8(l, batch, in, out_u8); });
      continue;
    }
    if (l.kind == LayerKind::global_avg_pool) {
      calls.push_back([st, &l, batch, in, out_u8] { global_avg_pool_u8(l, batch, in, out_u8); });
      continue;
    }

    // conv or fc: one GEMM with the layer's output stage.
    const bool conv = l.kind == LayerKind::conv;
    const std::int64_t m = conv ? batch * l.oh * l.ow : batch;
    const std::int64_t k = conv ? l.window * l.window * l.c : l.in_size();
    const bool gather = conv && !(l.window == 1 && l.stride == 1 && l.pad == 0);
    const S8Weights w = quantize_weights(l, weight_scales);
    const std::vector<std::int8_t> b_q = weights_as_b(l, w.values);
    std::vector<float> c_scale(w.scales.size());
    for (std::size_t j = 0; j < c_scale.size(); ++j) c_scale[j] = in_q.scale * w.scales[j];
    GemmArgs g;
    g.m = m;
    g.n = l.k;
    g.k = k;
    g.a_u8 = gather ? nullptr : in;
    g.a_zero_point = in_q.zero_point;
    g.b_s8 = b_q.data();
    g.c_scale = c_scale.data();
    VnniOutput o;
    o.bias = l.bias.data();  // the network outlives the prepared pass
    if (l.residual >= 0) {
      const auto r = static_cast<std::size_t>(l.residual);
      o.residual = st->u8[r].data();
      o.residual_scale = st->params[r].scale;
      o.residual_zero_point = st->params[r].zero_point;
    }
    o.relu = l.relu;
    o.out_u8 = out_u8;
    o.out_scale = st->params[i].scale;
    o.out_zero_point = st->params[i].zero_point;
    o.out_f32 = out_f32;
    GatherRows patches;
    if (gather) {
      patches = [&l, in, pad = static_cast<std::uint8_t>(in_q.zero_point)](std::int64_t row0, int rows,
                                                                           std::uint8_t* dst) {
        patch_rows(l, in, pad, row0, rows, dst);
      };
    }
    // Packs B now; b_q and c_scale are not kept.
    Run gemm = prepare_gemm_vnni_s8_out(g, o, std::move(patches));
    const bool quantize = l.input < 0;
    calls.push_back([st, args, gemm = std::move(gemm), quantize, in_q] {
      if (quantize) quantize_input(args, in_q, st->input.data());
      gemm();
    });
  }
  if (args.report != nullptr) {
    args.report->implementation =
        std::string("own VNNI u8 x s8 GEMM, fused requantization, NHWC u8, weight scales per ") +
        (weight_scales == WeightScales::per_tensor ? "tensor" : "channel");
  }
  return run_layers(std::move(calls), args.report);
}

}  // namespace

Run prepare_net_cpu_own_s8(const NetArgs& args, const Exec&) { return prepare_own_s8(args, WeightScales::per_channel); }

Run prepare_net_cpu_own_pertensor_s8(const NetArgs& args, const Exec&) {
  return prepare_own_s8(args, WeightScales::per_tensor);
}

}  // namespace dlb::nn
