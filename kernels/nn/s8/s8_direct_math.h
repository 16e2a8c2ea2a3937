// gpu_own_s8's arithmetic, one output element at a time (`element(params,
// i)` for i < params.elements(), one overload per kernel): the bodies of its
// CUDA kernels (nn_gpu_kernels.cu) and of their host twin (nn_s8_direct.h),
// which runs the same functions in loops so that the CPU tests check the
// indexing, packing and quantization of a row no GPU here can run.
//
// Activations are u8 codes, NHWC, `pitch` bytes a pixel: the tensor's
// channels rounded up to 4, because a conv reads a pixel as 32-bit words of
// 4 codes. The channels past the tensor's own hold its zero point (filled
// once when the buffer is made, never written after) and meet zero weights.
//
// Every floating-point step is one IEEE operation or an explicit fmaf, and
// integer sums are exact, so a GPU and the host compute the same bits: no
// contraction choice of either compiler can change a result.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DLB_HOST_DEVICE __host__ __device__
#else
#define DLB_HOST_DEVICE
#endif

namespace dlb::nn::s8 {

// sum of the 4 products of a's u8 and b's s8 bytes, plus c.
DLB_HOST_DEVICE inline std::int32_t dot4_u8s8(std::uint32_t a, std::uint32_t b, std::int32_t c) {
#if defined(__CUDA_ARCH__)
  std::int32_t d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  for (int i = 0; i < 4; ++i)
    c += static_cast<std::int32_t>((a >> (8 * i)) & 0xffu) * static_cast<std::int8_t>((b >> (8 * i)) & 0xffu);
  return c;
#endif
}

// The 4 codes at p (4-byte aligned) as one word, byte 0 lowest. On the host
// through memcpy: the buffers hold u8 codes, which a uint32_t load may not
// alias in C++.
DLB_HOST_DEVICE inline std::uint32_t load_word(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned int*>(p));
#else
  std::uint32_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
#endif
}

// The u8 code of v: clamp(round_even(v * inv_scale) + zero_point, 0, 255).
DLB_HOST_DEVICE inline std::uint8_t quantize_u8(float v, float inv_scale, std::int32_t zero_point) {
  const float q = rintf(v * inv_scale) + static_cast<float>(zero_point);
  return static_cast<std::uint8_t>(q < 0.0f ? 0.0f : q > 255.0f ? 255.0f : q);
}

// The network input, fp32 NCHW, to u8 codes NHWC: element i of x.
struct Quantize {
  std::int64_t batch = 0;
  int c = 0, h = 0, w = 0, pitch = 0;
  const float* x = nullptr;
  float inv_scale = 1;
  std::int32_t zero_point = 0;
  std::uint8_t* y = nullptr;
  DLB_HOST_DEVICE std::int64_t elements() const { return batch * c * h * w; }
};

DLB_HOST_DEVICE inline void element(const Quantize& q, std::int64_t i) {
  const std::int64_t plane = static_cast<std::int64_t>(q.h) * q.w;
  const std::int64_t n = i / (q.c * plane);
  const int ch = static_cast<int>(i / plane % q.c);
  const std::int64_t pixel = n * plane + i % plane;
  q.y[pixel * q.pitch + ch] = quantize_u8(q.x[i], q.inv_scale, q.zero_point);
}

// What a conv's or fc's output element becomes, from its value v (the
// dequantized sum plus the bias):
//     v = fmaf(fp32(residual code - its zero point), residual_scale, v)   (if residual)
//     v = max(v, 0)                                                      (if relu)
// stored as fp32 (out_f32 [pixels, k]) or as the next tensor's u8 code
// (out_u8 [pixels, out_pitch]).
struct Epilogue {
  const std::uint8_t* residual = nullptr;  // [pixels, out_pitch] u8, or null
  float residual_scale = 1;
  std::int32_t residual_zero_point = 0;
  bool relu = false;
  std::uint8_t* out_u8 = nullptr;  // or null: out_f32
  int out_pitch = 0;
  float inv_out_scale = 1;
  std::int32_t out_zero_point = 0;
  float* out_f32 = nullptr;
};

DLB_HOST_DEVICE inline void finish(const Epilogue& e, std::int64_t pixel, int o, int k, float v) {
  if (e.residual != nullptr)
    v = fmaf(static_cast<float>(static_cast<std::int32_t>(e.residual[pixel * e.out_pitch + o]) - e.residual_zero_point),
             e.residual_scale, v);
  if (e.relu) v = fmaxf(v, 0.0f);
  if (e.out_u8 != nullptr) {
    e.out_u8[pixel * e.out_pitch + o] = quantize_u8(v, e.inv_out_scale, e.out_zero_point);
  } else {
    e.out_f32[pixel * k + o] = v;
  }
}

// Output pixel `pixel` of an NHWC output of oh x ow pixels an image: its
// image n and position (oy, ox).
struct OutPixel {
  std::int64_t n;
  int oy, ox;
};
DLB_HOST_DEVICE inline OutPixel out_pixel(std::int64_t pixel, int oh, int ow) {
  return {pixel / (static_cast<std::int64_t>(ow) * oh), static_cast<int>(pixel / ow % oh),
          static_cast<int>(pixel % ow)};
}

// A conv, or an fc as a conv whose window is its whole input image (rh x rw
// = h x w, no padding, a 1 x 1 output): per output element (pixel, o) the
// exact sum over the window of (code - zero point) x weight, then
// v = fmaf(fp32(sum), scale[o], bias[o]) (one rounding) and the epilogue.
struct Conv {
  std::int64_t batch = 0;
  int h = 0, w = 0, words = 0;  // input: words (4 codes each) a pixel
  int k = 0, oh = 0, ow = 0, rh = 0, rw = 0, stride = 1, pad = 0;
  const std::uint8_t* x = nullptr;       // [batch, h, w, 4 * words], 4-byte aligned
  std::uint32_t pad_word = 0;             // 4 copies of x's zero point: the code of 0, outside the image
  const std::uint32_t* weights = nullptr;  // [rh][rw][words][k]: 4 s8 weights of channels 4g..4g+3 a word
  const std::int32_t* compensation = nullptr;  // [k]: x's zero point x the sum of output channel o's weights
  const float* scale = nullptr;                // [k]: x's scale x the weights' scale of o
  const float* bias = nullptr;                 // [k]
  Epilogue out;
  DLB_HOST_DEVICE std::int64_t pixels() const { return batch * oh * ow; }
  DLB_HOST_DEVICE std::int64_t elements() const { return pixels() * k; }
};

// Output element (pixel, o) of c from its exact sum over the window of
// code x weight: the zero point's share taken off, dequantized with the bias
// in one rounding, and the epilogue (every int8 conv kernel ends here).
DLB_HOST_DEVICE inline void finish_sum(const Conv& c, std::int64_t pixel, int o, std::int32_t sum) {
  sum -= c.compensation[o];
  finish(c.out, pixel, o, c.k, fmaf(static_cast<float>(sum), c.scale[o], c.bias[o]));
}

// Element i = pixel * k + o: the threads of a warp share a pixel's input
// words (one load, broadcast) and read consecutive weights.
DLB_HOST_DEVICE inline void element(const Conv& c, std::int64_t i) {
  const int o = static_cast<int>(i % c.k);
  const std::int64_t pixel = i / c.k;
  const auto [n, oy, ox] = out_pixel(pixel, c.oh, c.ow);
  std::int32_t sum = 0;
  for (int a = 0; a < c.rh; ++a) {
    const int iy = oy * c.stride + a - c.pad;
    for (int b = 0; b < c.rw; ++b) {
      const int ix = ox * c.stride + b - c.pad;
      const std::uint32_t* weights = c.weights + static_cast<std::int64_t>(a * c.rw + b) * c.words * c.k + o;
      if (iy >= 0 && iy < c.h && ix >= 0 && ix < c.w) {
        const std::uint8_t* in = c.x + ((n * c.h + iy) * c.w + ix) * c.words * 4;
        for (int g = 0; g < c.words; ++g)
          sum = dot4_u8s8(load_word(in + 4 * g), weights[static_cast<std::int64_t>(g) * c.k], sum);
      } else {
        for (int g = 0; g < c.words; ++g) sum = dot4_u8s8(c.pad_word, weights[static_cast<std::int64_t>(g) * c.k], sum);
      }
    }
  }
  finish_sum(c, pixel, o, sum);
}

// The same conv as a GEMM for a library (gpu_cublaslt_s8): its patch matrix
// [pixels, rh * rw * pitch], row = output pixel, column (a, b, channel) of
// its window, as the s8 encoding of the codes (code - 128; the input's zero
// point outside the image).
struct Patches {
  Conv conv;  // its shape and input
  DLB_HOST_DEVICE std::int64_t columns() const { return static_cast<std::int64_t>(conv.rh) * conv.rw * conv.words * 4; }
  std::int8_t* y = nullptr;
  DLB_HOST_DEVICE std::int64_t elements() const { return conv.pixels() * columns(); }
};

DLB_HOST_DEVICE inline void element(const Patches& p, std::int64_t i) {
  const Conv& c = p.conv;
  const std::int64_t column = i % p.columns(), pixel = i / p.columns();
  const int pitch = c.words * 4;
  const int ch = static_cast<int>(column % pitch), tap = static_cast<int>(column / pitch);
  const auto [n, oy, ox] = out_pixel(pixel, c.oh, c.ow);
  const int iy = oy * c.stride + tap / c.rw - c.pad, ix = ox * c.stride + tap % c.rw - c.pad;
  const bool inside = iy >= 0 && iy < c.h && ix >= 0 && ix < c.w;
  const std::uint8_t code =
      inside ? c.x[((n * c.h + iy) * c.w + ix) * pitch + ch] : static_cast<std::uint8_t>(c.pad_word & 0xffu);
  p.y[i] = static_cast<std::int8_t>(static_cast<int>(code) - 128);
}

// The epilogue after a library GEMM whose output stage wrote the dequantized
// sums (scaled[pixel, o] = fp32(sum) x scale[o]): v = scaled + bias[o].
struct Requantize {
  Conv conv;  // its shape, bias and epilogue
  const float* scaled = nullptr;  // [pixels, k]
  DLB_HOST_DEVICE std::int64_t elements() const { return conv.elements(); }
};

DLB_HOST_DEVICE inline void element(const Requantize& r, std::int64_t i) {
  const int o = static_cast<int>(i % r.conv.k);
  finish(r.conv.out, i / r.conv.k, o, r.conv.k, r.scaled[i] + r.conv.bias[o]);
}

// Window x window max pool (stride, no padding) on the codes; the output
// keeps the input's quantization. Element i = output pixel * c + channel.
struct MaxPool {
  std::int64_t batch = 0;
  int c = 0, h = 0, w = 0, oh = 0, ow = 0, window = 1, stride = 1, pitch = 0;  // pitch: input's and output's
  const std::uint8_t* x = nullptr;
  std::uint8_t* y = nullptr;
  DLB_HOST_DEVICE std::int64_t elements() const { return batch * oh * ow * c; }
};

DLB_HOST_DEVICE inline void element(const MaxPool& p, std::int64_t i) {
  const int ch = static_cast<int>(i % p.c);
  const std::int64_t pixel = i / p.c;
  const auto [n, oy, ox] = out_pixel(pixel, p.oh, p.ow);
  std::uint8_t m = 0;
  for (int a = 0; a < p.window; ++a)
    for (int b = 0; b < p.window; ++b) {
      const std::uint8_t v = p.x[((n * p.h + oy * p.stride + a) * p.w + ox * p.stride + b) * p.pitch + ch];
      m = v > m ? v : m;
    }
  p.y[pixel * p.pitch + ch] = m;
}

// Global average pool on the codes: the mean of a channel's codes, rounded
// (the output keeps the input's scale and zero point). Element i = n * c + ch.
struct AvgPool {
  std::int64_t batch = 0;
  int c = 0, plane = 0, pitch = 0;
  float inv_plane = 1;  // 1.0f / plane
  const std::uint8_t* x = nullptr;
  std::uint8_t* y = nullptr;
  DLB_HOST_DEVICE std::int64_t elements() const { return batch * c; }
};

DLB_HOST_DEVICE inline void element(const AvgPool& p, std::int64_t i) {
  const std::int64_t n = i / p.c;
  const int ch = static_cast<int>(i % p.c);
  std::int32_t sum = 0;
  for (int q = 0; q < p.plane; ++q) sum += p.x[(n * p.plane + q) * p.pitch + ch];
  p.y[n * p.pitch + ch] = static_cast<std::uint8_t>(rintf(static_cast<float>(sum) * p.inv_plane));
}

}  // namespace dlb::nn::s8
