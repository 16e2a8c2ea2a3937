// Checked calls for the CUDA runtime, cuBLAS/cuBLASLt and cuDNN. Each macro
// throws dlb::Error naming the call, the file and line, and the library's own
// error string. Include only from code built with CUDA.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/common/error.h"

#if DLB_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace dlb::detail {

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    // A failed call also leaves its error as the runtime's "last error" until
    // cudaGetLastError() reads it. Read it here, so that the next launch check
    // (DLB_CUDA_CHECK_LAUNCH) does not report this failure a second time, for
    // an innocent kernel: after a cudaMalloc that ran out of memory, say. A
    // sticky error (an illegal address) keeps the context broken anyway.
    cudaGetLastError();
    throw_error(std::string(call) + " failed: " + cudaGetErrorName(status) + ": " +
                    cudaGetErrorString(status),
                file, line);
  }
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw_error(std::string(call) + " failed: " + cublasGetStatusName(status) + ": " +
                    cublasGetStatusString(status),
                file, line);
  }
}

#if DLB_HAVE_CUDNN
inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw_error(std::string(call) + " failed: " + cudnnGetErrorString(status), file, line);
  }
}
#endif

}  // namespace dlb::detail

#define DLB_CUDA_CHECK(call) ::dlb::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define DLB_CUBLAS_CHECK(call) ::dlb::detail::check_cublas((call), #call, __FILE__, __LINE__)
#if DLB_HAVE_CUDNN
#define DLB_CUDNN_CHECK(call) ::dlb::detail::check_cudnn((call), #call, __FILE__, __LINE__)
#endif
// After every kernel launch: a bad configuration shows up here, not later.
#define DLB_CUDA_CHECK_LAUNCH() DLB_CUDA_CHECK(cudaGetLastError())
