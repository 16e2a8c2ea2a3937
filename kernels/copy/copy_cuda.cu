// The chunk pipeline (see copy.h): its memory-bound kernel and the schedule
// that spreads the chunks over worker streams.
#include <cstdint>

#include "kernels/common/error.h"
#include "kernels/copy/copy.h"

namespace dlb {
namespace {

constexpr unsigned kBlock = 256;

// x: [n], in place, one element per thread: x[i] = fmaf(a, x[i], b). One
// 4-byte read and one 4-byte write per element.
__global__ void scale_shift_kernel(float* __restrict__ x, std::int64_t n, float a, float b) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = fmaf(a, x[i], b);
}

}  // namespace

void launch_scale_shift(float* x, std::int64_t n, CUstream_st* stream) {
  // A one-dimensional grid has at most 2^31 - 1 blocks: 2 TiB of floats.
  DLB_REQUIRE(n >= 0 && n <= std::int64_t{0x7fffffff} * kBlock,
              "scale_shift: n must be in [0, (2^31 - 1) * 256], got " + std::to_string(n));
  if (n == 0) return;
  scale_shift_kernel<<<blocks_for(static_cast<std::size_t>(n), kBlock), kBlock, 0, stream>>>(
      x, n, kPipelineScale, kPipelineShift);
  DLB_CUDA_CHECK_LAUNCH();
}

ChunkPipeline::ChunkPipeline(const PipelineArgs& args, int streams) : args_(args) {
  DLB_REQUIRE(args.n >= 0, "pipeline: n must be >= 0, got " + std::to_string(args.n));
  DLB_REQUIRE(args.chunks >= 1, "pipeline: chunks must be >= 1, got " + std::to_string(args.chunks));
  DLB_REQUIRE(streams >= 1, "pipeline: streams must be >= 1, got " + std::to_string(streams));
  streams_.reserve(static_cast<std::size_t>(streams));
  joins_.reserve(static_cast<std::size_t>(streams));
  for (int s = 0; s < streams; ++s) {
    streams_.emplace_back();
    joins_.emplace_back(cudaEventDisableTiming);
  }
}

void ChunkPipeline::enqueue(CUstream_st* origin, PipelineStages stages) const {
  // Fork: every worker stream starts after what is already on `origin`.
  fork_.record(origin);
  for (const auto& stream : streams_) DLB_CUDA_CHECK(cudaStreamWaitEvent(stream.get(), fork_.get(), 0));

  // Chunk c: `base` elements, one more for the first `extra` chunks;
  // contiguous, in order, covering [0, n) exactly.
  const std::int64_t chunks = args_.chunks, base = args_.n / chunks, extra = args_.n % chunks;
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t begin = c * base + (c < extra ? c : extra);
    const std::int64_t count = base + (c < extra ? 1 : 0);
    if (count == 0) continue;  // n < chunks
    const auto bytes = static_cast<std::size_t>(count) * sizeof(float);
    cudaStream_t stream = streams_[static_cast<std::size_t>(c) % streams_.size()].get();
    float* device = args_.device + begin;
    // In order on one stream: the kernel reads what the h2d copy wrote, the
    // d2h copy reads what the kernel wrote; the next chunk on this stream
    // waits for all three.
    if (stages.h2d)
      DLB_CUDA_CHECK(cudaMemcpyAsync(device, args_.host_in + begin, bytes, cudaMemcpyHostToDevice, stream));
    if (stages.kernel) launch_scale_shift(device, count, stream);
    if (stages.d2h)
      DLB_CUDA_CHECK(cudaMemcpyAsync(args_.host_out + begin, device, bytes, cudaMemcpyDeviceToHost, stream));
  }

  // Join: `origin` continues after every worker stream's last chunk.
  for (std::size_t s = 0; s < streams_.size(); ++s) {
    joins_[s].record(streams_[s].get());
    DLB_CUDA_CHECK(cudaStreamWaitEvent(origin, joins_[s].get(), 0));
  }
}

}  // namespace dlb
