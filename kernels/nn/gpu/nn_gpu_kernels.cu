// The own CUDA kernels of the GPU network backends (see nn_gpu.h). Written to
// be obviously right and reasonably fast, not tuned: one thread per output
// element, read-only loads through the texture path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/error.h"
#include "kernels/nn/gpu/nn_gpu.h"

namespace dlb::nn {
namespace {

constexpr unsigned kBlock = 256;

// One thread per output (n, k, oh, ow); the sum over (c, r, s) in a fixed
// order, then bias, residual, ReLU.
__global__ void conv_direct_fused(int batch, int c, int h, int w, int k, int oh, int ow, int r, int stride, int pad,
                                  const float* __restrict__ x, const float* __restrict__ wt,
                                  const float* __restrict__ bias, const float* __restrict__ residual, bool relu,
                                  float* __restrict__ y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  const long long total = static_cast<long long>(batch) * k * oh * ow;
  if (i >= total) return;
  const int j = static_cast<int>(i % ow);
  const int row = static_cast<int>((i / ow) % oh);
  const int o = static_cast<int>((i / (static_cast<long long>(ow) * oh)) % k);
  const int n = static_cast<int>(i / (static_cast<long long>(ow) * oh * k));
  float sum = 0.0f;
  for (int ch = 0; ch < c; ++ch) {
    const float* in = x + (static_cast<long long>(n) * c + ch) * h * w;
    const float* f = wt + (static_cast<long long>(o) * c + ch) * r * r;
    for (int a = 0; a < r; ++a) {
      const int iy = row * stride + a - pad;
      if (iy < 0 || iy >= h) continue;
      for (int b = 0; b < r; ++b) {
        const int ix = j * stride + b - pad;
        if (ix >= 0 && ix < w) sum = fmaf(__ldg(f + a * r + b), __ldg(in + iy * w + ix), sum);
      }
    }
  }
  float v = sum + __ldg(bias + o);
  if (residual != nullptr) v += __ldg(residual + i);
  y[i] = relu ? fmaxf(v, 0.0f) : v;
}

// One warp per output (n, k): lanes stride over the inputs, then a shuffle sum.
__global__ void fc_warp(int batch, int in, int out, const float* __restrict__ x, const float* __restrict__ w,
                        const float* __restrict__ bias, bool relu, float* __restrict__ y) {
  const long long warp = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<long long>(batch) * out) return;
  const int n = static_cast<int>(warp / out), o = static_cast<int>(warp % out);
  const float* xr = x + static_cast<long long>(n) * in;
  const float* wr = w + static_cast<long long>(o) * in;
  float sum = 0.0f;
  for (int i = lane; i < in; i += 32) sum = fmaf(__ldg(xr + i), __ldg(wr + i), sum);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) {
    const float v = sum + __ldg(bias + o);
    y[warp] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void bias_relu_rows(long long rows, int cols, const float* __restrict__ bias, bool relu,
                               float* __restrict__ y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= rows * cols) return;
  const float v = y[i] + __ldg(bias + i % cols);
  y[i] = relu ? fmaxf(v, 0.0f) : v;
}

__global__ void max_pool(long long planes, int h, int w, int oh, int ow, int window, int stride,
                         const float* __restrict__ x, float* __restrict__ y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= planes * oh * ow) return;
  const int j = static_cast<int>(i % ow), row = static_cast<int>((i / ow) % oh);
  const float* in = x + (i / (static_cast<long long>(oh) * ow)) * h * w + row * stride * w + j * stride;
  float m = in[0];
  for (int a = 0; a < window; ++a)
    for (int b = 0; b < window; ++b) m = fmaxf(m, __ldg(in + a * w + b));
  y[i] = m;
}

// One warp per plane.
__global__ void global_avg_pool(long long planes, int plane, const float* __restrict__ x, float* __restrict__ y) {
  const long long warp = (blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= planes) return;
  float sum = 0.0f;
  for (int i = lane; i < plane; i += 32) sum += __ldg(x + warp * plane + i);
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (lane == 0) y[warp] = sum / static_cast<float>(plane);
}

int to_int(std::int64_t v) { return static_cast<int>(v); }  // layer sizes are small

// ---------------------------------------------------------------- NHWC activations (16-bit, or fp32 for gpu_cudnn_fused)

__device__ float to_float(__half v) { return __half2float(v); }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ float to_float(float v) { return v; }
template <class T>
__device__ T from_float(float v);
template <>
__device__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Calls f with a value of the element type `type` names.
template <class F>
void with_type(NhwcType type, F&& f) {
  switch (type) {
    case NhwcType::f16: f(__half{}); return;
    case NhwcType::bf16: f(__nv_bfloat16{}); return;
    case NhwcType::f32: f(float{}); return;
  }
}

// One thread per element of y (NHWC), reading x (NCHW).
template <class T>
__global__ void to_nhwc16(const float* __restrict__ x, long long n, int c, long long plane, T* __restrict__ y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n * plane * c) return;
  const int ch = static_cast<int>(i % c);
  const long long pixel = i / c, image = pixel / plane;
  y[i] = from_float<T>(__ldg(x + (image * c + ch) * plane + pixel % plane));
}

template <class T>
__global__ void epilogue16(long long n, int k, long long plane, const float* __restrict__ acc_nchw,
                           const float* __restrict__ bias, const T* __restrict__ residual, bool relu, T* y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n * plane * k) return;
  const int ch = static_cast<int>(i % k);
  const long long pixel = i / k;
  float v = acc_nchw != nullptr ? __ldg(acc_nchw + (pixel / plane * k + ch) * plane + pixel % plane) : to_float(y[i]);
  v += __ldg(bias + ch);
  if (residual != nullptr) v += to_float(residual[i]);
  y[i] = from_float<T>(relu ? fmaxf(v, 0.0f) : v);
}

template <class T>
__global__ void max_pool_nhwc16(long long n, int c, int h, int w, int oh, int ow, int window, int stride,
                                const T* __restrict__ x, T* __restrict__ y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n * oh * ow * c) return;
  const int ch = static_cast<int>(i % c);
  const long long pixel = i / c;
  const int ox = static_cast<int>(pixel % ow), oy = static_cast<int>(pixel / ow % oh);
  const long long image = pixel / (static_cast<long long>(ow) * oh);
  float m = -INFINITY;
  for (int a = 0; a < window; ++a)
    for (int b = 0; b < window; ++b)
      m = fmaxf(m, to_float(x[((image * h + oy * stride + a) * w + ox * stride + b) * c + ch]));
  y[i] = from_float<T>(m);  // exact: m is one of the inputs
}

template <class T>
__global__ void global_avg_pool_nhwc16(long long n, int c, int plane, const T* __restrict__ x, T* __restrict__ y) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= n * c) return;
  const int ch = static_cast<int>(i % c);
  const long long image = i / c;
  float sum = 0.0f;
  for (int p = 0; p < plane; ++p) sum += to_float(x[(image * plane + p) * c + ch]);
  y[i] = from_float<T>(sum / static_cast<float>(plane));
}

// One thread per element of an s8_direct_math.h element function.
template <class Params>
__global__ void each_element(const Params p) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < p.elements()) s8::element(p, i);
}

// s8_mma_math.h's implicit GEMM: one warp per kMmaRows output pixels and NT
// n-tiles of 8 channels (blockIdx.y: which NT) over k-step range blockIdx.z,
// every lane its fragments.
template <int NT>
__global__ void __launch_bounds__(32 * s8::kMmaWarps) s8_mma_conv(const s8::MmaConv p) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const long long warp = blockIdx.x * static_cast<long long>(s8::kMmaWarps) + threadIdx.x / 32;
  if (warp >= p.warps()) return;  // the whole warp: mma.sync needs all 32 lanes
  const int nt0 = static_cast<int>(blockIdx.y) * NT;
  const int split = static_cast<int>(blockIdx.z);
  const s8::MmaRows rows = s8::mma_rows(p, warp, lane);
  s8::MmaLane<NT> l{};
  const int end = p.split_begin(split + 1);
  for (int s = p.split_begin(split); s < end; ++s) {
    s8::mma_load_a(p, rows, s, lane, l);
    s8::mma_load_b(p, nt0, s, lane, l);
#pragma unroll
    for (int mt = 0; mt < s8::kMmaMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) s8::mma_u8s8(l.a[mt], l.b[nt], l.c[mt][nt]);
  }
  if (p.splits > 1)
    s8::mma_add_partial(p, warp, nt0, lane, l);
  else
    s8::mma_store(p, warp, nt0, lane, l);
}

template <class Params>
void launch_each(const Params& p, CUstream_st* stream) {
  if (p.elements() == 0) return;
  each_element<Params><<<blocks_for(static_cast<std::size_t>(p.elements()), kBlock), kBlock, 0, stream>>>(p);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_conv_direct_fused(const Layer& l, std::int64_t batch, const float* x, const float* w, const float* bias,
                              const float* residual, float* y, CUstream_st* stream) {
  const std::size_t total = static_cast<std::size_t>(batch * l.out_size());
  conv_direct_fused<<<blocks_for(total, kBlock), kBlock, 0, stream>>>(
      to_int(batch), to_int(l.c), to_int(l.h), to_int(l.w), to_int(l.k), to_int(l.oh), to_int(l.ow), to_int(l.window),
      to_int(l.stride), to_int(l.pad), x, w, bias, residual, l.relu, y);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_fc(const Layer& l, std::int64_t batch, const float* x, const float* w, const float* bias, float* y,
               CUstream_st* stream) {
  const std::size_t threads = static_cast<std::size_t>(batch * l.k) * 32;
  fc_warp<<<blocks_for(threads, kBlock), kBlock, 0, stream>>>(to_int(batch), to_int(l.in_size()), to_int(l.k), x, w,
                                                             bias, l.relu, y);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_bias_relu_rows(std::int64_t rows, std::int64_t cols, const float* bias, bool relu, float* y,
                           CUstream_st* stream) {
  bias_relu_rows<<<blocks_for(static_cast<std::size_t>(rows * cols), kBlock), kBlock, 0, stream>>>(
      rows, to_int(cols), bias, relu, y);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_max_pool(const Layer& l, std::int64_t batch, const float* x, float* y, CUstream_st* stream) {
  const std::size_t total = static_cast<std::size_t>(batch * l.out_size());
  max_pool<<<blocks_for(total, kBlock), kBlock, 0, stream>>>(batch * l.c, to_int(l.h), to_int(l.w), to_int(l.oh),
                                                            to_int(l.ow), to_int(l.window), to_int(l.stride), x, y);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_global_avg_pool(const Layer& l, std::int64_t batch, const float* x, float* y, CUstream_st* stream) {
  const std::size_t threads = static_cast<std::size_t>(batch * l.c) * 32;
  global_avg_pool<<<blocks_for(threads, kBlock), kBlock, 0, stream>>>(batch * l.c, to_int(l.h * l.w), x, y);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_s8_quantize(const s8::Quantize& p, CUstream_st* stream) { launch_each(p, stream); }

void launch_s8_conv(const s8::Conv& p, CUstream_st* stream) { launch_each(p, stream); }

void launch_s8_patches(const s8::Patches& p, CUstream_st* stream) { launch_each(p, stream); }

void launch_s8_requantize(const s8::Requantize& p, CUstream_st* stream) { launch_each(p, stream); }

void launch_s8_max_pool(const s8::MaxPool& p, CUstream_st* stream) { launch_each(p, stream); }

void launch_s8_avg_pool(const s8::AvgPool& p, CUstream_st* stream) { launch_each(p, stream); }

void launch_s8_mma_conv(const s8::MmaConv& p, CUstream_st* stream) {
  if (p.warps() == 0) return;
  DLB_REQUIRE(p.splits >= 1 && p.splits <= p.k_steps && (p.splits == 1 || p.partial != nullptr),
              "gpu_own_mma_s8: " + std::to_string(p.splits) + " k ranges for " + std::to_string(p.k_steps) +
                  " k-steps" + (p.splits > 1 && p.partial == nullptr ? ", and no partial sums" : ""));
  if (p.splits > 1)
    DLB_CUDA_CHECK(cudaMemsetAsync(p.partial, 0, static_cast<std::size_t>(p.conv.elements()) * sizeof(std::int32_t),
                                   stream));
  const dim3 grid(static_cast<unsigned>((p.warps() + s8::kMmaWarps - 1) / s8::kMmaWarps),
                  static_cast<unsigned>(p.column_groups()), static_cast<unsigned>(p.splits));
  const unsigned block = 32 * s8::kMmaWarps;
  switch (p.nt) {
    case 1: s8_mma_conv<1><<<grid, block, 0, stream>>>(p); break;
    case 2: s8_mma_conv<2><<<grid, block, 0, stream>>>(p); break;
    case 4: s8_mma_conv<4><<<grid, block, 0, stream>>>(p); break;
    case 8: s8_mma_conv<8><<<grid, block, 0, stream>>>(p); break;
    default: DLB_REQUIRE(false, "gpu_own_mma_s8: no kernel for " + std::to_string(p.nt) + " n-tiles a warp");
  }
  DLB_CUDA_CHECK_LAUNCH();
  if (p.splits > 1) launch_each(s8::MmaFinish{p.conv, p.partial}, stream);
}

void launch_to_nhwc16(NhwcType type, const float* x, std::int64_t n, std::int64_t c, std::int64_t plane, void* y,
                      CUstream_st* stream) {
  const auto total = static_cast<std::size_t>(n * c * plane);
  with_type(type, [&](auto zero) {
    using T = decltype(zero);
    to_nhwc16<T><<<blocks_for(total, kBlock), kBlock, 0, stream>>>(x, n, to_int(c), plane, static_cast<T*>(y));
  });
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_epilogue16(NhwcType type, std::int64_t n, std::int64_t k, std::int64_t plane, const float* acc_nchw,
                       const float* bias, const void* residual, bool relu, void* y, CUstream_st* stream) {
  const auto total = static_cast<std::size_t>(n * k * plane);
  with_type(type, [&](auto zero) {
    using T = decltype(zero);
    epilogue16<T><<<blocks_for(total, kBlock), kBlock, 0, stream>>>(
        n, to_int(k), plane, acc_nchw, bias, static_cast<const T*>(residual), relu, static_cast<T*>(y));
  });
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_max_pool_nhwc16(NhwcType type, const Layer& l, std::int64_t batch, const void* x, void* y,
                            CUstream_st* stream) {
  const auto total = static_cast<std::size_t>(batch * l.out_size());
  with_type(type, [&](auto zero) {
    using T = decltype(zero);
    max_pool_nhwc16<T><<<blocks_for(total, kBlock), kBlock, 0, stream>>>(
        batch, to_int(l.c), to_int(l.h), to_int(l.w), to_int(l.oh), to_int(l.ow), to_int(l.window), to_int(l.stride),
        static_cast<const T*>(x), static_cast<T*>(y));
  });
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_global_avg_pool_nhwc16(NhwcType type, const Layer& l, std::int64_t batch, const void* x, void* y,
                                   CUstream_st* stream) {
  const auto total = static_cast<std::size_t>(batch * l.c);
  with_type(type, [&](auto zero) {
    using T = decltype(zero);
    global_avg_pool_nhwc16<T><<<blocks_for(total, kBlock), kBlock, 0, stream>>>(
        batch, to_int(l.c), to_int(l.h * l.w), static_cast<const T*>(x), static_cast<T*>(y));
  });
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace dlb::nn
