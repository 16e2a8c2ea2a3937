// RAII for cuDNN's graph API (the backend descriptors of cudnn_graph.h):
// the C API itself, no frontend. Include only from code built with cuDNN.
#pragma once

#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "kernels/common/cuda_check.h"

namespace dlb {

// One backend descriptor: created on construction, destroyed with it.
// set() and get() throw dlb::Error on a failed status; finalize() returns
// the status (a descriptor cuDNN cannot finalise is an answer, not an error:
// an unsupported graph, an engine that does not run it).
class CudnnBackendDesc {
 public:
  explicit CudnnBackendDesc(cudnnBackendDescriptorType_t type) {
    DLB_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &desc_));
  }
  CudnnBackendDesc(CudnnBackendDesc&& o) noexcept : desc_(std::exchange(o.desc_, nullptr)) {}
  CudnnBackendDesc& operator=(CudnnBackendDesc&&) = delete;
  CudnnBackendDesc(const CudnnBackendDesc&) = delete;
  CudnnBackendDesc& operator=(const CudnnBackendDesc&) = delete;
  ~CudnnBackendDesc() {
    if (desc_ != nullptr && cudnnBackendDestroyDescriptor(desc_) != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "dlbench: cudnnBackendDestroyDescriptor failed\n");
  }
  cudnnBackendDescriptor_t get() const { return desc_; }

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
           const void* values) {
    DLB_CUDNN_CHECK(cudnnBackendSetAttribute(desc_, name, type, count, values));
  }
  void set_int64(cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& values) {
    set(name, CUDNN_TYPE_INT64, static_cast<std::int64_t>(values.size()), values.data());
  }
  void set_desc(cudnnBackendAttributeName_t name, const CudnnBackendDesc& d) {
    cudnnBackendDescriptor_t raw = d.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(desc_); }
  // Up to `capacity` values of attribute `name`; returns how many there are.
  std::int64_t get(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t capacity,
                   void* values) const {
    std::int64_t count = 0;
    DLB_CUDNN_CHECK(cudnnBackendGetAttribute(desc_, name, type, capacity, &count, values));
    return count;
  }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

}  // namespace dlb
