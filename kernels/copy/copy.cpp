// The copy family's tables: host memory kinds and calls. The single-copy
// variants are their product (minus write-combined d2h), plus device to
// device; see copy.h. Copies are exact: every case compares byte for byte.
#include <string>

#include "kernels/copy/copy.h"

namespace dlb {
namespace {

const HostKind kHostKinds[] = {
    {"pageable", allocate_host<HostMemory>, false, false},
    {"pinned", allocate_host<PinnedMemory<cudaHostAllocDefault>>, true, false},
    {"registered", allocate_host<RegisteredMemory>, true, false, host_register_supported},
    {"wc", allocate_host<PinnedMemory<cudaHostAllocWriteCombined>>, true, true},
};

CUstream_st* legacy_default_stream(CUstream_st* /*case_stream*/) { return cudaStreamLegacy; }
CUstream_st* case_stream(CUstream_st* stream) { return stream; }

const CopyCall kCopyCalls[] = {
    {"sync", legacy_default_stream, copy_sync},
    {"async", case_stream, copy_async},
};

}  // namespace

std::string_view direction_name(Direction d) {
  switch (d) {
    case Direction::h2d: return "h2d";
    case Direction::d2h: return "d2h";
    case Direction::d2d: return "d2d";
  }
  return "?";
}

cudaMemcpyKind memcpy_kind(Direction d) {
  switch (d) {
    case Direction::h2d: return cudaMemcpyHostToDevice;
    case Direction::d2h: return cudaMemcpyDeviceToHost;
    case Direction::d2d: return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

std::span<const HostKind> host_kinds() { return kHostKinds; }

const HostKind& host_kind(std::string_view name) {
  std::string known;
  for (const auto& kind : kHostKinds) {
    if (kind.name == name) return kind;
    known.append(known.empty() ? "" : ", ").append(kind.name);
  }
  throw_error(std::string("copy: no host memory kind '").append(name).append("' (").append(known).append(")"),
              __FILE__, __LINE__);
}

std::span<const CopyCall> copy_calls() { return kCopyCalls; }

const std::vector<CopyVariant>& copy_variants() {
  static const std::vector<CopyVariant> variants = [] {
    std::vector<CopyVariant> rows;
    for (const Direction direction : {Direction::h2d, Direction::d2h}) {
      for (const auto& host : kHostKinds) {
        if (host.h2d_only && direction != Direction::h2d) continue;
        for (const auto& call : kCopyCalls) {
          std::string name = "gpu_";
          name.append(direction_name(direction)).append("_").append(host.name).append("_").append(call.name);
          rows.push_back({std::move(name), direction, &host, &call});
        }
      }
    }
    // The device-side ceiling: cudaMemcpyAsync on the case's stream, no host memory.
    for (const auto& call : kCopyCalls)
      if (call.copy == copy_async) rows.push_back({"gpu_d2d", Direction::d2d, nullptr, &call});
    return rows;
  }();
  return variants;
}

}  // namespace dlb
