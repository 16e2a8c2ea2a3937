// The network layers as own CUDA kernels, for the GPU backends (gpu_own uses
// the fp32 ones, NCHW; gpu_cudnn the fc epilogue; its 16-bit rows the 16-bit
// ones; gpu_own_s8 and gpu_own_mma_s8 the s8 ones).
// Every launcher only enqueues on `stream`. Internal to kernels/nn; built with CUDA only.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/nn/gpu/cudnn_fused_plan.h"
#include "kernels/nn/model/network.h"
#include "kernels/nn/s8/s8_direct_math.h"
#include "kernels/nn/s8/s8_mma_math.h"

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

// The NHWC activations of gpu_cudnn_f16 / _bf16 / _mixed_f16 and
// gpu_cudnn_fused_f16 (fp16 or bf16 values, 2 bytes each) and of
// gpu_cudnn_fused (f32, 4 bytes); arithmetic in fp32, rounded to nearest
// even on store (a plain store for f32). The launchers below named "16"
// take all three.
enum class NhwcType { f16, bf16, f32 };
// x fp32 NCHW [n, c, plane] -> y NHWC [n, plane, c].
void launch_to_nhwc16(NhwcType type, const float* x, std::int64_t n, std::int64_t c, std::int64_t plane, void* y,
                      CUstream_st* stream);
// y NHWC [n, plane, k] = relu?(acc + bias[channel] (+ residual)), where acc
// is y itself (in place: a conv's raw output) or, if acc_nchw is not null,
// that fp32 NCHW tensor [n, k, plane]. residual: NHWC like y, or null.
void launch_epilogue16(NhwcType type, std::int64_t n, std::int64_t k, std::int64_t plane, const float* acc_nchw,
                       const float* bias, const void* residual, bool relu, void* y, CUstream_st* stream);
void launch_max_pool_nhwc16(NhwcType type, const Layer& l, std::int64_t batch, const void* x, void* y,
                            CUstream_st* stream);
// Global average pool, NHWC [n, plane, c] -> [n, c], summed in fp32.
void launch_global_avg_pool_nhwc16(NhwcType type, const Layer& l, std::int64_t batch, const void* x, void* y,
                                   CUstream_st* stream);

// gpu_cudnn_fused's graph (nn_gpu_cudnn_16bit.cpp) as far as it goes
// without a device: the plan's tensor, convolution, pointwise and operation
// descriptors made and finalised with `type`'s data; "" when all finalise,
// else the first that did not. Built with cuDNN only.
std::string fused_graph_parts_check(const FusedConvPlan& plan, NhwcType type);

// The fp32 math of gpu_cudnn's rows (nn_gpu_cudnn.cpp): strict (gpu_cudnn,
// gpu_cudnn_graph, gpu_hybrid_first_conv) or TF32 permitted
// (gpu_cudnn_graph_tf32).
enum class Fp32Math { strict, tf32 };
// What such a row asks the libraries for, without a device: the math type
// read back from the convolution descriptor its conv layer `l` gets at batch
// n ("CUDNN_FMA_MATH", "CUDNN_TENSOR_OP_MATH"), and the math mode its cuBLAS
// handle is given ("CUBLAS_PEDANTIC_MATH", "CUBLAS_TF32_TENSOR_OP_MATH").
// Built with cuDNN only.
std::string cudnn_row_conv_math(const Layer& l, std::int64_t n, Fp32Math math);
std::string cudnn_row_blas_math(Fp32Math math);

// The fused rows' process-wide plan cache (cudnn_plan_cache.h): lookups that
// reused a plan, and plans built. Built with cuDNN only.
struct PlanCacheCounts {
  std::size_t hits = 0, misses = 0;
};
PlanCacheCounts fused_plan_cache_counts();

// gpu_own_s8's kernels: one thread per element of s8_direct_math.h's
// element functions.
void launch_s8_quantize(const s8::Quantize& p, CUstream_st* stream);
void launch_s8_conv(const s8::Conv& p, CUstream_st* stream);
void launch_s8_patches(const s8::Patches& p, CUstream_st* stream);
void launch_s8_requantize(const s8::Requantize& p, CUstream_st* stream);
void launch_s8_max_pool(const s8::MaxPool& p, CUstream_st* stream);
void launch_s8_avg_pool(const s8::AvgPool& p, CUstream_st* stream);
// gpu_own_mma_s8's conv (s8_mma_math.h): a warp per kMmaRows rows and p.nt
// n-tiles, kMmaWarps warps a block; needs sm_80 or later.
void launch_s8_mma_conv(const s8::MmaConv& p, CUstream_st* stream);

}  // namespace dlb::nn
