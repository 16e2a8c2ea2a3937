// RAII for cuDNN descriptors. Include only from code built with cuDNN.
#pragma once

#include <cstdio>

#include "kernels/common/cuda_check.h"

namespace dlb {

// A 4-D fp32 (or other) tensor descriptor, NCHW unless told otherwise.
class CudnnTensorDesc {
 public:
  CudnnTensorDesc(int n, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT,
                  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW) {
    DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    try {
      DLB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, format, type, n, c, h, w));
    } catch (...) {
      cudnnDestroyTensorDescriptor(desc_);
      throw;
    }
  }
  CudnnTensorDesc(const CudnnTensorDesc&) = delete;
  CudnnTensorDesc& operator=(const CudnnTensorDesc&) = delete;
  ~CudnnTensorDesc() {
    if (cudnnDestroyTensorDescriptor(desc_) != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "dlbench: cudnnDestroyTensorDescriptor failed\n");
  }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

}  // namespace dlb
