// RAII for cuDNN descriptors. Include only from code built with cuDNN.
#pragma once

#include <climits>
#include <cstdint>
#include <cstdio>

#include "kernels/common/cuda_check.h"

namespace dlb {

// A dimension as the int cuDNN's descriptors take; dlb::Error past INT_MAX.
inline int cudnn_dim(std::int64_t v) {
  DLB_REQUIRE(v >= 0 && v <= INT_MAX, "cuDNN takes int dimensions, not " + std::to_string(v));
  return static_cast<int>(v);
}

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

// An activation descriptor: ReLU (or another mode), NaN propagated.
class CudnnActivationDesc {
 public:
  explicit CudnnActivationDesc(cudnnActivationMode_t mode) {
    DLB_CUDNN_CHECK(cudnnCreateActivationDescriptor(&desc_));
    try {
      DLB_CUDNN_CHECK(cudnnSetActivationDescriptor(desc_, mode, CUDNN_PROPAGATE_NAN, 0.0));
    } catch (...) {
      cudnnDestroyActivationDescriptor(desc_);
      throw;
    }
  }
  CudnnActivationDesc(const CudnnActivationDesc&) = delete;
  CudnnActivationDesc& operator=(const CudnnActivationDesc&) = delete;
  ~CudnnActivationDesc() {
    if (cudnnDestroyActivationDescriptor(desc_) != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "dlbench: cudnnDestroyActivationDescriptor failed\n");
  }
  cudnnActivationDescriptor_t get() const { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

// A 2-D pooling descriptor: square window, stride, no padding.
class CudnnPoolingDesc {
 public:
  CudnnPoolingDesc(cudnnPoolingMode_t mode, int window_h, int window_w, int stride_h, int stride_w) {
    DLB_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_));
    try {
      DLB_CUDNN_CHECK(cudnnSetPooling2dDescriptor(desc_, mode, CUDNN_PROPAGATE_NAN, window_h, window_w, 0, 0,
                                                  stride_h, stride_w));
    } catch (...) {
      cudnnDestroyPoolingDescriptor(desc_);
      throw;
    }
  }
  CudnnPoolingDesc(const CudnnPoolingDesc&) = delete;
  CudnnPoolingDesc& operator=(const CudnnPoolingDesc&) = delete;
  ~CudnnPoolingDesc() {
    if (cudnnDestroyPoolingDescriptor(desc_) != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "dlbench: cudnnDestroyPoolingDescriptor failed\n");
  }
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

// cuDNN 9 marks its legacy convolution API (filter and convolution
// descriptors, cudnnConvolutionForward and its algorithm choice) deprecated;
// it warns only where CUDNN_WARN_DEPRECATED is defined. It is still the API
// that frameworks' algorithm choice exposes, so dlbench uses it and keeps
// the warning quiet here and where the calls are made.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

// A 4-D filter descriptor, [k, c, r, s] (KCRS, OIHW) unless told otherwise.
class CudnnFilterDesc {
 public:
  CudnnFilterDesc(int k, int c, int r, int s, cudnnDataType_t type = CUDNN_DATA_FLOAT,
                  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW) {
    DLB_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
    try {
      DLB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(desc_, type, format, k, c, r, s));
    } catch (...) {
      cudnnDestroyFilterDescriptor(desc_);
      throw;
    }
  }
  CudnnFilterDesc(const CudnnFilterDesc&) = delete;
  CudnnFilterDesc& operator=(const CudnnFilterDesc&) = delete;
  ~CudnnFilterDesc() {
    if (cudnnDestroyFilterDescriptor(desc_) != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "dlbench: cudnnDestroyFilterDescriptor failed\n");
  }
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// A 2-D convolution descriptor: cross-correlation (what frameworks call
// convolution), no dilation, accumulation in `compute`, and the math type
// (CUDNN_FMA_MATH: strict fp32, no TF32 tensor cores).
class CudnnConvolutionDesc {
 public:
  CudnnConvolutionDesc(int pad_h, int pad_w, int stride_h, int stride_w, cudnnMathType_t math,
                       cudnnDataType_t compute = CUDNN_DATA_FLOAT) {
    DLB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
    try {
      DLB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(desc_, pad_h, pad_w, stride_h, stride_w, 1, 1,
                                                      CUDNN_CROSS_CORRELATION, compute));
      DLB_CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, math));
    } catch (...) {
      cudnnDestroyConvolutionDescriptor(desc_);
      throw;
    }
  }
  CudnnConvolutionDesc(const CudnnConvolutionDesc&) = delete;
  CudnnConvolutionDesc& operator=(const CudnnConvolutionDesc&) = delete;
  ~CudnnConvolutionDesc() {
    if (cudnnDestroyConvolutionDescriptor(desc_) != CUDNN_STATUS_SUCCESS)
      std::fprintf(stderr, "dlbench: cudnnDestroyConvolutionDescriptor failed\n");
  }
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

#pragma GCC diagnostic pop

}  // namespace dlb
