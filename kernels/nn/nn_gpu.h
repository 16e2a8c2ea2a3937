// The network layers as own CUDA kernels, for the GPU backends (gpu_own uses
// them all; gpu_cudnn the fc epilogue). NCHW fp32, every launcher only
// enqueues on `stream`. Internal to kernels/nn; built with CUDA only.
#pragma once

#include <cstdint>

#include "kernels/nn/network.h"

struct CUstream_st;

namespace dlb::nn {

// Direct convolution with the epilogue fused: y = relu?(conv(x, w) + bias
// (+ residual)). w [k, c, r, r] (batch-norm folded), bias [k], residual as y
// or nullptr.
void launch_conv_direct_fused(const Layer& l, std::int64_t batch, const float* x, const float* w, const float* bias,
                              const float* residual, float* y, CUstream_st* stream);
// y[n][k] = relu?(sum_i x[n][i] * w[k][i] + bias[k]).
void launch_fc(const Layer& l, std::int64_t batch, const float* x, const float* w, const float* bias, float* y,
               CUstream_st* stream);
// y[n][k] = relu?(y[n][k] + bias[k]): the epilogue of a cuBLAS fc.
void launch_bias_relu_rows(std::int64_t rows, std::int64_t cols, const float* bias, bool relu, float* y,
                           CUstream_st* stream);
void launch_max_pool(const Layer& l, std::int64_t batch, const float* x, float* y, CUstream_st* stream);
void launch_global_avg_pool(const Layer& l, std::int64_t batch, const float* x, float* y, CUstream_st* stream);

}  // namespace dlb::nn
