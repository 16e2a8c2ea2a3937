// The plan of gpu_own_s8, gpu_own_mma_s8 and gpu_cublaslt_s8 (see nn.h),
// built once for each target: the GPU (nn_gpu_own_s8.cpp: device buffers,
// the kernels of nn_gpu_kernels.cu, cuBLASLt) and the host twins
// (nn_s8_direct_host.cpp: host buffers, the same element functions of
// s8_direct_math.h and lane functions of s8_mma_math.h in loops), which the
// CPU tests run.
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
#include "kernels/nn/model/calibration.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/s8/s8_direct_math.h"
#include "kernels/nn/s8/s8_mma_math.h"
#include "kernels/nn/infer/walk.h"
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

// A conv's weights and reduction order for s8_mma_math.h's MmaConv: the
// B fragments (word j of the reduction is PackedWeights' word j of the
// column; zero past the last word or column) and the table of taps.
struct MmaPacked {
  std::vector<std::uint32_t> b;  // [n_tiles][k_steps][32][2]
  std::vector<MmaTap> taps;      // [k_steps * 8]
  int k_steps = 0, n_tiles = 0, nt = 1;
};

inline MmaPacked pack_mma(const Conv& c, const PackedWeights& p) {
  MmaPacked m;
  const int words = c.rh * c.rw * c.words;
  m.k_steps = (words + kMmaWordsPerStep - 1) / kMmaWordsPerStep;
  m.nt = mma_warp_n_tiles(c.k);
  m.n_tiles = ((c.k + 7) / 8 + m.nt - 1) / m.nt * m.nt;
  DLB_REQUIRE(c.rh < kMmaNoTap && c.rw < kMmaNoTap && c.h < kMmaNoTap && c.w < kMmaNoTap,
              "gpu_own_mma_s8: a conv too large for the tap table");
  m.b.assign(static_cast<std::size_t>(m.n_tiles) * m.k_steps * 64, 0u);
  for (int tile = 0; tile < m.n_tiles; ++tile)
    for (int s = 0; s < m.k_steps; ++s)
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 2; ++r) {
          // register r of lane: column groupID, codes 16r + 4 threadID_in_group.. of the step (ptx::b_element)
          const int j = s * kMmaWordsPerStep + 4 * r + lane % 4, o = tile * 8 + lane / 4;
          if (j < words && o < c.k)
            m.b[((static_cast<std::size_t>(tile) * m.k_steps + s) * 32 + lane) * 2 + r] =
                p.words[static_cast<std::size_t>(j) * c.k + o];
        }
  m.taps.resize(static_cast<std::size_t>(m.k_steps) * kMmaWordsPerStep);
  for (int j = 0; j < static_cast<int>(m.taps.size()); ++j) {
    MmaTap& t = m.taps[static_cast<std::size_t>(j)];
    if (j >= words) {
      t.dy = kMmaNoTap;
      continue;
    }
    const int tap = j / c.words, g = j % c.words;
    t.dy = static_cast<std::int16_t>(tap / c.rw);
    t.dx = static_cast<std::int16_t>(tap % c.rw);
    t.offset = (t.dy * c.w + t.dx) * c.words * 4 + 4 * g;
  }
  return m;
}

// A layer's output as the next layers read it: u8 NHWC codes, channels
// padded to a multiple of 4 with the zero point (u8_size bytes), or (the
// logits, the input of log-softmax) fp32.
struct Codes {
  const std::uint8_t* u8 = nullptr;
  std::size_t u8_size = 0;
  const float* f32 = nullptr;
};

// Target: what the plan runs on. It provides
//   template <class T> using Buffer = ...;    (HostBuffer or DeviceBuffer)
//   template <class T> Buffer<T> upload(const std::vector<T>&) const;
//   void fill(Buffer<std::uint8_t>&, std::uint8_t) const;  (complete on return)
//   void run(const Quantize&) const; run(const MaxPool&); run(const AvgPool&);
//   Run conv(const Conv&, const PackedWeights&) const;  (made once: what runs the conv)
//   void log_softmax(const SoftmaxArgs&) const;
//   static constexpr const char* name;            (the row, for messages)
//   static constexpr const char* implementation;  (the report's)
// and is copied into every call. The plan's functions for the walk (walk.h).
template <class Target>
class DirectLayers final : public GraphBackend<Codes> {
 public:
  DirectLayers(const NetArgs& args, const Target& target)
      : args_(args), net_(*args.net), quant_(activation_quant(net_, calibration(net_.name))), target_(target),
        row_(Target::name), b_(std::make_shared<Buffers>()) {
    b_->u8.resize(net_.layers.size());
    b_->f32.resize(net_.layers.size());
    DLB_REQUIRE(!net_.layers.empty() &&
                    (net_.layers[0].kind == LayerKind::conv || net_.layers[0].kind == LayerKind::fc),
                row_ + ": the first layer of " + net_.name + " is not a conv or fc");
    b_->input = u8_buffer(args.batch * net_.h * net_.w, input_pitch(), quant_.input.zero_point);
  }
  Codes input() const { return {b_->input.data(), b_->input.size(), nullptr}; }

  Out log_softmax(const Layer& l, const Io& io) override {
    const Output o = output(l, io);
    DLB_REQUIRE(o.last && l.input >= 0 && io.x.f32 != nullptr, row_ + ": log-softmax must end the network");
    return {o.codes, [buffers = b_, target = target_, sm = SoftmaxArgs{args_.batch, l.k, io.x.f32, args_.y}] {
              target.log_softmax(sm);
            }};
  }
  Out max_pool(const Layer& l, const Io& io) override {
    const Output o = output(l, io);
    const MaxPool p{args_.batch,           static_cast<int>(l.c),      static_cast<int>(l.h),
                    static_cast<int>(l.w), static_cast<int>(l.oh),     static_cast<int>(l.ow),
                    static_cast<int>(l.window), static_cast<int>(l.stride), o.in_pitch,
                    io.x.u8,               o.u8};
    return {o.codes, [buffers = b_, target = target_, p] { target.run(p); }};
  }
  Out global_avg_pool(const Layer& l, const Io& io) override {
    const Output o = output(l, io);
    const AvgPool p{args_.batch, static_cast<int>(l.c), static_cast<int>(l.h * l.w), o.in_pitch,
                    1.0f / static_cast<float>(l.h * l.w), io.x.u8, o.u8};
    return {o.codes, [buffers = b_, target = target_, p] { target.run(p); }};
  }
  Out conv(const Layer& l, const Io& io) override { return weighted(l, io); }
  Out fc(const Layer& l, const Io& io) override { return weighted(l, io); }
  std::string implementation() const override { return Target::implementation; }

 private:
  struct Buffers {
    typename Target::template Buffer<std::uint8_t> input;                  // the quantized network input
    std::vector<typename Target::template Buffer<std::uint8_t>> u8;        // per layer, or empty
    std::vector<typename Target::template Buffer<float>> f32;              // per layer if not y, or empty
    std::vector<typename Target::template Buffer<std::uint32_t>> weights;  // per conv/fc
    std::vector<typename Target::template Buffer<std::int32_t>> compensation;
    std::vector<typename Target::template Buffer<float>> scale, bias;
  };

  typename Target::template Buffer<std::uint8_t> u8_buffer(std::int64_t pixels, int pitch,
                                                           std::int32_t zero_point) const {
    typename Target::template Buffer<std::uint8_t> buffer(static_cast<std::size_t>(pixels * pitch));
    target_.fill(buffer, static_cast<std::uint8_t>(zero_point));  // the channels past the tensor's: its zero point
    return buffer;
  }
  int input_pitch() const { return rounded_to_4(net_.c); }

  // The layer's output buffer: u8, or fp32 where it is the logits or the
  // input of log-softmax (the last layer's is the caller's y).
  struct Output {
    Codes codes;
    std::uint8_t* u8 = nullptr;
    float* f32 = nullptr;
    int in_pitch = 0, out_pitch = 0;
    std::int64_t out_pixels = 0;
    bool last = false;
  };
  Output output(const Layer& l, const Io& io) {
    const std::size_t i = io.index;
    const bool f32 = dequantized_output(net_, i);
    Output o;
    o.last = i + 1 == net_.layers.size();
    o.in_pitch = l.input < 0 ? input_pitch() : rounded_to_4(l.c);
    o.out_pitch = rounded_to_4(l.k);
    o.out_pixels = args_.batch * l.oh * l.ow;
    DLB_REQUIRE(l.kind == LayerKind::log_softmax || !f32 || l.kind == LayerKind::conv || l.kind == LayerKind::fc,
                row_ + ": " + l.name + " would have to write fp32");
    DLB_REQUIRE(!f32 || l.kind == LayerKind::log_softmax || l.oh * l.ow == 1,
                row_ + ": " + l.name + " writes fp32 NHWC, which is the network's layout only for 1 x 1 outputs");
    if (f32 && !o.last)
      b_->f32[i] = typename Target::template Buffer<float>(static_cast<std::size_t>(args_.batch * l.out_size()));
    if (!f32) b_->u8[i] = u8_buffer(o.out_pixels, o.out_pitch, quant_.outputs[i].zero_point);
    o.f32 = !f32 ? nullptr : o.last ? args_.y : b_->f32[i].data();
    o.u8 = f32 ? nullptr : b_->u8[i].data();
    o.codes = {o.u8, b_->u8[i].size(), o.f32};
    return o;
  }

  // conv or fc: what the target makes of it.
  Out weighted(const Layer& l, const Io& io) {
    const Output o = output(l, io);
    const std::int64_t batch = args_.batch;
    const AffineU8 in_q = l.input < 0 ? quant_.input : quant_.outputs[static_cast<std::size_t>(l.input)];
    const AffineU8 out_q = quant_.outputs[io.index];
    Buffers& b = *b_;
    const bool conv = l.kind == LayerKind::conv;
    const int rh = static_cast<int>(conv ? l.window : l.h), rw = static_cast<int>(conv ? l.window : l.w);
    const PackedWeights packed = pack_weights(l, rh, rw, o.in_pitch / 4, in_q);
    b.weights.push_back(target_.upload(packed.words));
    b.compensation.push_back(target_.upload(packed.compensation));
    b.scale.push_back(target_.upload(packed.scale));
    b.bias.push_back(target_.upload(l.bias));
    Conv c;
    c.batch = batch;
    c.h = static_cast<int>(l.h);
    c.w = static_cast<int>(l.w);
    c.words = o.in_pitch / 4;
    c.k = static_cast<int>(l.k);
    c.oh = static_cast<int>(l.oh);
    c.ow = static_cast<int>(l.ow);
    c.rh = rh;
    c.rw = rw;
    c.stride = conv ? static_cast<int>(l.stride) : 1;
    c.pad = conv ? static_cast<int>(l.pad) : 0;
    c.x = io.x.u8;  // the buffers' starts are aligned, pitches multiples of 4
    c.pad_word = 0x01010101u * static_cast<std::uint32_t>(in_q.zero_point);
    c.weights = b.weights.back().data();
    c.compensation = b.compensation.back().data();
    c.scale = b.scale.back().data();
    c.bias = b.bias.back().data();
    if (io.residual != nullptr) {
      const auto r = static_cast<std::size_t>(l.residual);
      DLB_REQUIRE(io.residual->u8_size == static_cast<std::size_t>(o.out_pixels * o.out_pitch),
                  row_ + ": the residual of " + l.name + " has another shape");
      c.out.residual = io.residual->u8;
      c.out.residual_scale = quant_.outputs[r].scale;
      c.out.residual_zero_point = quant_.outputs[r].zero_point;
    }
    c.out.relu = l.relu;
    c.out.out_u8 = o.u8;
    c.out.out_pitch = o.out_pitch;
    c.out.inv_out_scale = 1.0f / out_q.scale;
    c.out.out_zero_point = out_q.zero_point;
    c.out.out_f32 = o.f32;
    Run conv_call = target_.conv(c, packed);
    if (l.input < 0) {
      const Quantize q{batch,         static_cast<int>(net_.c), static_cast<int>(net_.h), static_cast<int>(net_.w),
                       input_pitch(), args_.x, 1.0f / in_q.scale, in_q.zero_point, b.input.data()};
      return {o.codes, [buffers = b_, target = target_, q, conv_call] {
                target.run(q);
                conv_call();
              }};
    }
    return {o.codes, [buffers = b_, conv_call] { conv_call(); }};
  }

  const NetArgs args_;
  const Network& net_;
  const ActivationQuant quant_;
  const Target target_;
  const std::string row_;
  std::shared_ptr<Buffers> b_;
};

template <class Target>
Run prepare_direct(const NetArgs& args, const Target& target) {
  DirectLayers<Target> backend(args, target);
  return walk_graph(args, backend, backend.input());
}

}  // namespace s8

// The host twins (nn_s8_direct_host.cpp): gpu_own_s8's plan and element
// functions on host memory, or with as_gemm gpu_cublaslt_s8's (each conv and
// fc with a multiple of 4 outputs as patches, an exact GEMM with cuBLASLt's
// output stage, and the requantizing epilogue), for the CPU tests.
Run prepare_s8_direct_on_host(const NetArgs& args, bool as_gemm = false);
// gpu_own_mma_s8's: every conv and fc through s8_mma_math.h's lane functions,
// the 32 lanes of each warp on their registers and the mma modelled from them.
Run prepare_s8_mma_on_host(const NetArgs& args);

}  // namespace dlb::nn
