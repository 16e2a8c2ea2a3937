// gpu_im2col_cublas: the lowering on the GPU. An own im2col kernel writes
// the patches of the whole batch, col[n][c*r*s][oh*ow], into a workspace
// made in prepare; one strided-batched cublasSgemm then gives, per image,
//     y[n] [k, oh*ow] = w [k, c*r*s] * col[n] [c*r*s, oh*ow]
// already NCHW. Strict fp32 (CUBLAS_PEDANTIC_MATH: no TF32). Both the im2col
// and the GEMM are inside the timed call.
#include <cstdint>
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/conv/conv.h"

namespace dlb {
namespace {

constexpr unsigned kBlock = 256;

struct Im2colGeometry {
  std::int64_t c, h, w, r, s, stride, pad, oh, ow;
};

// One thread per col element, grid-stride over all n * c*r*s * oh*ow of them
// (index = ((n * c*r*s) + tap) * oh*ow + position): consecutive threads
// write consecutive positions, and at stride 1 read consecutive input columns.
//   x:   [n, c, h, w]
//   col: [n, c*r*s, oh*ow], 0 where the tap falls into the padding
__global__ void im2col_kernel(Im2colGeometry g, std::int64_t total, const float* __restrict__ x,
                              float* __restrict__ col) {
  const std::int64_t positions = g.oh * g.ow, taps = g.c * g.r * g.s;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const std::int64_t position = i % positions;
    const std::int64_t tap = (i / positions) % taps;
    const std::int64_t n = i / (positions * taps);
    const std::int64_t c = tap / (g.r * g.s), r = (tap / g.s) % g.r, s = tap % g.s;
    const std::int64_t ih = (position / g.ow) * g.stride + r - g.pad;
    const std::int64_t iw = (position % g.ow) * g.stride + s - g.pad;
    const bool inside = ih >= 0 && ih < g.h && iw >= 0 && iw < g.w;
    col[i] = inside ? x[((n * g.c + c) * g.h + ih) * g.w + iw] : 0.0f;
  }
}

struct Im2colCublas {
  Im2colCublas(const ConvArgs& a, cudaStream_t s)
      : args(a),
        stream(s),
        handle(s),
        col(static_cast<std::size_t>(a.shape.n * a.shape.c * a.shape.r * a.shape.s * a.shape.oh() * a.shape.ow())) {}

  void run() {
    const ConvShape& p = args.shape;
    const std::int64_t taps = p.c * p.r * p.s, positions = p.oh() * p.ow();
    const auto total = static_cast<std::int64_t>(col.size());
    const unsigned fill = static_cast<unsigned>(sm_count()) * (2048 / kBlock);
    const unsigned needed = blocks_for(static_cast<std::size_t>(total), kBlock);
    im2col_kernel<<<needed < fill ? needed : fill, kBlock, 0, stream>>>(
        Im2colGeometry{p.c, p.h, p.w, p.r, p.s, p.stride, p.pad, p.oh(), p.ow()}, total, args.x, col.data());
    DLB_CUDA_CHECK_LAUNCH();
    // Row-major y[n] = w * col[n] is column-major y[n]^T = col[n]^T * w^T:
    // m = positions, n = k, k = taps; col[n] is column-major [positions, taps]
    // with leading dimension positions, w column-major [taps, k] with
    // leading dimension taps, y[n] column-major [positions, k].
    const float alpha = 1.0f, beta = 0.0f;
    DLB_CUBLAS_CHECK(cublasSgemmStridedBatched_64(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, positions, p.k, taps,
                                                  &alpha, col.data(), positions, taps * positions, args.w, taps, 0,
                                                  &beta, args.y, positions, p.k * positions, p.n));
  }

  ConvArgs args;
  cudaStream_t stream;
  CublasHandle handle;
  DeviceBuffer<float> col;
};

}  // namespace

Run prepare_conv_im2col_cublas(const ConvArgs& args, const Exec& exec) {
  validate_conv_shape(args.shape);
  auto c = std::make_shared<Im2colCublas>(args, exec.stream);
  DLB_CUBLAS_CHECK(cublasSetMathMode(c->handle.get(), CUBLAS_PEDANTIC_MATH));
  if (args.report != nullptr) args.report->workspace_bytes = static_cast<double>(c->col.bytes());
  return [c] { c->run(); };
}

}  // namespace dlb
