// GPU FMA peak: kGpuFmaChains independent fp32 chains per thread.
#include "kernels/common/cuda_resources.h"
#include "kernels/roofline/roofline.h"

namespace dlb {
namespace {

// x = x*a + b from x = 0 with a = b = 0.5 reaches exactly 1.0 after 25
// rounds; a and b come in as arguments so nothing folds at compile time.
__global__ void fma_peak_kernel(std::int64_t iterations, float a, float b, float* __restrict__ out) {
  float acc[kGpuFmaChains];
#pragma unroll
  for (int j = 0; j < kGpuFmaChains; ++j) acc[j] = 0.0f;
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma unroll
    for (int j = 0; j < kGpuFmaChains; ++j) acc[j] = fmaf(acc[j], a, b);
  }
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kGpuFmaChains; ++j) sum += acc[j];
  out[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = sum;
}

}  // namespace

unsigned gpu_fma_blocks() { return static_cast<unsigned>(sm_count()) * (2048 / kGpuFmaBlock); }

void launch_gpu_fma_peak(std::int64_t iterations, unsigned blocks, float* out, CUstream_st* stream) {
  fma_peak_kernel<<<blocks, kGpuFmaBlock, 0, stream>>>(iterations, 0.5f, 0.5f, out);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace dlb
