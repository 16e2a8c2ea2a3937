// The one owner of a CUDA library's handle or descriptor (a stream, an
// event, a cuBLAS, cuBLASLt or cuDNN handle, a cuDNN descriptor), that the
// RAII classes of cuda_resources.h, cudnn_resources.h and
// cudnn_graph_resources.h derive from. Destructors never throw; a failure to
// free is reported on stderr (it means an earlier error already broke the
// context). Include only from code built with CUDA.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <utility>

#include "kernels/common/cuda_check.h"

namespace dlb {

namespace detail {
inline void report_release_failure(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    std::fprintf(stderr, "dlbench: %s failed: %s\n", what, cudaGetErrorString(status));
}
inline void report_release_failure(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) std::fprintf(stderr, "dlbench: %s failed\n", what);
}
#if DLB_HAVE_CUDNN
inline void report_release_failure(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) std::fprintf(stderr, "dlbench: %s failed\n", what);
}
#endif

// A string literal as a template argument: the name of the call that frees.
template <std::size_t N>
struct CallName {
  constexpr CallName(const char (&name)[N]) { std::copy_n(name, N, text); }  // NOLINT: implicit on purpose
  char text[N];
};
}  // namespace detail

// Owns a `Handle` that `Destroy` (named `Name` in the report of a failure)
// frees. A derived class creates it into out() in its constructor and then
// sets it up: when a set-up call throws, this base is already built, so its
// destructor frees the handle. Movable (a moved-from owner holds nothing),
// not copyable.
template <class Handle, auto Destroy, detail::CallName Name>
class OwnedHandle {
 public:
  OwnedHandle() = default;
  OwnedHandle(OwnedHandle&& o) noexcept : handle_(std::exchange(o.handle_, nullptr)) {}
  OwnedHandle& operator=(OwnedHandle&&) = delete;
  OwnedHandle(const OwnedHandle&) = delete;
  OwnedHandle& operator=(const OwnedHandle&) = delete;
  ~OwnedHandle() {
    if (handle_ != nullptr) detail::report_release_failure(Destroy(handle_), Name.text);
  }
  Handle get() const { return handle_; }
  Handle* out() { return &handle_; }  // for the create call

 private:
  Handle handle_ = nullptr;
};

}  // namespace dlb
