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
//   u8 x s8 -> s32 GEMM [pixels, r*r*c] x [r*r*c, k] whose output stage in
//   registers scales the int32 sums back, adds the bias and the dequantized
//   residual, applies ReLU and requantizes to the next tensor's u8
//   (gemm_vnni.h). Where A's rows come from:
//   - a stride-1 conv with output rows of 16 pixels or more: implicit
//     GEMM, A's rows are views of the input padded with its zero point (the
//     code of 0), gemm_vnni.h's ShiftedImage: the input is copied into the
//     padded buffer first (read in place where the conv has no padding).
//     The network input is quantized straight into that buffer, its
//     channels rounded up to a multiple of 4 with zero weights where a
//     window row would otherwise split a group of 4 bytes (ResNet20's 3
//     channels), or, where that makes k smaller, its pixels expanded to
//     hold their whole window row, rounded up to 4 bytes (1 channel: k = 12
//     instead of 36 for 3 x 3, 40 instead of 100 for 5 x 5);
//   - a strided conv, or shorter rows: the patches gathered tile by tile
//     inside the GEMM into a buffer that stays in L1, padding with the
//     input's zero point;
//   - a 1x1 stride-1 conv and fc: the input in place.
//   fc weights are permuted once to the NHWC flattening.
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
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/common/error.h"
#include "kernels/gemm/gemm_vnni.h"
#include "kernels/gemm/quant.h"
#include "kernels/nn/model/calibration.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/infer/walk.h"
#include "kernels/softmax/softmax.h"

namespace dlb::nn {
namespace {

// Everything a prepared pass touches, owned by its calls.
struct State {
  std::vector<HostBuffer<std::uint8_t>> padded;      // per layer: its padded input (shifted convs), or empty
  std::vector<HostBuffer<std::uint8_t>> expanded;    // per layer: its input expanded to window rows, or empty
  std::vector<HostBuffer<std::uint8_t>> u8;          // per layer: its u8 output (NHWC), or empty
  std::vector<HostBuffer<float>> f32;                // per layer: its fp32 output if not y, or empty
  std::vector<AffineU8> params;                      // per layer: its output's quantization
};

// An NHWC u8 image inside a buffer of `pad` more pixels on every side and
// `channels` >= its own channels per pixel: where pixel (n, y, x) starts.
struct PaddedLayout {
  std::int64_t h = 0, w = 0, pad = 0, channels = 0;
  std::int64_t pitch() const { return w + 2 * pad; }
  std::int64_t image_bytes() const { return (h + 2 * pad) * pitch() * channels; }
  std::int64_t at(std::int64_t n, std::int64_t y, std::int64_t x) const {
    return n * image_bytes() + ((y + pad) * pitch() + x + pad) * channels;
  }
};

// An NHWC u8 tensor copied into the interior of its padded layout.
void pad_image(const std::uint8_t* in, std::int64_t batch, const PaddedLayout& to, std::uint8_t* out) {
  const std::int64_t row_bytes = to.w * to.channels;
#pragma omp parallel for
  for (std::int64_t ny = 0; ny < batch * to.h; ++ny)
    std::memcpy(out + to.at(ny / to.h, ny % to.h, 0), in + ny * row_bytes, static_cast<std::size_t>(row_bytes));
}

// Image n of the fp32 NCHW network input quantized to u8 NHWC, into `out`
// laid out as `to` (the padding and the channels past the input's are not
// written).
void quantize_image(const NetArgs& args, AffineU8 q, const PaddedLayout& to, std::int64_t n, std::uint8_t* out) {
  const Network& net = *args.net;
  const std::int64_t plane = net.h * net.w;
  const float inv = 1.0f / q.scale;
  const auto code = [inv, zero_point = static_cast<float>(q.zero_point)](float v) {
    return static_cast<std::uint8_t>(std::clamp(std::nearbyint(v * inv) + zero_point, 0.0f, 255.0f));
  };
  for (std::int64_t c = 0; c < net.c; ++c) {
    const float* x = args.x + (n * net.c + c) * plane;
    for (std::int64_t y = 0; y < net.h; ++y) {
      std::uint8_t* row = out + to.at(n, y, 0) + c;
      const float* in = x + y * net.w;
      if (to.channels == 1) {  // contiguous: vectorized
        for (std::int64_t p = 0; p < net.w; ++p) row[p] = code(in[p]);
      } else {
        for (std::int64_t p = 0; p < net.w; ++p) row[p * to.channels] = code(in[p]);
      }
    }
  }
}

// Image n of the padded image `from` (laid out as `layout`) expanded for a
// window of r rows x 1 column: pixel (n, y, x) of `out` ([batch][h + 2 pad]
// [ow][bytes]: padded rows, unpadded columns) holds the r x c bytes of
// pixels (y, x) .. (y, x + r - 1) of `from`, then bytes - r * c bytes of
// what follows them in the row, or zeros past its end (they meet zero
// weights).
void expand_image(const std::uint8_t* from, const PaddedLayout& layout, std::int64_t n, std::int64_t ow,
                  std::int64_t bytes, std::uint8_t* out) {
  const std::int64_t rows = layout.h + 2 * layout.pad, row_bytes = layout.pitch() * layout.channels;
  const auto copy = [&](auto pixel_bytes) {  // a compile-time width: one load and one store a pixel
    const auto width = static_cast<std::int64_t>(pixel_bytes);
    for (std::int64_t row = n * rows; row < (n + 1) * rows; ++row) {
      const std::uint8_t* src = from + row * row_bytes;
      std::uint8_t* dst = out + row * ow * width;
      std::int64_t x = 0;
      for (; x < ow && x * layout.channels + width <= row_bytes; ++x)
        std::memcpy(dst + x * width, src + x * layout.channels, pixel_bytes);
      for (; x < ow; ++x) {  // the row ends before `bytes` do
        std::memset(dst + x * width, 0, pixel_bytes);
        std::memcpy(dst + x * width, src + x * layout.channels,
                    static_cast<std::size_t>(row_bytes - x * layout.channels));
      }
    }
  };
  if (bytes == 4) return copy(std::integral_constant<std::size_t, 4>{});
  if (bytes == 8) return copy(std::integral_constant<std::size_t, 8>{});
  copy(static_cast<std::size_t>(bytes));
}

// The network input quantized into `out` laid out as `to`, and expanded
// into `expanded` (if not null) for an r x 1 window: one parallel region,
// an image per iteration.
void quantize_input(const NetArgs& args, AffineU8 q, const PaddedLayout& to, std::uint8_t* out,
                    std::uint8_t* expanded, std::int64_t ow, std::int64_t expanded_bytes) {
#pragma omp parallel for
  for (std::int64_t n = 0; n < args.batch; ++n) {
    quantize_image(args, q, to, n, out);
    if (expanded != nullptr) expand_image(out, to, n, ow, expanded_bytes, expanded);
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

// The layer's quantized weights as B [rows, k]: weight (ci, a, b) of a
// conv's window (row a, column b) or of an fc's input image (pixel (a, b))
// in row a * row_stride + b * tap_stride + ci, the other rows zero. For A
// as r x r x channels patches row_stride is r * channels and tap_stride
// channels (channels >= c); for an image expanded to window rows
// (expand_image) row_stride is its bytes a pixel and tap_stride c; for an fc
// whose input is an image, the NHWC flattening (PyTorch flattens NCHW: ci *
// h * w + a * w + b), row_stride w * c and tap_stride c.
std::vector<std::int8_t> weights_as_b(const Layer& l, const std::vector<std::int8_t>& w, std::int64_t rows,
                                      std::int64_t row_stride, std::int64_t tap_stride) {
  const bool conv = l.kind == LayerKind::conv;
  const std::int64_t height = conv ? l.window : l.h, width = conv ? l.window : l.w;
  std::vector<std::int8_t> b(static_cast<std::size_t>(rows * l.k), 0);
  for (std::int64_t k = 0; k < l.k; ++k)
    for (std::int64_t ci = 0; ci < l.c; ++ci)
      for (std::int64_t a = 0; a < height; ++a)
        for (std::int64_t t = 0; t < width; ++t)
          b[static_cast<std::size_t>((a * row_stride + t * tap_stride + ci) * l.k + k)] =
              w[static_cast<std::size_t>(((k * l.c + ci) * height + a) * width + t)];
  return b;
}

// Channel vectors of one output pixel: out = max(out, in), byte-wise; the
// pointers never overlap (restrict lets the compiler vectorize).
inline void max_bytes(std::uint8_t* __restrict out, const std::uint8_t* __restrict in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = out[i] > in[i] ? out[i] : in[i];
}

// A 2x2 window's four channel vectors into out, stored once. The general
// loop below stores out after each input and loads it again; with it,
// mnist_cnn's pool (batch 64) took 110 us in some processes and 520-600 us
// in others (the whole pass 2.43 against 2.90 ms). This one took 160 us in
// every process tried then; later, on the same VM and with the same binary,
// 160-180 us for a while and 33-45 us after, in every process (a standalone
// copy of the loop: 16-19 us, 87 us from DRAM, whatever the offset between
// input and output modulo 4 KiB). What moves it is the machine's state, not
// where the buffers lie, as far as that was looked at.
inline void max4_bytes(std::uint8_t* __restrict out, const std::uint8_t* __restrict a,
                       const std::uint8_t* __restrict b, const std::uint8_t* __restrict c,
                       const std::uint8_t* __restrict d, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t ab = a[i] > b[i] ? a[i] : b[i], cd = c[i] > d[i] ? c[i] : d[i];
    out[i] = ab > cd ? ab : cd;
  }
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
      if (l.window == 2) {
        max4_bytes(out, at(0, 0), at(0, 1), at(1, 0), at(1, 1), l.c);
        continue;
      }
      std::memcpy(out, at(0, 0), static_cast<std::size_t>(l.c));
      for (std::int64_t a = 0; a < l.window; ++a)
        for (std::int64_t b = a == 0 ? 1 : 0; b < l.window; ++b) max_bytes(out, at(a, b), l.c);
    }
  }
}

// The mean of each channel's codes, rounded: the output keeps the input's
// scale and zero point (the mean of x / s + z is mean(x) / s + z). Pixels
// outer, channels inner: the sums of one image are a vector of c int32 that
// the pixels' contiguous channel bytes are added to.
void global_avg_pool_u8(const Layer& l, std::int64_t batch, const std::uint8_t* x, std::uint8_t* y) {
  const std::int64_t plane = l.h * l.w;
  const float inv = 1.0f / static_cast<float>(plane);
#pragma omp parallel
  {
    std::vector<std::int32_t> sums(static_cast<std::size_t>(l.c));
#pragma omp for
    for (std::int64_t n = 0; n < batch; ++n) {
      std::fill(sums.begin(), sums.end(), 0);
      for (std::int64_t p = 0; p < plane; ++p) {
        const std::uint8_t* pixel = x + (n * plane + p) * l.c;
        for (std::int64_t c = 0; c < l.c; ++c) sums[static_cast<std::size_t>(c)] += pixel[c];
      }
      for (std::int64_t c = 0; c < l.c; ++c)
        y[n * l.c + c] =
            static_cast<std::uint8_t>(std::nearbyint(static_cast<float>(sums[static_cast<std::size_t>(c)]) * inv));
    }
  }
}

// A layer's output as the next layers read it: u8 NHWC codes or (the
// logits, the input of log-softmax) fp32, and its quantization.
struct Codes {
  const std::uint8_t* u8 = nullptr;
  const float* f32 = nullptr;
  AffineU8 q;
};

// cpu_own_s8's functions for the walk (walk.h), on buffers of its own.
class OwnS8Layers final : public GraphBackend<Codes> {
 public:
  OwnS8Layers(const NetArgs& args, WeightScales weight_scales)
      : args_(args), quant_(activation_quant(*args.net, calibration(args.net->name))), weight_scales_(weight_scales),
        st_(std::make_shared<State>()) {
    const std::size_t layers = args.net->layers.size();
    st_->padded.resize(layers);
    st_->expanded.resize(layers);
    st_->u8.resize(layers);
    st_->f32.resize(layers);
    st_->params.resize(layers);
  }
  Codes input() const { return {nullptr, nullptr, quant_.input}; }

  Out log_softmax(const Layer& l, const Io& io) override {
    const Output o = output(l, io);
    DLB_REQUIRE(o.last && l.input >= 0 && io.x.f32 != nullptr, "cpu_own_s8: log-softmax must end the network");
    return {o.codes, [st = st_, sm = SoftmaxArgs{args_.batch, l.k, io.x.f32, args_.y}] {
              softmax_fused<SoftmaxKind::log_softmax>(sm);
            }};
  }
  Out max_pool(const Layer& l, const Io& io) override {
    const Output o = output(l, io);
    return {o.codes, [st = st_, &l, batch = args_.batch, in = io.x.u8, out = o.u8] { max_pool_u8(l, batch, in, out); }};
  }
  Out global_avg_pool(const Layer& l, const Io& io) override {
    const Output o = output(l, io);
    return {o.codes,
            [st = st_, &l, batch = args_.batch, in = io.x.u8, out = o.u8] { global_avg_pool_u8(l, batch, in, out); }};
  }
  Out conv(const Layer& l, const Io& io) override { return gemm(l, io); }
  Out fc(const Layer& l, const Io& io) override { return gemm(l, io); }

  std::string implementation() const override {
    return std::string("own VNNI u8 x s8 GEMM, fused requantization, NHWC u8, weight scales per ") +
           (weight_scales_ == WeightScales::per_tensor ? "tensor" : "channel");
  }

 private:
  // The layer's output buffer (u8, or fp32 where it is the logits or the
  // input of log-softmax; the last layer's fp32 is the caller's y).
  struct Output {
    Codes codes;
    std::uint8_t* u8 = nullptr;
    float* f32 = nullptr;
    bool last = false;
  };
  Output output(const Layer& l, const Io& io) {
    const Network& net = *args_.net;
    const std::size_t i = io.index;
    const bool f32 = dequantized_output(net, i);
    Output o;
    o.last = i + 1 == net.layers.size();
    st_->params[i] = quant_.outputs[i];
    const auto out_elements = static_cast<std::size_t>(args_.batch * l.out_size());
    if (f32 && !o.last) st_->f32[i] = HostBuffer<float>(out_elements);
    if (!f32) st_->u8[i] = HostBuffer<std::uint8_t>(out_elements);
    o.u8 = f32 ? nullptr : st_->u8[i].data();
    o.f32 = !f32 ? nullptr : o.last ? args_.y : st_->f32[i].data();
    o.codes = {o.u8, o.f32, st_->params[i]};
    DLB_REQUIRE(l.input >= 0 || l.kind == LayerKind::conv || l.kind == LayerKind::fc,
                "cpu_own_s8: the first layer of " + net.name + " is not a conv or fc");
    DLB_REQUIRE(l.kind == LayerKind::log_softmax || !f32 || l.kind == LayerKind::conv || l.kind == LayerKind::fc,
                "cpu_own_s8: " + l.name + " would have to write fp32");
    return o;
  }

  // conv or fc: one GEMM with the layer's output stage.
  Out gemm(const Layer& l, const Io& io) {
    const Output out = output(l, io);
    const NetArgs& args = args_;
    const std::int64_t batch = args.batch;
    const std::size_t i = io.index;
    const auto& st = st_;
    const AffineU8 in_q = io.x.q;
    const std::uint8_t* in = io.x.u8;
    std::uint8_t* out_u8 = out.u8;
    float* out_f32 = out.f32;
    const WeightScales weight_scales = weight_scales_;
    const bool conv = l.kind == LayerKind::conv;
    // Where A comes from (the header): the shifted padded input, gathered
    // patches, or the input in place.
    // A tile of the shifted view is pixels of one output row: rows of fewer
    // than 16 pixels make short tiles (ResNet20's 8 x 8 stage, 64 channels:
    // two of 4 rows; 460 us per layer at batch 64, gathered 400).
    const bool implicit = conv && l.stride == 1 && l.window > 1 && l.ow >= 16;
    // The network input's conv, two ways to keep a group of 4 bytes of k
    // inside one window row: its channels rounded up (zero weights), or its
    // pixels expanded to hold their whole window row (expand_image), k = r x
    // (r * c rounded up to 4), whichever k is smaller: 12 against 36 for a
    // 3 x 3 window of 1 channel, 40 against 100 for 5 x 5 (3 channels: 36
    // either way, channels rounded).
    std::int64_t rounded = l.c;
    while (l.window * rounded % 4 != 0) ++rounded;
    const std::int64_t row_bytes = (l.window * l.c + 3) / 4 * 4;
    const bool expand = implicit && l.input < 0 && row_bytes < l.window * rounded;
    const std::int64_t channels = implicit && l.input < 0 && !expand ? rounded : l.c;
    const bool shifted = implicit && (expand || l.window * channels % 4 == 0);
    const bool gather = conv && !shifted && !(l.window == 1 && l.stride == 1 && l.pad == 0);
    const bool quantize = l.input < 0;
    const PaddedLayout layout{l.h, l.w, shifted ? l.pad : 0, channels};
    const bool own_copy = quantize || (shifted && l.pad > 0);  // else A is the previous layer's output
    if (own_copy) {
      st->padded[i] = HostBuffer<std::uint8_t>(static_cast<std::size_t>(batch * layout.image_bytes()));
      std::fill(st->padded[i].span().begin(), st->padded[i].span().end(), static_cast<std::uint8_t>(in_q.zero_point));
    }
    std::uint8_t* copy = own_copy ? st->padded[i].data() : nullptr;
    if (expand) {
      const std::int64_t rows = l.h + 2 * l.pad;
      st->expanded[i] = HostBuffer<std::uint8_t>(static_cast<std::size_t>(batch * rows * l.ow * row_bytes));
    }
    std::uint8_t* expanded = expand ? st->expanded[i].data() : nullptr;
    const std::uint8_t* a = expand ? expanded : own_copy ? copy : in;
    const std::int64_t m = conv ? batch * l.oh * l.ow : batch;
    const std::int64_t k = !conv ? l.in_size() : expand ? l.window * row_bytes : l.window * l.window * channels;
    const S8Weights w = quantize_weights(l, weight_scales);
    const std::vector<std::int8_t> b_q = !conv    ? weights_as_b(l, w.values, k, l.w * l.c, l.c)
                                         : expand ? weights_as_b(l, w.values, k, row_bytes, l.c)
                                                  : weights_as_b(l, w.values, k, l.window * channels, channels);
    std::vector<float> c_scale(w.scales.size());
    for (std::size_t j = 0; j < c_scale.size(); ++j) c_scale[j] = in_q.scale * w.scales[j];
    GemmArgs g;
    g.m = m;
    g.n = l.k;
    g.k = k;
    g.a_u8 = gather || shifted ? nullptr : a;
    g.a_zero_point = in_q.zero_point;
    g.b_s8 = b_q.data();
    g.c_scale = c_scale.data();
    VnniOutput o;
    o.bias = l.bias.data();  // the network outlives the prepared pass
    if (io.residual != nullptr) {
      o.residual = io.residual->u8;
      o.residual_scale = io.residual->q.scale;
      o.residual_zero_point = io.residual->q.zero_point;
    }
    o.relu = l.relu;
    o.out_u8 = out_u8;
    o.out_scale = st->params[i].scale;
    o.out_zero_point = st->params[i].zero_point;
    o.out_f32 = out_f32;
    // Packs B now; b_q and c_scale are not kept.
    Run gemm;
    if (expand) {
      gemm = prepare_gemm_vnni_s8_out(g, o, ShiftedImage{a, batch, l.oh, l.ow, row_bytes, l.window, 1});
    } else if (shifted) {
      gemm = prepare_gemm_vnni_s8_out(g, o, ShiftedImage{a, batch, l.oh, l.ow, channels, l.window, l.window});
    } else if (gather) {
      gemm = prepare_gemm_vnni_s8_out(g, o, [&l, a, pad = static_cast<std::uint8_t>(in_q.zero_point)](
                                                std::int64_t row0, int rows, std::uint8_t* dst) {
        patch_rows(l, a, pad, row0, rows, dst);
      });
    } else {
      gemm = prepare_gemm_vnni_s8_out(g, o);
    }
    return {out.codes, [st, args, gemm = std::move(gemm), quantize, in_q, in, batch, layout, copy, expanded, ow = l.ow,
                     row_bytes] {
      if (quantize) {
        quantize_input(args, in_q, layout, copy, expanded, ow, row_bytes);
      } else if (copy != nullptr) {
        pad_image(in, batch, layout, copy);
      }
      gemm();
    }};
  }

  const NetArgs args_;
  const ActivationQuant quant_;
  const WeightScales weight_scales_;
  std::shared_ptr<State> st_;
};

Run prepare_own_s8(const NetArgs& args, WeightScales weight_scales) {
  OwnS8Layers backend(args, weight_scales);
  return walk_graph(args, backend, backend.input());
}

}  // namespace

Run prepare_net_cpu_own_s8(const NetArgs& args, const Exec&) { return prepare_own_s8(args, WeightScales::per_channel); }

Run prepare_net_cpu_own_pertensor_s8(const NetArgs& args, const Exec&) {
  return prepare_own_s8(args, WeightScales::per_tensor);
}

}  // namespace dlb::nn
