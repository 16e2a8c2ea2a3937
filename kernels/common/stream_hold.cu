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

double time_held_call(cudaStream_t stream, const std::function<void()>& call) {
  // One pair of flags per process: one held call at a time.
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  HoldFlags& f = flags();
  std::atomic_ref<int>(f.host_[0]).store(0, std::memory_order_release);
  std::atomic_ref<int>(f.host_[1]).store(0, std::memory_order_release);
  // One second of a ~2 GHz clock: far more than any host needs to enqueue a call.
  hold_kernel<<<1, 1, 0, stream>>>(f.device_, f.device_ + 1, 2'000'000'000LL);
  DLB_CUDA_CHECK_LAUNCH();
  const auto release = [&] { std::atomic_ref<int>(f.host_[0]).store(1, std::memory_order_release); };
  Event start, stop;
  try {
    start.record(stream);
    call();
    stop.record(stream);
  } catch (...) {
    release();
    throw;
  }
  release();
  stop.synchronize();
  if (std::atomic_ref<int>(f.host_[1]).load(std::memory_order_acquire) != 0)
    throw Error("a held timed call: the host took over a second to enqueue it");
  return 1e-3 * static_cast<double>(stop.elapsed_ms_since(start));
}

}  // namespace dlb
