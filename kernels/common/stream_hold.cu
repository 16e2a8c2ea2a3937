#include "kernels/common/stream_hold.h"

#include <atomic>
#include <mutex>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/error.h"

namespace dlb {
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
// compared with a value the zeroed buffer never produces.
__global__ void read_through_kernel(const int4* __restrict__ buffer, std::size_t words, int* sink) {
  int acc = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    const int4 v = buffer[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fc0ffee) *sink = acc;
}

// [release, timed_out] in mapped pinned memory, one pair per process.
class HoldFlags {
 public:
  HoldFlags() {
    DLB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), 2 * sizeof(int), cudaHostAllocMapped));
    const cudaError_t mapped = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0);
    if (mapped != cudaSuccess) {
      cudaFreeHost(host_);
      DLB_CUDA_CHECK(mapped);
    }
  }
  HoldFlags(const HoldFlags&) = delete;
  HoldFlags& operator=(const HoldFlags&) = delete;
  ~HoldFlags() { detail::report_release_failure(cudaFreeHost(host_), "cudaFreeHost"); }
  int* host_ = nullptr;
  int* device_ = nullptr;
};

HoldFlags& flags() {
  static HoldFlags f;
  return f;
}

}  // namespace

void hold_stream(cudaStream_t stream) {
  HoldFlags& f = flags();
  std::atomic_ref<int>(f.host_[0]).store(0, std::memory_order_release);
  std::atomic_ref<int>(f.host_[1]).store(0, std::memory_order_release);
  // One second of a ~2 GHz clock: far more than any host needs to enqueue a call.
  hold_kernel<<<1, 1, 0, stream>>>(f.device_, f.device_ + 1, 2'000'000'000LL);
  DLB_CUDA_CHECK_LAUNCH();
}

void release_stream() { std::atomic_ref<int>(flags().host_[0]).store(1, std::memory_order_release); }

bool stream_hold_timed_out() { return std::atomic_ref<int>(flags().host_[1]).load(std::memory_order_acquire) != 0; }

double time_held_call(cudaStream_t stream, const std::function<void()>& call) {
  // One pair of flags per process: one held call at a time.
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  hold_stream(stream);
  Event start, stop;
  try {
    start.record(stream);
    call();
    stop.record(stream);
  } catch (...) {
    release_stream();
    throw;
  }
  release_stream();
  stop.synchronize();
  if (stream_hold_timed_out()) throw Error("a held timed call: the host took over a second to enqueue it");
  return 1e-3 * static_cast<double>(stop.elapsed_ms_since(start));
}

void launch_read_through(const void* buffer, std::size_t bytes, int* sink, cudaStream_t stream) {
  constexpr unsigned kBlock = 256;
  const unsigned blocks = static_cast<unsigned>(sm_count()) * (2048 / kBlock);
  read_through_kernel<<<blocks, kBlock, 0, stream>>>(static_cast<const int4*>(buffer), bytes / sizeof(int4), sink);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace dlb
