// Networks as a benchmark family: one row per backend, each running a whole
// forward pass of a network (kernels/nn/model/network.h) on a fixed batch. A
// backend reuses the op kernels (the conv family's own kernels, oneDNN
// primitives, Eigen); what is its own is how the layers are chained: the
// layouts kept between layers, the fused epilogues, the buffers allocated
// once in prepare.
//
// Backends (the table in nn.cpp):
//   cpu_own     own kernels: per conv layer the faster of the conv family's own cpu_direct and
//               cpu_winograd (3x3 stride 1 only), timed once in prepare; folded batch-norm bias,
//               residual add and ReLU in one pass over the conv's output (after the conv, not in
//               its kernel);
//               own max/avg pools; own fc (weights packed [in][out] in prepare, 4 rows x 32
//               outputs in registers); log-softmax by the softmax family's cpu_fused. NCHW
//               throughout, OpenMP on all cores
//   cpu_onednn  oneDNN primitives as a framework chains them: every layer created with
//               format_tag::any, its layout (nhwc, nChw16c...) kept from layer to layer, reorders
//               only at the input and the output and where a layer's fast kernels want another
//               layout; conv with bias, the residual add as a sum post-op into the shortcut's
//               buffer (in place) and ReLU as an eltwise post-op; per 3x3 stride-1 conv without
//               the residual sum, oneDNN's Winograd where it is faster (timed in prepare); fc as
//               inner_product with ReLU post-op; pooling, softmax_v2 (log)
//   cpu_onednn_ownwino  cpu_onednn's chain with oneDNN's layouts (nhwc on this kind of CPU), and
//               per 3x3 stride-1 conv past the first with channels in multiples of 16 the conv
//               family's own cpu_winograd_nhwc (F(4x4, 3x3)) with bias, residual sum and ReLU fused
//               into its output transform, where it ran the layer faster than oneDNN's
//               convolution_auto (timed in prepare); the first conv, on the NCHW input, by the
//               own few-channel direct kernel into NHWC (conv_few_channels_nhwc.h) where that
//               timed faster than oneDNN's with its input's reorder: what a framework gains by
//               taking own kernels into oneDNN's pipeline
//   cpu_onednn_bf16  cpu_onednn's chain in bf16 (activations and weights; fp32 accumulation
//               inside oneDNN's kernels, fp32 biases, the network's input rounded by the first
//               reorder, fp32 logits and log-softmax): AVX512-BF16 or AMX where present
//   cpu_onednn_mixed_bf16  the same as autocast mixes it: the first conv, log-softmax and the
//               logits it reads in fp32, every other layer in bf16
//   int8 rows   post-training quantization from the committed calibration (calibration.h):
//               u8 activations per tensor, s8 weights per output channel, fp32 only for the
//               last layer and log-softmax:
//     cpu_own_s8      own AVX-512 VNNI GEMM per conv/fc, patches gathered inside it, bias,
//                     residual, ReLU and requantization fused into its register tiles, NHWC
//                     (nn_cpu_own_s8.cpp); where the CPU has AVX-512 VNNI
//     cpu_own_pertensor_s8  the same with one weight scale per layer
//     cpu_onednn_s8   oneDNN's int8 convolution/inner product, the same quantization
//     cpu_fakequant_s8  the quantization tutorial's simulation: cpu_own's fp32 layers on
//                     int8-rounded weights and activations
//   cpu_eigen   the plain-library baseline: conv as the conv family's cpu_im2col (own im2col, Eigen
//               GEMM), the epilogue, fc (X W^T + b) and log-softmax as Eigen expressions on
//               row-major maps; pools as plain loops
//   gpu_cudnn   cuDNN and cuBLAS, everything made once in prepare: per conv the algorithm of
//               cudnnFindConvolutionForwardAlgorithm (strict fp32, CUDNN_FMA_MATH) and its
//               workspace; conv + bias + residual + ReLU as one cudnnConvolutionBiasActivationForward;
//               fc as cublasSgemm (pedantic fp32) and an own bias/ReLU kernel; cuDNN pooling and
//               log-softmax; NCHW, activations allocated once
//   gpu_cudnn_graph  the same calls captured once into a CUDA graph; the timed call is one
//               cudaGraphLaunch: what removing the per-layer launch overhead buys at small batches
//   gpu_cudnn_graph_tf32  gpu_cudnn_graph with TF32 permitted, as PyTorch ships its convolutions:
//               CUDNN_TENSOR_OP_MATH on every conv descriptor (fp32 data, TF32 tensor cores on sm_80
//               and later), the algorithm search with tensor-op entries allowed, the fc's
//               cublasSgemm with CUBLAS_TF32_TENSOR_OP_MATH; held to the TF32 bound (nn.cpp)
//   gpu_hybrid_first_conv  the ResNet20 lab report's experiment: the first conv of every residual
//               block on the GPU (gpu_cudnn's fused conv), every other layer on the CPU (cpu_own's),
//               the activations copied from pageable host memory to the device and back around each
//               of those convs; residual networks only
//   gpu_cudnn_f16, gpu_cudnn_bf16  the network in fp16 / bf16 on tensor cores with fp32 accumulation
//               (nn_gpu_cudnn_16bit.cpp): NHWC activations, cudnnConvolutionForward with the
//               algorithm of cudnnFindConvolutionForwardAlgorithm (tensor-op math allowed) and an
//               own epilogue (bias, residual, ReLU in fp32), fc as cublasGemmEx, own NHWC pools,
//               fp32 logits and log-softmax
//   gpu_cudnn_mixed_f16  the same as autocast mixes it: the first conv in fp32 (strict, NCHW)
//   gpu_cudnn_fused, gpu_cudnn_fused_f16  gpu_cudnn_f16's chain (NHWC, own pools, fc on cuBLAS,
//               log-softmax) in fp32 (strict: cuBLAS pedantic, no TF32 engine) / in fp16 with each
//               conv one operation graph of cuDNN's graph API (cudnn_fused_plan.h): conv, bias,
//               residual and ReLU fused at run time (virtual intermediates), the engine chosen from
//               cuDNN's heuristics by timing the plans that finalise, a layer no engine fuses run as
//               the conv alone and the own epilogue (counters fused_layers, layers); the pass
//               captured once into a CUDA graph
//   gpu_own     own CUDA kernels: direct convolution with bias, residual and ReLU fused (one thread
//               per output), own fc (a warp per output), pools, the softmax family's gpu_fused
//   gpu_onekernel  the whole pass as one persistent cooperative launch (nn_onekernel.h): a program
//               of per-layer descriptors built in prepare, every weight in one device buffer,
//               every activation in one arena (L2-resident at small batches), each layer in tiles
//               a block computes from shared memory, several outputs a thread,
//               grid.sync() before each layer that reads an output of the current phase;
//               no host work per layer; any batch, built for batches up to 16. Its tile steps
//               run on the host too (prepare_onekernel_on_host), which is what the CPU tests check.
//               The kernel stamps %globaltimer after each barrier (counters layer_us.*, barriers,
//               stamped_us, stamp_overhead_us: nn_onekernel.h)
//   gpu_own_s8  the int8 rows' quantization on own CUDA kernels (nn_s8_direct.h): per conv and fc a
//               direct u8 x s8 convolution on dp4a (one thread per output, NHWC u8, channels in
//               words of 4) with bias, residual, ReLU and requantization fused; pools on the codes;
//               fp32 from the last layer on, gpu_fused log-softmax. Its element functions run on the
//               host too (prepare_s8_direct_on_host), which is what the CPU tests check
//   gpu_own_mma_s8  gpu_own_s8 with every conv and fc as an own implicit GEMM on the int8 tensor
//               cores (s8_mma_math.h: mma.sync m16n8k32 u8 x s8 -> s32, a warp per 32 output
//               pixels x up to 64 channels, weights packed in fragment order at prepare time), the
//               same epilogue, so the same codes bit for bit; needs sm_80 or later. Its lane
//               functions run on the host too, 32 lanes a warp with the mma modelled from their
//               registers (prepare_s8_mma_on_host), which is what the CPU tests check
//   gpu_cublaslt_s8  the same quantization on the library: per conv and fc with outputs in
//               multiples of 4 an own patch kernel (s8), cuBLASLt's int8 GEMM (the gemm family's
//               gpu_cublaslt_s8) and an own requantizing epilogue; the other layers as gpu_own_s8.
//               Its host twin (prepare_s8_direct_on_host(args, true)) is in the CPU tests too
// Batch-norm is folded into the conv at load time for every backend. GPU
// rows take x and y in device memory; none of them has run on a GPU yet.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/common/precision.h"
#include "kernels/common/variant.h"
#include "kernels/nn/model/network.h"

namespace dlb::nn {

// What prepare found out: the implementation (per-layer choices, oneDNN's
// kernels) for the benchmark label, and one call per layer (in the order of
// Network::layers, each running that layer alone on the prepared buffers),
// whose sequence is the whole pass: what per-layer timing (issue 13) is to
// time. A layer that accumulates into its shortcut's buffer in place
// (cpu_onednn's residual convs) does the same work when called again
// alone, on the values its last call left.
struct NetReport {
  std::string implementation;
  std::vector<Run> layer_calls;
  // A GPU pass that waits for its stream itself (host work between GPU
  // calls): timed without the stream hold.
  bool synchronizes = false;
  // Counts prepare found that the case reports as counters (gpu_cudnn_fused:
  // fused_layers, layers).
  std::vector<std::pair<std::string, double>> counters;
  // Counters only a run can give (gpu_onekernel's per-layer stamps), asked
  // once after the timed loop: it may run passes of its own (outside the
  // timing) and waits for them. Empty: none.
  std::function<std::vector<std::pair<std::string, double>>()> measured_counters;
};

struct NetArgs {
  const Network* net = nullptr;  // outlives the prepared call
  std::int64_t batch = 1;
  const float* x = nullptr;   // [batch, c, h, w], the network input (network_input)
  float* y = nullptr;         // [batch, classes], every element written
  NetReport* report = nullptr;  // may be null
};

// What a row computes in: its activations' format (the row's precision
// field; its name ends in the same word, "cpu_onednn_bf16", "cpu_own_s8",
// unless it is fp32). tf32: fp32 activations, products of inputs rounded to
// TF32 on tensor cores (gpu_cudnn_graph_tf32). The gemm table's formats
// (precision.h), named by precision_name.
using NetPrecision = Precision;

}  // namespace dlb::nn

template <>
struct dlb::VariantPrecision<dlb::nn::NetArgs> {
  using type = dlb::nn::NetPrecision;
};

namespace dlb::nn {

using NetVariant = Variant<NetArgs>;

// Tolerance: relative max-norm error of the outputs (logits; for the MNIST
// networks log-probabilities) against PyTorch's fp32 outputs of the same
// weights over the 256 reference images. Both sides are fp32 through up to
// 23 layers (reductions of up to 9216 products) in different orders, batch-
// norm folded on our side and not on PyTorch's. Measured on this kind of
// machine (AVX-512): at most 5.6e-7 for every CPU backend and network;
// docs/architecture.md's fp32 bound of 1e-5 holds with a margin of over 10x, and a
// wrong layer moves the outputs by 1e-2 or more. The GPU rows are strict fp32
// too (CUDNN_FMA_MATH, CUBLAS_PEDANTIC_MATH), held to the same bound
// (unmeasured on hardware).
inline constexpr double kNetworkTolerance = 1e-5;
VariantTable<NetArgs> network_variants();

Run prepare_net_cpu_own(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_onednn(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_onednn_ownwino(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_onednn_bf16(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_onednn_mixed_bf16(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_onednn_s8(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_own_s8(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_own_pertensor_s8(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_fakequant_s8(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_eigen(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn_graph(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn_graph_tf32(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_own(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_onekernel(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_own_s8(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_own_mma_s8(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cublaslt_s8(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_hybrid_first_conv(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn_f16(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn_bf16(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn_mixed_f16(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn_fused(const NetArgs& args, const Exec& exec);
Run prepare_net_gpu_cudnn_fused_f16(const NetArgs& args, const Exec& exec);
// Networks with residual blocks (stage*.conv1 layers): what gpu_hybrid_first_conv accepts.
bool has_residual_blocks(const NetArgs& args);

// The whole pass as the sequence of the layer calls; reports them.
Run run_layers(std::vector<Run> layer_calls, NetReport* report);

}  // namespace dlb::nn
