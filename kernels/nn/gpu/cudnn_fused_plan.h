// The descriptor plan of gpu_cudnn_fused and gpu_cudnn_fused_f16: for each
// conv of a network, the cuDNN graph-API operation graph it is run as, as
// plain data (no cuDNN types), so that the CPU tests can check it against
// the network's layers. nn_gpu_cudnn_16bit.cpp turns a plan into backend
// descriptors one for one: each FusedTensor a CUDNN_BACKEND_TENSOR_DESCRIPTOR
// (dims, strides, uid, virtual flag), each FusedOp an operation (the conv a
// CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, the others
// CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTORs), all of them one
// CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR.
//
// A fused layer's graph: t0 = conv(x, w); t1 = t0 + bias (1 x K x 1 x 1,
// broadcast); [t2 = t1 + residual]; [y = relu(...)]: every intermediate
// virtual (never in memory), the last op's output y. An unfused layer (where
// no engine finalises the fused graph, nn_gpu_cudnn_16bit.cpp's fallback)
// is the conv alone, y = conv(x, w), and the epilogue runs after it as an
// own kernel. Internal to kernels/nn; builds without CUDA.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/nn/model/network.h"

namespace dlb::nn {

// A tensor of a layer's graph: dims in cuDNN's order (N, C, H, W; a filter
// K, C, R, S) and strides of an NHWC (filter: KRSC) buffer.
struct FusedTensor {
  std::int64_t uid = 0;
  std::array<std::int64_t, 4> dims{};
  std::array<std::int64_t, 4> strides{};
  bool is_virtual = false;
  bool fp32 = false;  // always fp32 (the bias, the intermediates), whatever the row's activations
};

// The uids of a graph's memory tensors (the variant pack's), and the first
// intermediate's (the others follow it).
inline constexpr std::int64_t kUidX = 1, kUidW = 2, kUidBias = 3, kUidResidual = 4, kUidY = 5,
                              kUidFirstVirtual = 100;

enum class FusedOpKind { conv, add, relu };
const char* fused_op_name(FusedOpKind kind);

// One operation: out = kind(a, b) (b: the second operand of add and the
// conv's filter; 0 for relu).
struct FusedOp {
  FusedOpKind kind = FusedOpKind::conv;
  std::int64_t a = 0, b = 0, out = 0;
};

struct FusedConvPlan {
  std::size_t layer = 0;  // index in Network::layers
  bool fused = true;      // bias, residual and ReLU in the graph (false: the conv alone)
  std::int64_t pad = 0, stride = 1;
  FusedTensor x, w, bias, residual, y;  // bias and residual: uid 0 where the graph lacks them
  std::vector<FusedTensor> intermediates;
  std::vector<FusedOp> ops;  // in order; the last one writes y
  // Every tensor of the graph: x, w, [bias], [residual], the intermediates, y.
  std::vector<const FusedTensor*> tensors() const;
  // What identifies the graph up to its buffers: layers with equal keys
  // share an engine choice. "n64 c16 16x16 k16 r3 s1 p1 conv+add+add+relu"
  std::string key() const;
};

// The plan of conv layer `layer` of `net` at batch n, fused or the conv alone.
FusedConvPlan fused_conv_plan(const Network& net, std::size_t layer, std::int64_t n, bool fused);

}  // namespace dlb::nn
