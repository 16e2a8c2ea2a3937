// The copy family (kernels/copy/copy.h), GPU only: nothing is registered
// without a device.
//
// copy/<variant>/bytes:<n>, n from 4 KiB to 1 GiB in powers of 4: every
// single-copy variant (gpu_h2d_pinned_sync ...; gpu_d2d from 1 MiB). Timed by CUDA
// events around the copy alone, on the stream the copy is ordered with: the
// case's non-blocking stream for cudaMemcpyAsync, the legacy default stream
// for cudaMemcpy (Timing::stream; events on the case's stream would not be
// ordered with it at all). The stop event of a synchronous copy can only be
// enqueued after cudaMemcpy has returned, so its time includes the return
// to the host: what the call costs the program. No L2 flush for host copies:
// PCIe is some 60 times slower than device memory, whether the device side
// sits in L2 or in DRAM cannot change the time, and a flush would only add
// a memset per iteration. gpu_d2d runs at DRAM speed and is flushed.
// bytes_per_second counts the bytes copied, once (d2d moves twice as many
// through DRAM: roofline/gpu_copy counts both).
//
// copy/gpu_register_cost/bytes:<n>: cudaHostRegister + cudaHostUnregister of
// a pageable buffer whose pages are all written. These are host-side driver
// calls (locking pages, mapping them for the GPU), not stream work that
// events could bracket: manual time from a steady host clock around both.
// bytes_per_second is bytes pinned per second: pinning a buffer on the fly
// pays when register_cost + the registered copy beat the pageable copy.
//
// copy/gpu_serial_<kind>/chunks:16/bytes:<n> and
// copy/gpu_overlap_<kind>/streams:<2|4>/chunks:16/bytes:<n>, kind pinned or
// pageable, n 4 MiB, 64 MiB, 1 GiB: the chunk pipeline, events on the
// case's stream that it forks from and joins into. bytes_per_second counts
// the bytes copied, n in and n out; overlap_fraction: see PipelineCase.
//
// With --copy=bytes:B (bench/user_shapes.h): B alone (with --suite given
// too: B and the suite's sizes), every single-copy variant (gpu_d2d too),
// the register cost and, where B is a multiple of 4 (fp32 elements), the
// pipeline cases.
#include <chrono>
#include <string>
#include <vector>

#include "bench/cases/copy_case.h"
#include "bench/harness.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"

namespace dlb::bench {
namespace {

constexpr std::int64_t kKiB = 1024;
constexpr std::int64_t kMiB = 1024 * kKiB;
constexpr std::int64_t kGiB = 1024 * kMiB;
constexpr int kPipelineChunks = 16;

// from, from*factor, ... up to `to` inclusive.
std::vector<std::int64_t> geometric(std::int64_t from, std::int64_t to, std::int64_t factor) {
  std::vector<std::int64_t> out;
  for (std::int64_t v = from; v <= to; v *= factor) out.push_back(v);
  return out;
}

// Whether the copy call returns to the host before the copy is done, so the
// GPU timer may hold the stream while it is enqueued: cudaMemcpyAsync to or
// from page-locked memory (or device to device). cudaMemcpy, and copies that
// stage pageable memory, wait for the stream themselves.
bool returns_at_once(const CopyVariant& variant) {
  return variant.call->copy == copy_async && (variant.host == nullptr || variant.host->page_locked);
}

void add_copy(const CopyVariant& variant, std::int64_t bytes) {
  add_case(case_name("copy", variant.name, {{"bytes", bytes}}), Device::gpu,
           [&variant, bytes](benchmark::State& state) {
             auto* c = validated_case<CopyCase>(state, variant, bytes);
             if (c == nullptr) return;
             time_run(state, [c] { c->run(); }, c->context(),
                      Timing{.flush_l2 = variant.direction == Direction::d2d, .stream = c->stream(),
                             .hold = returns_at_once(variant)});
             set_bytes(state, static_cast<double>(bytes));
           });
}

void add_register_cost(std::int64_t bytes) {
  add_case(case_name("copy", "gpu_register_cost", {{"bytes", bytes}}), Device::gpu, [bytes](benchmark::State& state) {
    auto* c = validated_case<RegisterCostCase>(state, bytes);
    if (c == nullptr) return;
    c->run();  // warm-up: the driver's first registration
    for (auto _ : state) {
      const auto start = std::chrono::steady_clock::now();
      c->run();
      state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    set_bytes(state, static_cast<double>(bytes));
  });
}

void add_pipeline(const HostKind& host, int streams, std::int64_t bytes) {
  const std::string name =
      streams == 1 ? case_name("copy", std::string("gpu_serial_").append(host.name),
                               {{"chunks", kPipelineChunks}, {"bytes", bytes}})
                   : case_name("copy", std::string("gpu_overlap_").append(host.name),
                               {{"streams", streams}, {"chunks", kPipelineChunks}, {"bytes", bytes}});
  add_case(name, Device::gpu, [&host, streams, bytes](benchmark::State& state) {
    auto* c = validated_case<PipelineCase>(state, host, streams, kPipelineChunks, bytes);
    if (c == nullptr) return;
    state.counters["overlap_fraction"] = c->overlap_fraction();
    // The data is copied in afresh every call: L2 holds nothing to flush.
    // With pageable memory the copies wait for the stream: no hold.
    time_run(state, [c] { c->run(); }, c->context(), Timing{.flush_l2 = false, .hold = host.page_locked});
    set_bytes(state, 2.0 * static_cast<double>(bytes));
  });
}

// The user's sizes, registered whatever the suite (without a GPU the user
// is told: user_shapes.cpp).
void register_user_copies(const Config& config) {
  const SuiteBypass bypass;
  for (const CopyShape& shape : user_shapes().copy) {
    const std::int64_t bytes = shape.bytes;
    for (const CopyVariant& variant : copy_variants())
      if (config.name_only || variant.usable()) add_copy(variant, bytes);  // usable() asks the device
    if (config.name_only || host_register_supported()) add_register_cost(bytes);
    if (bytes % 4 != 0) continue;
    for (const char* kind : {"pageable", "pinned"})
      for (const int streams : {1, 2, 4}) add_pipeline(host_kind(kind), streams, bytes);
  }
}

bool user_size(std::int64_t bytes) { return is_user_shape(user_shapes().copy, CopyShape{bytes}); }

void register_copy(Config& config) {
  if (!config.gpu && !config.name_only) return;
  register_user_copies(config);
  if (!own_shapes_wanted()) return;
  const auto sizes = geometric(4 * kKiB, kGiB, 4);
  // gpu_d2d from 1 MiB: below that a device copy measures launch latency, not
  // a ceiling, and each of its iterations (a few microseconds) would pay the
  // ~100 MB L2 flush: some 30 s of the suite for no information.
  const auto d2d_sizes = geometric(kMiB, kGiB, 4);
  for (const CopyVariant& variant : copy_variants()) {
    if (!config.name_only && !variant.usable()) continue;  // usable() asks the device
    for (const auto bytes : variant.direction == Direction::d2d ? d2d_sizes : sizes)
      if (!user_size(bytes)) add_copy(variant, bytes);
  }
  if (config.name_only || host_register_supported()) {
    for (const auto bytes : sizes)
      if (!user_size(bytes)) add_register_cost(bytes);
  }
  for (const char* kind : {"pageable", "pinned"}) {
    for (const int streams : {1, 2, 4}) {
      for (const auto bytes : geometric(4 * kMiB, kGiB, 16))
        if (!user_size(bytes)) add_pipeline(host_kind(kind), streams, bytes);
    }
  }
}

DLB_BENCH_FAMILY(register_copy,
                 "what a host-device copy costs by memory kind (pageable, pinned, registered) and direction, and "
                 "how much a chunked pipeline overlaps (GPU only)");

}  // namespace
}  // namespace dlb::bench
