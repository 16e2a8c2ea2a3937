// Networks as a benchmark family: one row per backend, each running a whole
// forward pass of a network (kernels/nn/network.h) on a fixed batch. A
// backend reuses the op kernels (the conv family's own kernels, oneDNN
// primitives, Eigen); what is its own is how the layers are chained: the
// layouts kept between layers, the fused epilogues, the buffers allocated
// once in prepare.
//
// Backends (the table in nn.cpp):
//   cpu_own     own kernels: per conv layer the faster of the conv family's own cpu_direct and
//               cpu_winograd (3x3 stride 1 only), timed once in prepare; folded batch-norm bias,
//               residual add and ReLU in one pass over the conv's output while it is in cache;
//               own max/avg pools; own fc (weights packed [in][out] in prepare, 4 rows x 32
//               outputs in registers); log-softmax by the softmax family's cpu_fused. NCHW
//               throughout, OpenMP on all cores
//   cpu_onednn  oneDNN primitives as a framework chains them: every layer created with
//               format_tag::any, its blocked layout (nChw16c...) kept from layer to layer, reorders
//               only at the input and the output; conv with bias, the residual add as a sum post-op
//               into the shortcut's buffer (in place) and ReLU as an eltwise post-op; fc as
//               inner_product with ReLU post-op; pooling, softmax_v2 (log)
//   cpu_eigen   the plain-library baseline: conv as the conv family's cpu_im2col (own im2col, Eigen
//               GEMM), the epilogue, fc (X W^T + b) and log-softmax as Eigen expressions on
//               row-major maps; pools as plain loops
// Batch-norm is folded into the conv at load time for every backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/variant.h"
#include "kernels/nn/network.h"

namespace dlb::nn {

// What prepare found out: the implementation (per-layer choices, oneDNN's
// kernels) for the benchmark label, and one call per layer (in the order of
// Network::layers, each running that layer alone on the prepared buffers),
// whose sequence is the whole pass, for per-layer timing.
struct NetReport {
  std::string implementation;
  std::vector<Run> layer_calls;
};

struct NetArgs {
  const Network* net = nullptr;
  std::int64_t batch = 1;
  const float* x = nullptr;   // [batch, c, h, w], the network input (network_input)
  float* y = nullptr;         // [batch, classes], every element written
  NetReport* report = nullptr;  // may be null
};

using NetVariant = Variant<NetArgs>;
VariantTable<NetArgs> network_variants();

Run prepare_net_cpu_own(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_onednn(const NetArgs& args, const Exec& exec);
Run prepare_net_cpu_eigen(const NetArgs& args, const Exec& exec);

// The whole pass as the sequence of the layer calls; reports them.
Run run_layers(std::vector<Run> layer_calls, NetReport* report);

}  // namespace dlb::nn
