// GPU ceilings: the FMA peak (kGpuFmaChains independent fp32 chains per
// thread), STREAM's triad, and the parts of the memory ceiling
// (roofline_memory.h).
#include "kernels/common/cuda_resources.h"
#include "kernels/common/error.h"
#include "kernels/roofline/roofline.h"
#include "kernels/roofline/roofline_memory.h"

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

namespace {

// The GPU memory ceiling's parts (roofline_memory.h). One access per
// thread (every block launched at once, as daxpy gpu_naive) or a
// grid-stride loop over 8 blocks of 256 per SM (as the old triad).
template <MemoryPattern P, class V>
__device__ __forceinline__ void memory_step(V* __restrict__ a, V* __restrict__ b, const V* __restrict__ c, double s,
                                            std::int64_t i) {
  if constexpr (P == MemoryPattern::copy) {
    a[i] = c[i];
  } else {
    const V bv = b[i], cv = c[i];
    V out;
    if constexpr (sizeof(V) == 16) {
      out = make_double2(fma(s, cv.x, bv.x), fma(s, cv.y, bv.y));
    } else {
      out = fma(s, cv, bv);
    }
    if constexpr (P == MemoryPattern::triad) a[i] = out;
    else b[i] = out;
  }
}

template <MemoryPattern P, class V>
__global__ void memory_full_kernel(V* __restrict__ a, V* __restrict__ b, const V* __restrict__ c, double s,
                                   std::int64_t items) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < items) memory_step<P>(a, b, c, s, i);
}

template <MemoryPattern P, class V>
__global__ void memory_stride_kernel(V* __restrict__ a, V* __restrict__ b, const V* __restrict__ c, double s,
                                     std::int64_t items) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += stride)
    memory_step<P>(a, b, c, s, i);
}

template <MemoryPattern P, class V>
void launch_memory(bool grid_stride, double* a, double* b, const double* c, double s, std::int64_t n,
                   cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  const std::int64_t items = n / static_cast<std::int64_t>(sizeof(V) / sizeof(double));
  const unsigned blocks = grid_stride ? static_cast<unsigned>(sm_count()) * (2048 / kBlock)
                                      : blocks_for(static_cast<std::size_t>(items), kBlock);
  auto* a_v = reinterpret_cast<V*>(a);
  auto* b_v = reinterpret_cast<V*>(b);
  const auto* c_v = reinterpret_cast<const V*>(c);
  if (grid_stride) memory_stride_kernel<P, V><<<blocks, kBlock, 0, stream>>>(a_v, b_v, c_v, s, items);
  else memory_full_kernel<P, V><<<blocks, kBlock, 0, stream>>>(a_v, b_v, c_v, s, items);
  DLB_CUDA_CHECK_LAUNCH();
}

template <MemoryPattern P>
void launch_pattern(const MemoryPart& part, double* a, double* b, const double* c, double s, std::int64_t n,
                    cudaStream_t stream) {
  if (part.access_bytes == 16) launch_memory<P, double2>(part.grid_stride, a, b, c, s, n, stream);
  else launch_memory<P, double>(part.grid_stride, a, b, c, s, n, stream);
}

}  // namespace

void launch_gpu_memory_part(const MemoryPart& part, double* a, double* b, const double* c, double s, std::int64_t n,
                            CUstream_st* stream) {
  DLB_REQUIRE(n % 2 == 0, "gpu memory ceiling: n must be even (pairs of doubles)");
  switch (part.pattern) {
    case MemoryPattern::copy:
      if (part.access_bytes == 0) {
        DLB_CUDA_CHECK(cudaMemcpyAsync(a, c, static_cast<std::size_t>(n) * sizeof(double), cudaMemcpyDeviceToDevice,
                                       stream));
      } else {
        launch_pattern<MemoryPattern::copy>(part, a, b, c, s, n, stream);
      }
      return;
    case MemoryPattern::triad: launch_pattern<MemoryPattern::triad>(part, a, b, c, s, n, stream); return;
    case MemoryPattern::update: launch_pattern<MemoryPattern::update>(part, a, b, c, s, n, stream); return;
  }
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
