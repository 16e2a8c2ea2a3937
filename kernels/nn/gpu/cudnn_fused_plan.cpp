#include "kernels/nn/gpu/cudnn_fused_plan.h"

#include "kernels/common/error.h"

namespace dlb::nn {

const char* fused_op_name(FusedOpKind kind) {
  switch (kind) {
    case FusedOpKind::conv: return "conv";
    case FusedOpKind::add: return "add";
    case FusedOpKind::relu: return "relu";
  }
  return "?";
}

namespace {

// An n x c x h x w tensor stored NHWC (a filter k x c x r x s stored KRSC:
// the same strides with k in n's place).
FusedTensor nhwc(std::int64_t uid, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
  return FusedTensor{uid, {n, c, h, w}, {h * w * c, 1, w * c, c}, false, false};
}

}  // namespace

std::vector<const FusedTensor*> FusedConvPlan::tensors() const {
  std::vector<const FusedTensor*> all{&x, &w};
  if (bias.uid != 0) all.push_back(&bias);
  if (residual.uid != 0) all.push_back(&residual);
  for (const auto& t : intermediates) all.push_back(&t);
  all.push_back(&y);
  return all;
}

std::string FusedConvPlan::key() const {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + std::string.
  std::string k;
  for (const auto& [tag, v] : {std::pair{"n", x.dims[0]}, {" c", x.dims[1]}, {" ", x.dims[2]}, {"x", x.dims[3]},
                               {" k", y.dims[1]}, {" r", w.dims[2]}, {" s", std::int64_t{stride}},
                               {" p", std::int64_t{pad}}})
    k.append(tag).append(std::to_string(v));
  k.append(" ");
  for (std::size_t i = 0; i < ops.size(); ++i) k.append(i == 0 ? "" : "+").append(fused_op_name(ops[i].kind));
  return k;
}

FusedConvPlan fused_conv_plan(const Network& net, std::size_t layer, std::int64_t n, bool fused) {
  DLB_REQUIRE(layer < net.layers.size(), "fused_conv_plan: no layer " + std::to_string(layer));
  const Layer& l = net.layers[layer];
  DLB_REQUIRE(l.kind == LayerKind::conv, "fused_conv_plan: " + l.name + " is not a conv");
  DLB_REQUIRE(n > 0, "fused_conv_plan: batch " + std::to_string(n));
  FusedConvPlan p;
  p.layer = layer;
  p.fused = fused;
  p.pad = l.pad;
  p.stride = l.stride;
  p.x = nhwc(kUidX, n, l.c, l.h, l.w);
  p.w = nhwc(kUidW, l.k, l.c, l.window, l.window);
  p.y = nhwc(kUidY, n, l.k, l.oh, l.ow);
  if (!fused) {
    p.ops.push_back({FusedOpKind::conv, kUidX, kUidW, kUidY});
    return p;
  }
  p.bias = nhwc(kUidBias, 1, l.k, 1, 1);
  p.bias.fp32 = true;  // the folded biases stay fp32 in every row
  if (l.residual >= 0) p.residual = nhwc(kUidResidual, n, l.k, l.oh, l.ow);
  // The chain: conv, bias, [residual], [ReLU]; each op's output the next
  // one's input, virtual but for the last.
  std::vector<std::pair<FusedOpKind, std::int64_t>> chain{{FusedOpKind::conv, kUidW}, {FusedOpKind::add, kUidBias}};
  if (l.residual >= 0) chain.emplace_back(FusedOpKind::add, kUidResidual);
  if (l.relu) chain.emplace_back(FusedOpKind::relu, 0);
  std::int64_t in = kUidX;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    std::int64_t out = kUidY;
    if (i + 1 < chain.size()) {
      FusedTensor t = nhwc(kUidFirstVirtual + static_cast<std::int64_t>(i), n, l.k, l.oh, l.ow);
      t.is_virtual = true;
      t.fp32 = true;  // accumulation precision between the ops
      out = t.uid;
      p.intermediates.push_back(t);
    }
    p.ops.push_back({chain[i].first, in, chain[i].second, out});
    in = out;
  }
  return p;
}

}  // namespace dlb::nn
