// This process's own device memory, counted as it allocates it: every
// DeviceBuffer (cuda_resources.h: DeviceMemory's cudaMalloc and cudaFree)
// goes through the process's DeviceByteCount, which keeps the bytes live
// now and their peak. Unlike a difference of cudaMemGetInfo's free bytes,
// which is device-wide, no other process can move it: the GPU kit runs
// its test binaries side by side on one GPU, and another binary freeing
// memory during a step made that difference read 0 (the H200 run of
// 2026-11-27, finding 3).
//
// What it cannot see: memory the CUDA runtime and driver take for the
// context and the modules' code, what the cuDNN and cuBLAS handles
// allocate inside themselves (cuBLAS's default workspace, cuDNN's internal
// buffers and runtime-compiled engines), CUDA graphs' own memory, and any
// cudaMalloc outside DeviceMemory. The workspaces we pass to cuDNN and
// cuBLAS are DeviceBuffers, and counted.
//
// Plain C++ (no CUDA): the counting logic is tested on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace dlb {

class DeviceBytePeak;

class DeviceByteCount {
 public:
  // The process's count, the one DeviceMemory reports to.
  static DeviceByteCount& process();

  // `p` now holds `bytes`; a null p (nothing allocated) is not counted.
  void allocated(const void* p, std::size_t bytes);
  // `p` is freed: its bytes are no longer live. A pointer this count never
  // saw (or null) changes nothing and returns false.
  bool freed(const void* p);

  std::int64_t live_bytes() const;
  std::int64_t allocations() const;  // live allocations

 private:
  friend class DeviceBytePeak;
  mutable std::mutex mutex_;
  std::unordered_map<const void*, std::size_t> sizes_;
  std::int64_t live_ = 0;
  std::vector<DeviceBytePeak*> watches_;  // each one's peak follows live_
};

// The peak of a DeviceByteCount's live bytes from this object's
// construction on, and how far that is above the live bytes at its
// construction: the device memory a piece of work took, counting what it
// allocated and freed again on the way (a search's temporary workspace).
// Watches nest and overlap: each keeps its own peak.
class DeviceBytePeak {
 public:
  explicit DeviceBytePeak(DeviceByteCount& count = DeviceByteCount::process());
  ~DeviceBytePeak();
  DeviceBytePeak(const DeviceBytePeak&) = delete;
  DeviceBytePeak& operator=(const DeviceBytePeak&) = delete;

  std::int64_t start_bytes() const;
  std::int64_t peak_bytes() const;
  // peak_bytes() - start_bytes().
  std::int64_t rise() const;

 private:
  friend class DeviceByteCount;
  DeviceByteCount& count_;
  std::int64_t start_ = 0, peak_ = 0;  // guarded by count_.mutex_
};

}  // namespace dlb
