#include "kernels/nn/gpu/cudnn_plan_cache.h"

namespace dlb::nn {

// A field added to a tensor or an op of the plan must be added to the key
// below (and to CudnnPlanCache.TheKeyHoldsEverythingThePlanDependsOn).
static_assert(sizeof(FusedTensor) == 80, "FusedTensor changed: is every field in fused_plan_key?");
static_assert(sizeof(FusedOp) == 32, "FusedOp changed: is every field in fused_plan_key?");

std::string fused_plan_key(int device, const std::string& io_type, const FusedConvPlan& plan) {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + std::string.
  std::string k;
  const auto add = [&k](const char* tag, std::int64_t v) { k.append(tag).append(std::to_string(v)); };
  add("device", device);
  k.append(" ").append(io_type);
  k.append(plan.fused ? " fused" : " alone");
  add(" pad", plan.pad);
  add(" stride", plan.stride);
  for (const FusedTensor* t : plan.tensors()) {
    add(" | t", t->uid);
    for (const auto d : t->dims) add(" d", d);
    for (const auto s : t->strides) add(" s", s);
    k.append(t->is_virtual ? " virtual" : " memory").append(t->fp32 ? " fp32" : " io");
  }
  for (const FusedOp& op : plan.ops) {
    k.append(" | ").append(fused_op_name(op.kind));
    add(" ", op.a);
    add(" ", op.b);
    add(" -> ", op.out);
  }
  return k;
}

}  // namespace dlb::nn
