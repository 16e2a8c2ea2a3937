#include "bench/cases/copy_case.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "kernels/common/error.h"
#include "kernels/common/random.h"
#include "reference/copy.h"

namespace dlb {
namespace {

constexpr std::uint64_t kPatternSeed = 51;
constexpr std::uint64_t kPipelineSeed = 52;
// The pipeline's output against the fp64 reference: one fp32 rounding per
// element (reference/copy.h), below 6e-8 of max|out|. 1e-6 leaves margin;
// a chunk skipped (NaN: poisoned), misplaced or transformed twice is off by
// a good fraction of max|out| and fails by orders of magnitude.
constexpr double kPipelineTolerance = 1e-6;
// Runs per median in overlap_fraction(), after one warm-up run.
constexpr int kOverlapRuns = 5;

std::size_t checked_bytes(std::int64_t bytes, const char* what) {
  DLB_REQUIRE(bytes >= 1, std::string(what) + ": bytes must be >= 1, got " + std::to_string(bytes));
  return static_cast<std::size_t>(bytes);
}

std::int64_t checked_floats(const HostKind& host, std::int64_t bytes) {
  DLB_REQUIRE(bytes >= 4 && bytes % 4 == 0,
              "pipeline: bytes must be a positive multiple of 4 (fp32 elements), got " + std::to_string(bytes));
  DLB_REQUIRE(!host.h2d_only, "pipeline: host memory '" + std::string(host.name) +
                                  "' is for h2d only, and the pipeline copies results back");
  return bytes / 4;
}

// Memory that is not of the kind its name says would flatter or handicap
// the case: a dlb::Error, never a timing.
void check_kind(const HostKind& kind, const void* p) {
  const bool locked = is_page_locked(p);
  if (locked != kind.page_locked) {
    throw_error(std::string("copy: '").append(kind.name).append("' host memory is ").append(locked ? "" : "not ")
                    .append("page-locked (cudaPointerGetAttributes)"),
                __FILE__, __LINE__);
  }
}

std::span<const std::uint8_t> host_span(const HostBytes& bytes, std::size_t count) { return {bytes.get(), count}; }

}  // namespace

// ---------------------------------------------------------------- single copies

CopyCase::CopyCase(const CopyVariant& variant, std::int64_t bytes)
    : variant_(variant),
      bytes_(checked_bytes(bytes, "copy")),
      ctx_(Device::gpu),
      device_(bytes_),
      device_src_(variant.direction == Direction::d2d ? bytes_ : 0),
      host_(variant.host != nullptr ? variant.host->allocate(bytes_) : HostBytes()),
      pattern_(bytes_),
      stream_(variant.call->ordered_on(ctx_.exec().stream)) {
  fill_random_int(pattern_.span(), kPatternSeed, 1, 255);  // never 0: see validate()
  // The source gets the pattern: host memory from the CPU (sequential
  // writes, which write-combined memory takes at full speed), device memory
  // by a copy on the case's stream, waited for.
  const auto own = ctx_.exec().stream;
  switch (variant.direction) {
    case Direction::h2d:
      std::memcpy(host_.get(), pattern_.data(), bytes_);
      args_ = {device_.data(), host_.get(), bytes_, Direction::h2d};
      break;
    case Direction::d2h:
      copy_async({device_.data(), pattern_.data(), bytes_, Direction::h2d}, own);
      args_ = {host_.get(), device_.data(), bytes_, Direction::d2h};
      break;
    case Direction::d2d:
      copy_async({device_src_.data(), pattern_.data(), bytes_, Direction::h2d}, own);
      args_ = {device_.data(), device_src_.data(), bytes_, Direction::d2d};
      break;
  }
  ctx_.synchronize();
  run_ = [call = variant.call, args = args_, stream = stream_] { call->copy(args, stream); };
}

ref::Comparison CopyCase::validate() {
  if (variant_.host != nullptr) check_kind(*variant_.host, host_.get());
  // Zero the destination (this also writes every page of a pageable d2h
  // destination before timing).
  if (variant_.direction == Direction::d2h) {
    std::memset(host_.get(), 0, bytes_);
  } else {
    DLB_CUDA_CHECK(cudaMemsetAsync(device_.data(), 0, bytes_, ctx_.exec().stream));
    ctx_.synchronize();
  }
  run_();
  // A synchronous copy from pageable memory may return before its last DMA
  // lands: wait on the stream it is ordered with.
  DLB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  if (variant_.direction == Direction::d2h) return ref::compare(host_span(host_, bytes_), pattern_.span());
  HostBuffer<std::uint8_t> back(bytes_);
  copy_async({back.data(), device_.data(), bytes_, Direction::d2h}, ctx_.exec().stream);
  ctx_.synchronize();
  return ref::compare(std::span<const std::uint8_t>(back.span()), pattern_.span());
}

// ---------------------------------------------------------------- register cost

RegisterCostCase::RegisterCostCase(std::int64_t bytes)
    : bytes_(checked_bytes(bytes, "register_cost")),
      ctx_(Device::gpu),
      buffer_(allocate_host<PageAlignedMemory>(bytes_)) {
  fill_random_int(std::span<std::uint8_t>(buffer_.get(), bytes_), kPatternSeed, 1, 255);
}

ref::Comparison RegisterCostCase::validate() {
  const auto stream = ctx_.exec().stream;
  DeviceBuffer<std::uint8_t> device(bytes_);
  HostBuffer<std::uint8_t> back(bytes_);
  std::memset(back.data(), 0, bytes_);  // no pattern byte is 0
  DLB_CUDA_CHECK(cudaMemsetAsync(device.data(), 0, bytes_, stream));
  {
    HostRegistration registration(buffer_.get(), bytes_);
    DLB_REQUIRE(is_page_locked(buffer_.get()), "register_cost: not page-locked after cudaHostRegister");
    copy_async({device.data(), buffer_.get(), bytes_, Direction::h2d}, stream);
    copy_async({back.data(), device.data(), bytes_, Direction::d2h}, stream);
    ctx_.synchronize();
    registration.unregister();
  }
  DLB_REQUIRE(!is_page_locked(buffer_.get()), "register_cost: still page-locked after cudaHostUnregister");
  return ref::compare(std::span<const std::uint8_t>(back.span()), host_span(buffer_, bytes_));
}

// ---------------------------------------------------------------- the chunk pipeline

PipelineCase::PipelineCase(const HostKind& host, int streams, int chunks, std::int64_t bytes)
    : host_(host),
      n_(checked_floats(host, bytes)),
      ctx_(Device::gpu),
      device_(static_cast<std::size_t>(n_)),
      in_(host.allocate(static_cast<std::size_t>(bytes))),
      out_(host.allocate(static_cast<std::size_t>(bytes))),
      pipeline_(pipeline_args(chunks), streams),
      serial_(pipeline_args(chunks), 1) {
  fill_random(std::span<float>(reinterpret_cast<float*>(in_.get()), static_cast<std::size_t>(n_)), kPipelineSeed);
}

PipelineArgs PipelineCase::pipeline_args(int chunks) {
  return {reinterpret_cast<const float*>(in_.get()), reinterpret_cast<float*>(out_.get()), device_.data(), n_,
          chunks};
}

ref::Comparison PipelineCase::validate() {
  check_kind(host_, in_.get());
  check_kind(host_, out_.get());
  const std::span<float> out(reinterpret_cast<float*>(out_.get()), static_cast<std::size_t>(n_));
  poison_nan(out);
  // Every float 0xffffffff, a NaN: a chunk the h2d copy missed cannot pass
  // on what an earlier case left in this memory.
  DLB_CUDA_CHECK(cudaMemsetAsync(device_.data(), 0xff, device_.bytes(), ctx_.exec().stream));
  run();  // forks from the stream after the memset
  ctx_.synchronize();
  HostBuffer<double> expected(static_cast<std::size_t>(n_));
  ref::scale_shift(kPipelineScale, kPipelineShift,
                   std::span<const float>(reinterpret_cast<const float*>(in_.get()), out.size()), expected.span());
  return ref::compare(std::span<const float>(out), expected.span(), kPipelineTolerance);
}

double PipelineCase::median_ms(const ChunkPipeline& pipeline, PipelineStages stages) const {
  const auto origin = ctx_.exec().stream;
  pipeline.enqueue(origin, stages);  // warm-up
  ctx_.synchronize();
  Event start, stop;
  std::array<double, kOverlapRuns> ms{};
  for (auto& m : ms) {
    start.record(origin);
    pipeline.enqueue(origin, stages);
    stop.record(origin);
    stop.synchronize();
    m = stop.elapsed_ms_since(start);
  }
  std::sort(ms.begin(), ms.end());
  return ms[kOverlapRuns / 2];
}

double PipelineCase::overlap_fraction() {
  if (!overlap_fraction_) {
    const double h2d = median_ms(serial_, {.h2d = true, .kernel = false, .d2h = false});
    const double kernel = median_ms(serial_, {.h2d = false, .kernel = true, .d2h = false});
    const double d2h = median_ms(serial_, {.h2d = false, .kernel = false, .d2h = true});
    const double serial = median_ms(serial_, {});
    const double pipelined = median_ms(pipeline_, {});
    const double bound = std::max({h2d, kernel, d2h});
    // serial <= bound would mean the other stages took no time: nothing to
    // overlap, and no fraction to give.
    overlap_fraction_ = serial > bound ? (serial - pipelined) / (serial - bound)
                                       : std::numeric_limits<double>::quiet_NaN();
  }
  return *overlap_fraction_;
}

}  // namespace dlb
