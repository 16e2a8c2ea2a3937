// An operator's operand as a benchmark or test holds it: always a host copy
// (filled, compared), plus a device copy when the variant runs on the GPU.
// data() is what the variant is given: host or device memory. `offset`
// shifts data() by that many elements from the aligned start, to test
// unaligned pointers.
#pragma once

#include <cstddef>
#include <span>

#include "kernels/common/buffer.h"
#include "kernels/common/error.h"
#include "kernels/common/variant.h"

#if DLB_HAVE_CUDA
#include "kernels/common/cuda_resources.h"
#endif

namespace dlb {

template <class T>
class Operand {
 public:
  Operand(std::size_t count, Device where, std::size_t offset = 0)
      : count_(count), offset_(offset), where_(where), host_(count + offset) {
#if DLB_HAVE_CUDA
    if (where == Device::gpu) device_ = DeviceBuffer<T>(count + offset);
#else
    DLB_REQUIRE(where == Device::cpu, "a GPU operand in a build without CUDA");
#endif
  }

  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  Device where() const { return where_; }

  // The host copy (what tests fill and compare).
  std::span<T> host() { return {host_.data() + offset_, count_}; }
  std::span<const T> host() const { return {host_.data() + offset_, count_}; }

  // What the variant reads or writes.
  T* data() {
#if DLB_HAVE_CUDA
    if (where_ == Device::gpu) return device_.data() + offset_;
#endif
    return host_.data() + offset_;
  }

  // Host copy -> device copy (no-op for a CPU operand). Done when it
  // returns: cudaMemcpy from pageable memory may return before its last DMA
  // lands (in the legacy default stream's order, which the cases'
  // non-blocking streams do not follow), so wait for the device.
  void upload() {
#if DLB_HAVE_CUDA
    if (where_ == Device::gpu && count_ > 0) {
      DLB_CUDA_CHECK(cudaMemcpy(data(), host().data(), bytes(), cudaMemcpyHostToDevice));
      DLB_CUDA_CHECK(cudaDeviceSynchronize());
    }
#endif
  }
  // Device copy -> host copy (no-op for a CPU operand). Synchronous; the
  // caller first waits for the work that wrote the device copy
  // (ExecContext::synchronize), which cudaMemcpy does not order after.
  void download() {
#if DLB_HAVE_CUDA
    if (where_ == Device::gpu && count_ > 0)
      DLB_CUDA_CHECK(cudaMemcpy(host().data(), data(), bytes(), cudaMemcpyDeviceToHost));
#endif
  }

 private:
  std::size_t count_;
  std::size_t offset_;
  Device where_;
  HostBuffer<T> host_;
#if DLB_HAVE_CUDA
  DeviceBuffer<T> device_;
#endif
};

}  // namespace dlb
