// RAII for cuDNN's graph API (the backend descriptors of cudnn_graph.h):
// the C API itself, no frontend. Include only from code built with cuDNN.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/owned_handle.h"

namespace dlb {

// One backend descriptor: created on construction, destroyed with it.
// set() and get() throw dlb::Error on a failed status; finalize() returns
// the status (a descriptor cuDNN cannot finalise is an answer, not an error:
// an unsupported graph, an engine that does not run it).
class CudnnBackendDesc
    : public OwnedHandle<cudnnBackendDescriptor_t, cudnnBackendDestroyDescriptor, "cudnnBackendDestroyDescriptor"> {
 public:
  explicit CudnnBackendDesc(cudnnBackendDescriptorType_t type) {
    DLB_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, out()));
  }
  using OwnedHandle::get;  // the descriptor, beside get() of an attribute below

  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t count,
           const void* values) {
    DLB_CUDNN_CHECK(cudnnBackendSetAttribute(get(), name, type, count, values));
  }
  void set_int64(cudnnBackendAttributeName_t name, const std::vector<std::int64_t>& values) {
    set(name, CUDNN_TYPE_INT64, static_cast<std::int64_t>(values.size()), values.data());
  }
  void set_desc(cudnnBackendAttributeName_t name, const CudnnBackendDesc& d) {
    cudnnBackendDescriptor_t raw = d.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(get()); }
  // Up to `capacity` values of attribute `name`; returns how many there are.
  std::int64_t get(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, std::int64_t capacity,
                   void* values) const {
    std::int64_t count = 0;
    DLB_CUDNN_CHECK(cudnnBackendGetAttribute(get(), name, type, capacity, &count, values));
    return count;
  }
};

}  // namespace dlb
