// Roofline ceilings: what this machine can do at best, measured in the same
// run as everything else so that any figure can be read as a fraction of it.
//
//   cpu_copy          c = a                 STREAM copy, all cores, fp64
//   cpu_triad         a = b + s*c           STREAM triad, all cores, fp64
//   cpu_fma           independent FMA chains in vector registers, all cores, fp32
//   cpu_sgemm_onednn  large fp32 GEMM through oneDNN
//   gpu_copy          cudaMemcpyAsync device to device
//   gpu_triad         a = b + s*c, fp64, an own kernel (daxpy's two reads to one write)
//   gpu_memory        the fastest of several streaming kernels (roofline_memory.h): the GPU memory ceiling
//   gpu_fma           independent FMA chains per thread, fp32, every SM
//   gpu_sgemm_cublas  large fp32 GEMM through cuBLAS (no TF32)
//
// The STREAM kernels write with non-temporal stores where the CPU has them,
// so the bytes they count (each array read or written once) are the bytes
// that cross the memory bus: no read-for-ownership of the destination.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/variant.h"

namespace dlb {

void stream_copy(const double* a, double* c, std::int64_t n);
void stream_triad(double* a, const double* b, const double* c, double s, std::int64_t n);
// How this build's stream_copy and stream_triad store: "AVX-512 streaming
// stores", "AVX2 streaming stores" or "plain stores" (which pay a read for
// ownership of the destination that the counted bytes leave out).
const char* stream_store_kind();

// FMA peak: every thread runs `iterations` rounds of x = x*a + b on
// kFmaChains independent vector accumulators starting at 0 with a = b = 0.5.
// Each accumulator lane converges to exactly 1.0 after 25 rounds, so the
// returned sum of all lanes is exactly cpu_fma_lanes() * kFmaChains * threads.
// As many chains as the registers hold besides a and b: 16 of the 32 zmm
// (AVX-512), 12 of the 16 ymm elsewhere. With 16 on AVX2, GCC kept three
// accumulators on the stack, and their store-to-load round trip held the
// loop back: 104 GFLOP/s on a 2-vCPU Zen 3, where oneDNN's SGEMM ran at 135.
#if defined(__AVX512F__)
inline constexpr int kFmaChains = 16;
#else
inline constexpr int kFmaChains = 12;
#endif
int cpu_fma_lanes();    // fp32 lanes per vector: 16 (AVX-512), 8 (AVX2) or 1
double cpu_fma_peak(std::int64_t iterations, int* threads_used);

// C[m,n] = A[m,k] * B[k,n], fp32, row-major, through oneDNN (dnnl_sgemm).
void sgemm_onednn(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c);

// GPU ceilings (device pointers, enqueued on `stream`).
inline constexpr int kGpuFmaChains = 8;
inline constexpr int kGpuFmaUnroll = 16;  // rounds per loop step
inline constexpr unsigned kGpuFmaBlock = 256;
// One float per thread into out[threads]: the sum of its chains, exactly
// kGpuFmaChains; *cycles: the SM clock cycles block 0 took. `iterations` is
// a multiple of kGpuFmaUnroll.
void launch_gpu_fma_peak(std::int64_t iterations, unsigned blocks, float* out, long long* cycles,
                         CUstream_st* stream);
unsigned gpu_fma_blocks();  // enough blocks to fill every SM
// fp32 FMA lanes per SM by compute capability (NVIDIA's tables: 64 on
// sm_80 and sm_60-62, 128 on sm_86-89, sm_90 and later, 64 otherwise).
constexpr int gpu_fp32_lanes_per_sm(int major, int minor) {
  if (major >= 9) return 128;
  if (major == 8) return minor == 0 ? 64 : 128;
  return major == 7 ? 64 : major == 6 ? (minor == 0 ? 64 : 128) : 128;
}
// Device 0's maximum SM clock (cudaDevAttrClockRate), in Hz.
double gpu_max_sm_clock_hz();
// The datasheet fp32 peak of device 0: 2 x lanes x SMs x its maximum SM clock.
double gpu_datasheet_fma_flops();
// a[i] = b[i] + s * c[i], fp64, n even: STREAM's triad on the GPU.
void launch_gpu_triad(double* a, const double* b, const double* c, double s, std::int64_t n, CUstream_st* stream);
// One part of the GPU memory ceiling (roofline_memory.h) over n doubles (n
// even): copy a = c, triad a = b + s*c, update b = b + s*c.
struct MemoryPart;
void launch_gpu_memory_part(const MemoryPart& part, double* a, double* b, const double* c, double s, std::int64_t n,
                            CUstream_st* stream);
// C[m,n] = A[m,k] * B[k,n], fp32, row-major, strict fp32 math (no TF32).
Run prepare_sgemm_cublas(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                         float* c, const Exec& exec);

}  // namespace dlb
