// copy: host <-> device copies, what page-locked ("pinned") host memory buys,
// and what it buys with streams. GPU only: the files of this operator are
// built only with CUDA, and its cases are registered only with a device.
//
// Single copies are the product of three small tables, so that adding a host
// memory kind or a way to call the copy is one row (copy.cpp); the variant
// names are composed from the rows, gpu_<direction>_<host kind>_<call>:
//   host kinds (host_kinds())
//     pageable    plain 64-byte aligned allocation (as HostBuffer), every page
//                 written before timing: what a tensor's storage is by default
//     pinned      cudaHostAlloc (as PinnedBuffer): what pin_memory=True gives
//     registered  page-aligned pageable memory, cudaHostRegister once at set-up
//                 (outside the timing), cudaHostUnregister when freed
//     wc          cudaHostAlloc write-combined: uncached for the CPU, so h2d only
//   calls (copy_calls())
//     sync        cudaMemcpy: on the legacy default stream, returns when done
//     async       cudaMemcpyAsync on the case's own non-blocking stream
//   directions    h2d, d2h
// = 14 rows: gpu_h2d_{pageable,pinned,registered,wc}_{sync,async},
//            gpu_d2h_{pageable,pinned,registered}_{sync,async}; plus
//   gpu_d2d       cudaMemcpyAsync device to device: the device-side ceiling.
//
// The family has two more kinds of case (bench/copy.cpp):
//   gpu_register_cost                cudaHostRegister + cudaHostUnregister of a
//                                    pageable buffer: the price of pinning on the fly
//   gpu_serial_<kind>, gpu_overlap_<kind>
//                                    the chunk pipeline below on 1 stream, or on
//                                    2 and 4 streams, with pinned or pageable memory
//
// The chunk pipeline: n floats in `chunks` contiguous parts; for each part
//   copy in (h2d) -> scale_shift in place (x = a*x + b: one read and one
//   write per element, memory-bound) -> copy out (d2h)
// all three on worker stream c % streams, in that order. With pinned memory
// and several streams the copy engines (one per direction) and the SMs work
// on different chunks at once. With pageable memory the driver stages every
// copy through a pinned buffer of its own while the host thread waits, and a
// d2h copy returns only when it is done, which means after everything before
// it on its stream: the next chunk is enqueued only then, and nothing
// overlaps, whatever the streams. The results are copied back, not only the
// inputs in: one pass of a memory-bound kernel takes some 3% of the time of
// the h2d copy (device memory is ~60x faster than PCIe), too little to
// measure an overlap against; the two copy directions overlap each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/cuda_resources.h"

namespace dlb {

enum class Direction { h2d, d2h, d2d };
std::string_view direction_name(Direction d);
cudaMemcpyKind memcpy_kind(Direction d);

// ------------------------------------------------------------ host memory

// Host memory of the kind a HostKind row allocates: owned, move-only, freed
// by the kind's own deallocate (cudaFreeHost, cudaHostUnregister + delete...).
struct HostDeleter {
  void (*deallocate)(void*) = nullptr;
  void operator()(std::uint8_t* p) const { deallocate(p); }
};
using HostBytes = std::unique_ptr<std::uint8_t[], HostDeleter>;

template <class Memory>
HostBytes allocate_host(std::size_t bytes) {
  return HostBytes(static_cast<std::uint8_t*>(Memory::allocate(bytes)), HostDeleter{&Memory::deallocate});
}

// Pageable memory in whole pages, page-aligned. cudaHostRegister locks whole
// pages: two buffers that shared a page could not both be registered.
struct PageAlignedMemory {
  static void* allocate(std::size_t bytes);
  static void deallocate(void* p) noexcept;
};

// PageAlignedMemory registered with cudaHostRegister (default flags: mapped
// and portable with unified addressing) for its whole life.
struct RegisteredMemory {
  static void* allocate(std::size_t bytes);
  static void deallocate(void* p) noexcept;
};

// One row of the host memory table.
struct HostKind {
  std::string_view name;
  HostBytes (*allocate)(std::size_t bytes);
  // What CUDA must see (cudaPointerGetAttributes: cudaMemoryTypeHost, or
  // unregistered): checked before timing, so that no case is flattered or
  // handicapped by memory of another kind than its name says.
  bool page_locked;
  // Write-combined memory is uncached for the CPU: a d2h destination would
  // be read back at a crawl, and nobody should use it that way.
  bool h2d_only;
  // Run-time availability; nullptr means always.
  bool (*available)() = nullptr;
};

std::span<const HostKind> host_kinds();
// The row named `name`; dlb::Error naming the known kinds otherwise.
const HostKind& host_kind(std::string_view name);

// True when CUDA knows `p` as page-locked host memory (cudaHostAlloc or
// cudaHostRegister), false for pageable memory.
bool is_page_locked(const void* p);
// The device can register host memory (cudaDevAttrHostRegisterSupported).
bool host_register_supported();

// [data, data + bytes) page-locked with cudaHostRegister from construction
// until unregister() (checked) or destruction (a failure reported on stderr).
class HostRegistration {
 public:
  HostRegistration(void* data, std::size_t bytes);
  HostRegistration(const HostRegistration&) = delete;
  HostRegistration& operator=(const HostRegistration&) = delete;
  ~HostRegistration();
  void unregister();

 private:
  void* data_ = nullptr;
};

// ------------------------------------------------------------ single copies

struct CopyArgs {
  void* dst = nullptr;        // [bytes]: device memory, or host memory for d2h
  const void* src = nullptr;  // [bytes]: host memory for h2d, else device memory
  std::size_t bytes = 0;
  Direction direction = Direction::h2d;
};

// One row of the call table.
struct CopyCall {
  std::string_view name;
  // The stream the call is ordered with, given the case's own stream: the
  // one its timing events must be recorded on.
  CUstream_st* (*ordered_on)(CUstream_st* case_stream);
  // One copy, called with ordered_on(case stream).
  void (*copy)(const CopyArgs& args, CUstream_st* stream);
};

std::span<const CopyCall> copy_calls();

// cudaMemcpy. It always runs on the legacy default stream (dlbench is not
// built with per-thread default streams), which is what it is given. It
// returns when the copy is done, except from pageable memory to the device:
// then it returns once the data is staged, and the last DMA completes in
// the stream's order.
void copy_sync(const CopyArgs& args, CUstream_st* legacy_default_stream);
// cudaMemcpyAsync on `stream`. From or to pageable memory it is not
// asynchronous: the host waits while the driver stages the data.
void copy_async(const CopyArgs& args, CUstream_st* stream);

// A single-copy variant: one row of each table (host is nullptr for d2d).
struct CopyVariant {
  std::string name;  // "gpu_h2d_pinned_sync": the second part of the case name
  Direction direction;
  const HostKind* host;
  const CopyCall* call;

  bool usable() const { return host == nullptr || host->available == nullptr || host->available(); }
};

// Every single-copy variant, built once from the tables.
const std::vector<CopyVariant>& copy_variants();

// cudaHostRegister + cudaHostUnregister of [data, data + bytes): the cost of
// pinning a buffer on the fly, per call.
void register_and_unregister(void* data, std::size_t bytes);

// ------------------------------------------------------------ the chunk pipeline

// The pipeline's kernel: x = kPipelineScale * x + kPipelineShift (fmaf).
inline constexpr float kPipelineScale = 0.5f;
inline constexpr float kPipelineShift = 0.25f;

// x: [n] device memory, transformed in place on `stream`.
void launch_scale_shift(float* x, std::int64_t n, CUstream_st* stream);

struct PipelineArgs {
  const float* host_in = nullptr;  // [n] host memory: what is copied in
  float* host_out = nullptr;       // [n] host memory: what comes back
  float* device = nullptr;         // [n] device memory, transformed in place
  std::int64_t n = 0;
  // Contiguous parts in order, sizes n / chunks or one more (the first
  // n % chunks of them); empty ones, when n < chunks, are skipped.
  int chunks = 1;
};

// Which stages enqueue() runs (all three by default); one alone measures
// that stage's total time.
struct PipelineStages {
  bool h2d = true;
  bool kernel = true;
  bool d2h = true;
};

// The pipeline on its own worker streams. enqueue() forks them from the
// caller's stream and joins them back into it, so that events recorded on
// the caller's stream before and after bracket all of the work, and work
// enqueued there afterwards waits for it.
class ChunkPipeline {
 public:
  ChunkPipeline(const PipelineArgs& args, int streams);
  void enqueue(CUstream_st* origin, PipelineStages stages = {}) const;

 private:
  PipelineArgs args_;
  std::vector<Stream> streams_;
  Event fork_{cudaEventDisableTiming};
  std::vector<Event> joins_;  // joins_[s]: the end of streams_[s]'s work
};

}  // namespace dlb
