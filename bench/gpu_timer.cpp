// GPU timing: CUDA events around the call only, after a warm-up, with the
// stream held until the call is fully enqueued and an optional L2 flush
// between iterations, both outside the timed region.
#include <atomic>
#include <optional>

#include "bench/harness.h"
#include "kernels/common/cuda_resources.h"
#include "kernels/common/stream_hold.h"

namespace dlb::bench {
namespace {

// A buffer twice the size of L2, zeroed once, read through between
// iterations (kernels/common/stream_hold.h says why a read and not a memset).
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
  void flush(cudaStream_t stream) { dlb::launch_read_through(buffer_.data(), buffer_.bytes(), sink_.data(), stream); }

 private:
  DeviceBuffer<unsigned char> buffer_;
  DeviceBuffer<int> sink_{1};
};

L2Flusher& flusher() {
  static L2Flusher f;  // one per process, created on first GPU case
  return f;
}

}  // namespace

// The hold (kernels/common/stream_hold.h): the stream waits, ahead of the
// start event, until the host has enqueued the whole timed call.
StreamHold::StreamHold(CUstream_st* stream) { dlb::hold_stream(stream); }
StreamHold::~StreamHold() {
  if (held_) dlb::release_stream();
}
void StreamHold::release() {
  dlb::release_stream();
  held_ = false;
}
bool StreamHold::timed_out() const { return dlb::stream_hold_timed_out(); }

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
