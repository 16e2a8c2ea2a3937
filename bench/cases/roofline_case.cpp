#include "bench/cases/roofline_case.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include "bench/cases/checked_run.h"
#include "kernels/common/random.h"
#include "kernels/roofline/roofline.h"
#include "kernels/roofline/roofline_memory.h"
#include "reference/gemm.h"

#if DLB_HAVE_CUDA
#include "kernels/common/cuda_resources.h"
#include "kernels/common/stream_hold.h"
#endif

namespace dlb {
namespace {
constexpr double kTriadScalar = 3.0;
constexpr std::int64_t kSpotRows = 8;
}  // namespace

// ---------------------------------------------------------------- STREAM

StreamCase::StreamCase(Kind kind, std::int64_t n)
    : kind_(kind), n_(n), a_(static_cast<std::size_t>(n)), c_(static_cast<std::size_t>(n)) {
  DLB_REQUIRE(n > 0, "stream: n must be positive");
  if (kind == Kind::triad) b_ = HostBuffer<double>(static_cast<std::size_t>(n));
  // Every page touched before timing (fill or poison).
  fill_random(kind == Kind::copy ? a_.span() : c_.span(), 21);
  if (kind == Kind::triad) fill_random(b_.span(), 22);
  poison_nan(kind == Kind::copy ? c_.span() : a_.span());
}

void StreamCase::run() {
  if (kind_ == Kind::copy) {
    stream_copy(a_.data(), c_.data(), n_);
  } else {
    stream_triad(a_.data(), b_.data(), c_.data(), kTriadScalar, n_);
  }
}

ref::Comparison StreamCase::validate() {
  run();
  std::vector<double> expected(static_cast<std::size_t>(n_));
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = kind_ == Kind::copy ? a_[i] : std::fma(kTriadScalar, c_[i], b_[i]);
  const auto out = kind_ == Kind::copy ? c_.span() : a_.span();
  return ref::compare(std::span<const double>(out), expected, 0.0);
}

double StreamCase::bytes_per_call() const {
  return (kind_ == Kind::copy ? 2.0 : 3.0) * 8.0 * static_cast<double>(n_);
}

// ---------------------------------------------------------------- FMA peak

FmaPeakCase::FmaPeakCase(Device device, std::int64_t iterations)
    : device_(device), iterations_(iterations), ctx_(device),
#if DLB_HAVE_CUDA
      gpu_blocks_(device == Device::gpu ? gpu_fma_blocks() : 0),
#endif
      gpu_out_(static_cast<std::size_t>(gpu_blocks_) * kGpuFmaBlock, device),
      gpu_cycles_(device == Device::gpu ? 1 : 0, device) {
  DLB_REQUIRE(iterations >= 25, "fma peak: at least 25 rounds, for the lanes to reach 1.0");
  if (device == Device::gpu) poison_nan(gpu_out_.host());
  gpu_out_.upload();
}

void FmaPeakCase::run() {
  if (device_ == Device::cpu) {
    cpu_total_ = cpu_fma_peak(iterations_, &cpu_threads_);
    return;
  }
#if DLB_HAVE_CUDA
  launch_gpu_fma_peak(iterations_, gpu_blocks_, gpu_out_.data(), gpu_cycles_.data(), ctx_.exec().stream);
#endif
}

double FmaPeakCase::measured_sm_clock_hz() {
#if DLB_HAVE_CUDA
  if (device_ != Device::gpu) return 0.0;
  Event start, stop;
  start.record(ctx_.exec().stream);
  run();
  stop.record(ctx_.exec().stream);
  stop.synchronize();
  gpu_cycles_.download();
  const double seconds = 1e-3 * stop.elapsed_ms_since(start);
  return seconds > 0.0 ? static_cast<double>(gpu_cycles_.host()[0]) / seconds : 0.0;
#else
  return 0.0;
#endif
}

ref::Comparison FmaPeakCase::validate() {
  run();
  ctx_.synchronize();
  if (device_ == Device::cpu) {
    const double expected = static_cast<double>(cpu_fma_lanes()) * kFmaChains * cpu_threads_;
    return ref::compare(std::span<const double>(&cpu_total_, 1), std::span<const double>(&expected, 1), 0.0);
  }
  gpu_out_.download();
  const std::vector<double> expected(gpu_out_.size(), static_cast<double>(kGpuFmaChains));
  return ref::compare(std::span<const float>(gpu_out_.host()), expected, 0.0);
}

double FmaPeakCase::flops_per_call() const {
  const double per_round = device_ == Device::cpu
                               ? static_cast<double>(cpu_threads_) * cpu_fma_lanes() * kFmaChains
                               : static_cast<double>(gpu_out_.size()) * kGpuFmaChains;
  return 2.0 * per_round * static_cast<double>(iterations_);
}

std::string FmaPeakCase::label() const {
  if (device_ == Device::gpu) return std::to_string(gpu_blocks_) + "x" + std::to_string(kGpuFmaBlock) + " threads";
  std::string isa = cpu_fma_lanes() == 16 ? "avx512" : cpu_fma_lanes() == 8 ? "avx2" : "scalar";
  return isa.append(", ").append(std::to_string(cpu_threads_)).append(" threads");
}

// ---------------------------------------------------------------- SGEMM

SgemmCase::SgemmCase(Device device, std::int64_t m, std::int64_t n, std::int64_t k)
    : m_(m), n_(n), k_(k), ctx_(device),
      a_(static_cast<std::size_t>(m * k), device),
      b_(static_cast<std::size_t>(k * n), device),
      c_(static_cast<std::size_t>(m * n), device) {
  fill_random(a_.host(), 31);
  fill_random(b_.host(), 32);
  a_.upload();
  b_.upload();
  if (device == Device::cpu) {
#if DLB_HAVE_ONEDNN
    run_ = [this] { sgemm_onednn(m_, n_, k_, a_.data(), b_.data(), c_.data()); };
#else
    throw Unsupported("built without oneDNN");
#endif
  } else {
#if DLB_HAVE_CUDA
    run_ = prepare_sgemm_cublas(m, n, k, a_.data(), b_.data(), c_.data(), ctx_.exec());
#endif
  }
}

ref::Comparison SgemmCase::validate() {
  poison_nan(c_.host());
  c_.upload();
  run_();
  ctx_.synchronize();
  c_.download();
  // Only spread rows are compared (the reference is O(mnk)); all of C was poisoned.
  const auto rows = ref::spread_rows(m_, kSpotRows);
  const auto expected = ref::gemm_rows(a_.host().data(), b_.host().data(), n_, k_, rows);
  std::vector<float> got;
  for (auto r : rows) got.insert(got.end(), c_.host().begin() + r * n_, c_.host().begin() + (r + 1) * n_);
  // fp32 accumulation over k terms: 1e-5 of the largest |C| is ample for k up to ~10^4.
  return ref::compare(std::span<const float>(got), expected, 1e-5);
}

// ---------------------------------------------------------------- GPU triad

GpuTriadCase::GpuTriadCase(std::int64_t n)
    : n_(n),
      a_(static_cast<std::size_t>(n), Device::gpu),
      b_(static_cast<std::size_t>(n), Device::gpu),
      c_(static_cast<std::size_t>(n), Device::gpu) {
  DLB_REQUIRE(n > 0 && n % 2 == 0, "gpu triad: n must be positive and even");
  fill_random(b_.host(), 22);
  fill_random(c_.host(), 23);
  b_.upload();
  c_.upload();
}

void GpuTriadCase::run() {
#if DLB_HAVE_CUDA
  launch_gpu_triad(a_.data(), b_.data(), c_.data(), kTriadScalar, n_, ctx_.exec().stream);
#endif
}

ref::Comparison GpuTriadCase::validate() {
  // One fused multiply-add per element: exact against std::fma.
  std::vector<double> expected(static_cast<std::size_t>(n_));
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = std::fma(kTriadScalar, c_.host()[i], b_.host()[i]);
  return checked_run([this] { run(); }, ctx_, a_, expected, 0.0);
}

// ---------------------------------------------------------------- GPU copy

GpuCopyCase::GpuCopyCase(std::int64_t n)
    : n_(n), src_(static_cast<std::size_t>(n), Device::gpu), dst_(static_cast<std::size_t>(n), Device::gpu) {
  fill_random(src_.host(), 41);
  src_.upload();
}

void GpuCopyCase::run() {
#if DLB_HAVE_CUDA
  DLB_CUDA_CHECK(cudaMemcpyAsync(dst_.data(), src_.data(), src_.bytes(), cudaMemcpyDeviceToDevice,
                                 ctx_.exec().stream));
#endif
}

ref::Comparison GpuCopyCase::validate() {
  const std::vector<double> expected(src_.host().begin(), src_.host().end());
  return checked_run([this] { run(); }, ctx_, dst_, expected, 0.0);
}

// ---------------------------------------------------------------- GPU memory ceiling

namespace {
constexpr int kMemoryWarmupRounds = 2;
constexpr int kMemoryRounds = 5;
constexpr std::size_t kParts = std::size(kGpuMemoryParts);

std::int64_t largest_part_elements(double bytes) {
  std::int64_t n = 0;
  for (const MemoryPart& p : kGpuMemoryParts) n = std::max(n, memory_part_elements(p.pattern, sizeof(double), bytes));
  return n;
}
}  // namespace

GpuMemoryCase::GpuMemoryCase(double bytes)
    : n_max_(largest_part_elements(bytes)),
      a_(static_cast<std::size_t>(n_max_), Device::gpu),
      b_(static_cast<std::size_t>(n_max_), Device::gpu),
      c_(static_cast<std::size_t>(n_max_), Device::gpu),
      rates_(kParts, 0.0) {
  DLB_REQUIRE(n_max_ >= 2, "gpu memory ceiling: too few bytes per call");
  for (const MemoryPart& p : kGpuMemoryParts) {
    n_.push_back(memory_part_elements(p.pattern, sizeof(double), bytes));
    bytes_.push_back(memory_bytes_per_element(p.pattern, sizeof(double)) * static_cast<double>(n_.back()));
  }
  fill_random(b_.host(), 22);
  fill_random(c_.host(), 23);
  b_.upload();
  c_.upload();
#if DLB_HAVE_CUDA
  int device = 0, l2 = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&device));
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  flush_ = DeviceBuffer<unsigned char>(2 * static_cast<std::size_t>(l2 > 0 ? l2 : 1 << 20));
  sink_ = DeviceBuffer<int>(1);
  DLB_CUDA_CHECK(cudaMemsetAsync(flush_.data(), 0, flush_.bytes(), ctx_.exec().stream));
  ctx_.synchronize();
#endif
}

void GpuMemoryCase::run_part(std::size_t part) {
#if DLB_HAVE_CUDA
  launch_gpu_memory_part(kGpuMemoryParts[part], a_.data(), b_.data(), c_.data(), kTriadScalar, n_[part],
                         ctx_.exec().stream);
#else
  (void)part;
#endif
}

void GpuMemoryCase::run() { run_part(static_cast<std::size_t>(chosen_)); }

std::string_view GpuMemoryCase::chosen() const { return kGpuMemoryParts[static_cast<std::size_t>(chosen_)].name; }

ref::Comparison GpuMemoryCase::validate() {
  // Every part bit-exact over all of its output (a copy, or one fma per
  // element). The update changes its input b: b is put back after it.
  ref::Comparison all;
  std::vector<double> fma_expected;  // b + s*c over the longest triad or update
  std::vector<double> b_saved;
  for (std::size_t p = 0; p < kParts; ++p) {
    const MemoryPart& part = kGpuMemoryParts[p];
    const auto n = static_cast<std::size_t>(n_[p]);
    if (part.pattern != MemoryPattern::copy && fma_expected.size() < n) {
      fma_expected.resize(n);
      for (std::size_t i = 0; i < n; ++i) fma_expected[i] = std::fma(kTriadScalar, c_.host()[i], b_.host()[i]);
    }
    Operand<double>& out = part.pattern == MemoryPattern::update ? b_ : a_;
    if (part.pattern == MemoryPattern::update) {
      if (b_saved.empty()) b_saved.assign(b_.host().begin(), b_.host().end());
    } else {
#if DLB_HAVE_CUDA
      // Poisoned on the device (all bits set: a NaN), which is far quicker
      // than a pageable upload of up to 768 MiB per part.
      DLB_CUDA_CHECK(cudaMemsetAsync(a_.data(), 0xff, static_cast<std::size_t>(n_max_) * sizeof(double),
                                     ctx_.exec().stream));
#endif
    }
    run_part(p);
    ctx_.synchronize();
    out.download();
    const std::span<const double> expected =
        part.pattern == MemoryPattern::copy ? std::span<const double>(c_.host().data(), n)
                                            : std::span<const double>(fma_expected.data(), n);
    auto c = ref::compare(std::span<const double>(out.host().data(), n), expected, 0.0);
    if (part.pattern == MemoryPattern::update) {
      std::copy(b_saved.begin(), b_saved.end(), b_.host().begin());
      b_.upload();
    }
    if (!c.ok) {
      c.first = std::string(part.name) + ": " + c.first;
      return c;
    }
    all = c;
  }
#if DLB_HAVE_CUDA
  // The choice: every part timed as a case is, round by round, so that a
  // drift during the choice falls on all of them alike.
  std::vector<MemoryTiming> timings(kParts);
  for (std::size_t p = 0; p < kParts; ++p) timings[p].bytes = bytes_[p];
  const cudaStream_t stream = ctx_.exec().stream;
  for (int round = 0; round < kMemoryWarmupRounds + kMemoryRounds; ++round) {
    for (std::size_t p = 0; p < kParts; ++p) {
      dlb::launch_read_through(flush_.data(), flush_.bytes(), sink_.data(), stream);
      const double s = time_held_call(stream, [&] { run_part(p); });
      if (round >= kMemoryWarmupRounds) timings[p].seconds.push_back(s);
    }
  }
  for (std::size_t p = 0; p < kParts; ++p) rates_[p] = bytes_[p] / median_seconds(timings[p].seconds);
  chosen_ = best_memory_part(timings);
  DLB_REQUIRE(chosen_ >= 0, "gpu memory ceiling: no part was timed");
#endif
  return all;
}

}  // namespace dlb
