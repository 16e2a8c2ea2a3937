// daxpy on the GPU: y = a*x + y, fp64, one fma per element (bit-exact with
// the reference). Device pointers.
#include <cstdint>

#include "kernels/common/cuda_resources.h"
#include "kernels/daxpy/daxpy.h"

namespace dlb {
namespace {

constexpr unsigned kBlock = 256;

// One element per thread: the textbook kernel.
__global__ void daxpy_naive_kernel(std::int64_t n, double a, const double* __restrict__ x,
                                   double* __restrict__ y) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = fma(a, x[i], y[i]);
}

// Grid-stride loop over 16-byte pairs. x and y must share their alignment
// modulo 16 bytes: the first `head` (0 or 1) elements are done alone so that
// the pairs start 16-byte aligned, and an odd element at the end alone too.
__global__ void daxpy_vec_kernel(std::int64_t n, std::int64_t head, double a,
                                 const double* __restrict__ x, double* __restrict__ y) {
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t pairs = (n - head) / 2;
  const auto* x2 = reinterpret_cast<const double2*>(x + head);
  auto* y2 = reinterpret_cast<double2*>(y + head);
  for (std::int64_t i = tid; i < pairs; i += stride) {
    const double2 xv = x2[i];
    double2 yv = y2[i];
    yv.x = fma(a, xv.x, yv.x);
    yv.y = fma(a, xv.y, yv.y);
    y2[i] = yv;
  }
  if (tid == 0) {
    if (head == 1) y[0] = fma(a, x[0], y[0]);
    const std::int64_t last = head + 2 * pairs;  // first element not covered by a pair
    if (last < n) y[last] = fma(a, x[last], y[last]);
  }
}

// Fallback for x and y with different alignment modulo 16 bytes: no pairs
// are possible, so scalar grid-stride.
__global__ void daxpy_strided_kernel(std::int64_t n, double a, const double* __restrict__ x,
                                     double* __restrict__ y) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    y[i] = fma(a, x[i], y[i]);
}

// Enough resident blocks to fill every SM, no more than the work needs.
unsigned grid_stride_blocks(std::int64_t items) {
  const unsigned needed = blocks_for(static_cast<std::size_t>(items), kBlock);
  const unsigned fill = static_cast<unsigned>(sm_count()) * (2048 / kBlock);
  return needed < fill ? needed : fill;
}

}  // namespace

void launch_daxpy_naive(const DaxpyArgs& args, CUstream_st* stream) {
  if (args.n == 0) return;
  daxpy_naive_kernel<<<blocks_for(static_cast<std::size_t>(args.n), kBlock), kBlock, 0, stream>>>(
      args.n, args.a, args.x, args.y);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_daxpy_vec(const DaxpyArgs& args, CUstream_st* stream) {
  if (args.n == 0) return;
  const auto xa = reinterpret_cast<std::uintptr_t>(args.x);
  const auto ya = reinterpret_cast<std::uintptr_t>(args.y);
  if (((xa ^ ya) & 15) != 0) {
    daxpy_strided_kernel<<<grid_stride_blocks(args.n), kBlock, 0, stream>>>(args.n, args.a, args.x, args.y);
  } else {
    const std::int64_t head = (xa & 15) != 0 ? 1 : 0;  // doubles are 8-byte aligned: 0 or 8
    const std::int64_t pairs = (args.n - head) / 2;
    daxpy_vec_kernel<<<grid_stride_blocks(pairs > 0 ? pairs : 1), kBlock, 0, stream>>>(
        args.n, head, args.a, args.x, args.y);
  }
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace dlb
