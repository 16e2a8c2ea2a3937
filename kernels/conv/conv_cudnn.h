// What the cuDNN convolutions share with other families (the networks), and
// the fixed-algorithm cuDNN variants, for the variant table (conv.cpp):
// cudnnConvolutionForward with one algorithm, chosen by the template
// argument so that each row of the table is a plain function pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include <cudnn.h>

#include "kernels/conv/conv.h"

namespace dlb {

// The statuses that say "this algorithm does not do this problem" (skipped
// by an algorithm search, a case skipped as unsupported). The rest of the
// NOT_SUPPORTED category (an incompatible driver or runtime, an
// architecture mismatch, a missing sublibrary...) says the installation is
// broken: that is an error, not a skipped case.
bool cudnn_not_supported(cudnnStatus_t status);

// The name of a forward algorithm ("CUDNN_CONVOLUTION_FWD_ALGO_FFT").
const char* cudnn_algo_name(cudnnConvolutionFwdAlgo_t algo);

// The largest relative max-norm error `algo` is held to on an r x s filter
// in strict fp32: 1e-5 (the fp32 bound), or more where its transform rounds
// more (the nonfused Winograd on filters other than 3x3); the analysis is
// next to it.
double cudnn_fp32_tolerance(cudnnConvolutionFwdAlgo_t algo, std::int64_t r, std::int64_t s);

// The median seconds of 7 calls of `call` on `stream`, each timed as the
// benchmark times a GPU case (time_held_call: the stream held while the call
// is enqueued, two events around it). The caller makes the untimed warm-up
// calls. Synchronous; `call` must return success.
double cudnn_median_seconds(CUstream_st* stream, const std::function<cudnnStatus_t()>& call);

// The fastest strict-fp32 algorithm for this problem, timed on the given
// device buffers as the benchmark times a convolution, among those cuDNN's
// heuristic lists as supported that keep the 1e-5 bound on this filter
// (cudnn_fp32_tolerance): the heuristic's own pick (the first such entry)
// unless another is faster by more than 2%; the rules and why are in
// conv_cudnn_search.h. `log` says each list entry's median or why it was
// not timed. y is overwritten. dlb::Unsupported if none runs. Synchronous.
struct CudnnSearch {
  cudnnConvolutionFwdAlgo_t algo;
  std::string log;
};
CudnnSearch cudnn_search_fp32(cudnnHandle_t handle, CUstream_st* stream, cudnnTensorDescriptor_t x_desc, const void* x,
                              cudnnFilterDescriptor_t w_desc, const void* w, cudnnConvolutionDescriptor_t conv,
                              cudnnTensorDescriptor_t y_desc, void* y);
// The same, the algorithm only.
cudnnConvolutionFwdAlgo_t cudnn_search_fp32_algorithm(cudnnHandle_t handle, CUstream_st* stream,
                                                      cudnnTensorDescriptor_t x_desc, const void* x,
                                                      cudnnFilterDescriptor_t w_desc, const void* w,
                                                      cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y_desc,
                                                      void* y);

// The same search for a descriptor with CUDNN_TENSOR_OP_MATH on fp32 data
// (TF32 permitted on sm_80 and later: gpu_cudnn_graph_tf32): tensor-op
// entries are candidates too (screen_search_entries with tf32).
cudnnConvolutionFwdAlgo_t cudnn_search_tf32_algorithm(cudnnHandle_t handle, CUstream_st* stream,
                                                      cudnnTensorDescriptor_t x_desc, const void* x,
                                                      cudnnFilterDescriptor_t w_desc, const void* w,
                                                      cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y_desc,
                                                      void* y);

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
