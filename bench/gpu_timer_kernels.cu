#include "bench/gpu_timer_kernels.h"
#include "kernels/common/cuda_resources.h"

namespace dlb::bench {
namespace {

__global__ void hold_kernel(const volatile int* release, int* timed_out, long long timeout_cycles) {
  const long long start = clock64();
  while (*release == 0) {
    if (clock64() - start > timeout_cycles) {
      *timed_out = 1;
      return;
    }
  }
}

// buffer: [words] int4, one grid-stride pass; the XOR of everything read is
// compared with a value the fill never produces (the buffer is zeroed once).
__global__ void read_through_kernel(const int4* __restrict__ buffer, std::size_t words, int* sink) {
  int acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    const int4 v = buffer[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fc0ffee) *sink = acc;
}

}  // namespace

void launch_hold(const volatile int* release, int* timed_out, long long timeout_cycles, CUstream_st* stream) {
  hold_kernel<<<1, 1, 0, stream>>>(release, timed_out, timeout_cycles);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_read_through(const void* buffer, std::size_t bytes, int* sink, CUstream_st* stream) {
  constexpr unsigned kBlock = 256;
  const std::size_t words = bytes / sizeof(int4);
  const unsigned blocks = static_cast<unsigned>(sm_count()) * (2048 / kBlock);
  read_through_kernel<<<blocks, kBlock, 0, stream>>>(static_cast<const int4*>(buffer), words, sink);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace dlb::bench
