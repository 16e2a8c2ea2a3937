// What the cuDNN convolutions share with other families (the networks), and
// the fixed-algorithm cuDNN variants, for the variant table (conv.cpp):
// cudnnConvolutionForward with one algorithm, chosen by the template
// argument so that each row of the table is a plain function pointer.
#pragma once

#include <cstddef>

#include <cudnn.h>

#include "kernels/conv/conv.h"

namespace dlb {

// The name of a forward algorithm ("CUDNN_CONVOLUTION_FWD_ALGO_FFT").
const char* cudnn_algo_name(cudnnConvolutionFwdAlgo_t algo);

// What torch.backends.cudnn.benchmark = True picks: the fastest algorithm of
// cudnnFindConvolutionForwardAlgorithm that ran and keeps strict fp32 (no
// TF32 tensor-op math); dlb::Unsupported if none did. Synchronous.
cudnnConvolutionFwdAlgo_t cudnn_find_fp32_algorithm(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                    cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                                    cudnnTensorDescriptor_t y);
// The same for fp16/bf16 data, where tensor-op math is the point: the
// fastest that ran, whatever its math type.
cudnnConvolutionFwdAlgo_t cudnn_find_any_algorithm(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                                   cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                                   cudnnTensorDescriptor_t y);

// The workspace `algo` needs for this problem, in bytes
// (cudnnGetConvolutionForwardWorkspaceSize, checked).
std::size_t cudnn_workspace_bytes(cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                  cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y,
                                  cudnnConvolutionFwdAlgo_t algo);

Run prepare_conv_cudnn_algorithm(const ConvArgs& args, const Exec& exec, cudnnConvolutionFwdAlgo_t algo);

template <cudnnConvolutionFwdAlgo_t Algo>
Run prepare_conv_cudnn_fixed(const ConvArgs& args, const Exec& exec) {
  return prepare_conv_cudnn_algorithm(args, exec, Algo);
}

}  // namespace dlb
