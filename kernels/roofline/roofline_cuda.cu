// GPU ceilings: the FMA peak (kGpuFmaChains independent fp32 chains per
// thread) and STREAM's triad.
#include "kernels/common/cuda_resources.h"
#include "kernels/common/error.h"
#include "kernels/roofline/roofline.h"

namespace dlb {
namespace {

// x = x*a + b from x = 0 with a = b = 0.5 reaches exactly 1.0 after 25
// rounds; a and b come in as arguments so nothing folds at compile time.
// The rounds run kGpuFmaUnroll at a time with a 32-bit counter: unrolled 4x
// (what the compiler chose alone, 32 FFMA per loop step against a 64-bit
// add, two compares and a branch) the first H100 run reached 0.84 of the
// datasheet peak, about the share of issue slots the FFMAs got; at 16
// rounds a step the loop's own instructions are under 4% of the issued ones.
// Thread 0 of block 0 writes the SM clock cycles the kernel took to *cycles
// (with the call's event time: the clock the chip ran at).
__global__ void fma_peak_kernel(int steps, float a, float b, float* __restrict__ out, long long* cycles) {
  const long long start = clock64();
  float acc[kGpuFmaChains];
#pragma unroll
  for (int j = 0; j < kGpuFmaChains; ++j) acc[j] = 0.0f;
  for (int step = 0; step < steps; ++step) {
#pragma unroll
    for (int r = 0; r < kGpuFmaUnroll; ++r) {
#pragma unroll
      for (int j = 0; j < kGpuFmaChains; ++j) acc[j] = fmaf(acc[j], a, b);
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < kGpuFmaChains; ++j) sum += acc[j];
  out[static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x] = sum;
  if (blockIdx.x == 0 && threadIdx.x == 0) *cycles = clock64() - start;
}

}  // namespace

unsigned gpu_fma_blocks() { return static_cast<unsigned>(sm_count()) * (2048 / kGpuFmaBlock); }

void launch_gpu_fma_peak(std::int64_t iterations, unsigned blocks, float* out, long long* cycles,
                         CUstream_st* stream) {
  DLB_REQUIRE(iterations % kGpuFmaUnroll == 0 && iterations / kGpuFmaUnroll < (std::int64_t{1} << 31),
              "gpu fma peak: rounds must be a multiple of kGpuFmaUnroll, below 2^35");
  fma_peak_kernel<<<blocks, kGpuFmaBlock, 0, stream>>>(static_cast<int>(iterations / kGpuFmaUnroll), 0.5f, 0.5f,
                                                         out, cycles);
  DLB_CUDA_CHECK_LAUNCH();
}

// a = b + s * c, fp64, two doubles per thread and access (16-byte loads and
// stores), grid-stride: STREAM's triad, two reads to one write as daxpy.
__global__ void triad_kernel(double* __restrict__ a, const double* __restrict__ b, const double* __restrict__ c,
                             double s, std::int64_t pairs) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  auto* a2 = reinterpret_cast<double2*>(a);
  const auto* b2 = reinterpret_cast<const double2*>(b);
  const auto* c2 = reinterpret_cast<const double2*>(c);
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs; i += stride) {
    const double2 bv = b2[i], cv = c2[i];
    a2[i] = make_double2(fma(s, cv.x, bv.x), fma(s, cv.y, bv.y));
  }
}

void launch_gpu_triad(double* a, const double* b, const double* c, double s, std::int64_t n, CUstream_st* stream) {
  DLB_REQUIRE(n % 2 == 0, "gpu triad: n must be even (pairs of doubles)");
  constexpr unsigned kBlock = 256;
  const unsigned blocks = static_cast<unsigned>(sm_count()) * (2048 / kBlock);
  triad_kernel<<<blocks, kBlock, 0, stream>>>(a, b, c, s, n / 2);
  DLB_CUDA_CHECK_LAUNCH();
}

double gpu_max_sm_clock_hz() {
  int device = 0, khz = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&device));
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
  return static_cast<double>(khz) * 1e3;
}

double gpu_datasheet_fma_flops() {
  int device = 0, major = 0, minor = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&device));
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 2.0 * gpu_fp32_lanes_per_sm(major, minor) * sm_count() * gpu_max_sm_clock_hz();
}

}  // namespace dlb
