// GPU timing: CUDA events around the launch only, after a warm-up, with an
// optional L2 flush between iterations outside the timed region.
#include <memory>

#include "bench/harness.h"
#include "kernels/common/cuda_resources.h"

namespace dlb::bench {
namespace {

// A device buffer twice the size of L2; memset over it evicts whatever the
// last call left in the cache.
class L2Flusher {
 public:
  L2Flusher() {
    int device = 0, l2 = 0;
    DLB_CUDA_CHECK(cudaGetDevice(&device));
    DLB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    buffer_ = DeviceBuffer<unsigned char>(2 * static_cast<std::size_t>(l2 > 0 ? l2 : 1 << 20));
  }
  void flush(cudaStream_t stream) {
    DLB_CUDA_CHECK(cudaMemsetAsync(buffer_.data(), ++pattern_, buffer_.bytes(), stream));
  }

 private:
  DeviceBuffer<unsigned char> buffer_;
  unsigned char pattern_ = 0;
};

L2Flusher& flusher() {
  static L2Flusher f;  // one per process, created on first GPU case
  return f;
}

}  // namespace

void time_gpu(benchmark::State& state, const Run& run, const ExecContext& ctx, Timing timing) {
  const auto stream = timing.stream != nullptr ? timing.stream : ctx.exec().stream;
  run();  // warm-up: module load, first-touch of library state
  DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
  ctx.synchronize();
  Event start, stop;
  for (auto _ : state) {
    if (timing.flush_l2) flusher().flush(stream);
    start.record(stream);
    run();
    stop.record(stream);
    stop.synchronize();
    state.SetIterationTime(static_cast<double>(stop.elapsed_ms_since(start)) * 1e-3);
  }
  ctx.synchronize();
}

}  // namespace dlb::bench
