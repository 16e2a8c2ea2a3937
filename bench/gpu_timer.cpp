// GPU timing: CUDA events around the call only, after a warm-up, with the
// stream held until the call is fully enqueued and an optional L2 flush
// between iterations, both outside the timed region.
#include <atomic>
#include <optional>

#include "bench/gpu_timer_kernels.h"
#include "bench/harness.h"
#include "kernels/common/cuda_resources.h"

namespace dlb::bench {
namespace {

// A buffer twice the size of L2, zeroed once. Reading it through evicts what
// the last call left in the cache; since the reads leave clean lines, the
// write-back of the last call's dirty lines happens here, outside the timing,
// not during the next timed call (a memset would leave L2 full of dirty lines).
class L2Flusher {
 public:
  L2Flusher() {
    int device = 0, l2 = 0;
    DLB_CUDA_CHECK(cudaGetDevice(&device));
    DLB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    buffer_ = DeviceBuffer<unsigned char>(2 * static_cast<std::size_t>(l2 > 0 ? l2 : 1 << 20));
    DLB_CUDA_CHECK(cudaMemset(buffer_.data(), 0, buffer_.bytes()));
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void flush(cudaStream_t stream) { launch_read_through(buffer_.data(), buffer_.bytes(), sink_.data(), stream); }

 private:
  DeviceBuffer<unsigned char> buffer_;
  DeviceBuffer<int> sink_{1};
};

L2Flusher& flusher() {
  static L2Flusher f;  // one per process, created on first GPU case
  return f;
}

// The hold: a one-thread kernel that waits, ahead of the start event, until
// the host has enqueued the whole timed call. Without it the start event
// fires as soon as it is enqueued on an idle stream, and the time the host
// then spends issuing the call (cuDNN's and cuBLAS's host work, launch
// overhead) is counted as GPU time. Flags live in mapped pinned memory.
class Hold {
 public:
  Hold() {
    DLB_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&flags_), 2 * sizeof(int), cudaHostAllocMapped));
    try {
      DLB_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flags_), flags_, 0));
    } catch (...) {
      cudaFreeHost(flags_);
      throw;
    }
  }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;
  ~Hold() { dlb::detail::report_release_failure(cudaFreeHost(flags_), "cudaFreeHost"); }

  void arm(cudaStream_t stream) {
    std::atomic_ref<int>(flags_[0]).store(0, std::memory_order_release);
    flags_[1] = 0;
    // One second of a ~2 GHz clock: far more than any host needs to enqueue a call.
    launch_hold(device_flags_, device_flags_ + 1, 2'000'000'000LL, stream);
  }
  void release() { std::atomic_ref<int>(flags_[0]).store(1, std::memory_order_release); }
  // Read after the stream has passed the hold.
  bool timed_out() const { return std::atomic_ref<int>(flags_[1]).load(std::memory_order_acquire) != 0; }

 private:
  int* flags_ = nullptr;         // [release, timed_out], host view
  int* device_flags_ = nullptr;  // the same, device view
};

Hold& hold() {
  static Hold h;
  return h;
}

}  // namespace

StreamHold::StreamHold(CUstream_st* stream) { hold().arm(stream); }
StreamHold::~StreamHold() {
  if (held_) hold().release();
}
void StreamHold::release() {
  hold().release();
  held_ = false;
}
bool StreamHold::timed_out() const { return hold().timed_out(); }

void time_gpu(benchmark::State& state, const Run& run, const ExecContext& ctx, Timing timing) {
  const auto stream = timing.stream != nullptr ? timing.stream : ctx.exec().stream;
  run();  // warm-up: module load, first-touch of library state
  DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  ctx.synchronize();
  Event start, stop;
  for (auto _ : state) {
    if (timing.flush_l2) flusher().flush(stream);
    std::optional<StreamHold> held;
    if (timing.hold) held.emplace(stream);
    start.record(stream);
    run();  // may throw: `held` releases the stream on the way out
    stop.record(stream);
    if (held) held->release();
    stop.synchronize();
    if (held && held->timed_out()) {
      state.SkipWithError("the GPU timer's hold timed out: the host took over a second to enqueue the call");
      break;
    }
    state.SetIterationTime(static_cast<double>(stop.elapsed_ms_since(start)) * 1e-3);
  }
  ctx.synchronize();
}

}  // namespace dlb::bench
