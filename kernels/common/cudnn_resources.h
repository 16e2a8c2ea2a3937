// RAII for cuDNN descriptors. Include only from code built with cuDNN.
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/common/owned_handle.h"

namespace dlb {

// A dimension as the int cuDNN's descriptors take; dlb::Error past INT_MAX.
inline int cudnn_dim(std::int64_t v) {
  DLB_REQUIRE(v >= 0 && v <= INT_MAX, "cuDNN takes int dimensions, not " + std::to_string(v));
  return static_cast<int>(v);
}

// A 4-D fp32 (or other) tensor descriptor, NCHW unless told otherwise.
class CudnnTensorDesc
    : public OwnedHandle<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor"> {
 public:
  CudnnTensorDesc(int n, int c, int h, int w, cudnnDataType_t type = CUDNN_DATA_FLOAT,
                  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW) {
    DLB_CUDNN_CHECK(cudnnCreateTensorDescriptor(out()));
    DLB_CUDNN_CHECK(cudnnSetTensor4dDescriptor(get(), format, type, n, c, h, w));
  }
};

// An activation descriptor: ReLU (or another mode), NaN propagated.
class CudnnActivationDesc : public OwnedHandle<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor,
                                               "cudnnDestroyActivationDescriptor"> {
 public:
  explicit CudnnActivationDesc(cudnnActivationMode_t mode) {
    DLB_CUDNN_CHECK(cudnnCreateActivationDescriptor(out()));
    DLB_CUDNN_CHECK(cudnnSetActivationDescriptor(get(), mode, CUDNN_PROPAGATE_NAN, 0.0));
  }
};

// A 2-D pooling descriptor: square window, stride, no padding.
class CudnnPoolingDesc
    : public OwnedHandle<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor, "cudnnDestroyPoolingDescriptor"> {
 public:
  CudnnPoolingDesc(cudnnPoolingMode_t mode, int window_h, int window_w, int stride_h, int stride_w) {
    DLB_CUDNN_CHECK(cudnnCreatePoolingDescriptor(out()));
    DLB_CUDNN_CHECK(
        cudnnSetPooling2dDescriptor(get(), mode, CUDNN_PROPAGATE_NAN, window_h, window_w, 0, 0, stride_h, stride_w));
  }
};

// cuDNN 9 marks its legacy convolution API (filter and convolution
// descriptors, cudnnConvolutionForward and its algorithm choice) deprecated;
// it warns only where CUDNN_WARN_DEPRECATED is defined. It is still the API
// that frameworks' algorithm choice exposes, so dlbench uses it and keeps
// the warning quiet here and where the calls are made.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

// A 4-D filter descriptor, [k, c, r, s] (KCRS, OIHW) unless told otherwise.
class CudnnFilterDesc
    : public OwnedHandle<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor"> {
 public:
  CudnnFilterDesc(int k, int c, int r, int s, cudnnDataType_t type = CUDNN_DATA_FLOAT,
                  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW) {
    DLB_CUDNN_CHECK(cudnnCreateFilterDescriptor(out()));
    DLB_CUDNN_CHECK(cudnnSetFilter4dDescriptor(get(), type, format, k, c, r, s));
  }
};

// A 2-D convolution descriptor: cross-correlation (what frameworks call
// convolution), no dilation, accumulation in `compute`, and the math type
// (CUDNN_FMA_MATH: strict fp32, no TF32 tensor cores).
class CudnnConvolutionDesc : public OwnedHandle<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor,
                                                "cudnnDestroyConvolutionDescriptor"> {
 public:
  CudnnConvolutionDesc(int pad_h, int pad_w, int stride_h, int stride_w, cudnnMathType_t math,
                       cudnnDataType_t compute = CUDNN_DATA_FLOAT) {
    DLB_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(out()));
    DLB_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(get(), pad_h, pad_w, stride_h, stride_w, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, compute));
    DLB_CUDNN_CHECK(cudnnSetConvolutionMathType(get(), math));
  }
};

#pragma GCC diagnostic pop

}  // namespace dlb
