// GEMM through oneDNN's matmul primitive (2.x API): fp32, bf16, and u8 x s8
// with the dequantization fused as a per-column output scale. A and C are the
// caller's row-major buffers; B is reordered in prepare into the layout
// oneDNN picks for this problem (format_tag::any), as a framework packs its
// weights once. The timed call is execute() and wait().
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/common/onednn.h"
#include "kernels/gemm/gemm.h"

namespace dlb {
namespace {

using dnnl::memory;
using DataType = memory::data_type;
using Tag = memory::format_tag;

// What the timed call needs, alive as long as its Run.
struct MatmulCall {
  dnnl::matmul primitive;
  std::unordered_map<int, memory> arguments;
};

// oneDNN wraps the caller's buffers through non-const handles; it only reads
// the source and weights.
void* handle(const void* p) { return const_cast<void*>(p); }

Run prepare_matmul(const GemmArgs& args, DataType input_type, const void* a, DataType weight_type, const void* b,
                   const dnnl::primitive_attr& attr) {
  auto& engine = onednn_engine();
  auto& stream = onednn_stream();
  const memory::dims a_dims{args.m, args.k}, b_dims{args.k, args.n}, c_dims{args.m, args.n};
  const memory::desc a_md(a_dims, input_type, Tag::ab);
  const memory::desc c_md(c_dims, DataType::f32, Tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, memory::desc(b_dims, weight_type, Tag::any), c_md),
                                        attr, engine);
  if (args.implementation != nullptr) *args.implementation = pd.impl_info_str();

  memory b_user({b_dims, weight_type, Tag::ab}, engine, handle(b));
  memory b_packed(pd.weights_desc(), engine);
  dnnl::reorder(b_user, b_packed).execute(stream, b_user, b_packed);
  stream.wait();

  auto call = std::make_shared<MatmulCall>(MatmulCall{
      dnnl::matmul(pd),
      {{DNNL_ARG_SRC, memory(a_md, engine, handle(a))},
       {DNNL_ARG_WEIGHTS, b_packed},
       {DNNL_ARG_DST, memory(c_md, engine, args.c)}}});
  return [call] {
    call->primitive.execute(onednn_stream(), call->arguments);
    onednn_stream().wait();
  };
}

}  // namespace

Run prepare_gemm_onednn_f32(const GemmArgs& args, const Exec&) {
  return prepare_matmul(args, DataType::f32, args.a, DataType::f32, args.b, {});
}

Run prepare_gemm_onednn_bf16(const GemmArgs& args, const Exec&) {
  return prepare_matmul(args, DataType::bf16, args.a16, DataType::bf16, args.b16, {});
}

Run prepare_gemm_onednn_s8(const GemmArgs& args, const Exec&) {
  // C[i,j] = c_scale[j] * sum_p (A[i,p] - za) * B[p,j]: the zero point of the
  // u8 source and the scale per output column (mask bit 1 = dimension n).
  // Both are constants of the primitive (static quantization): given at run
  // time instead (DNNL_RUNTIME_*_VAL), oneDNN 2.6 leaves its brgemm/AMX kernel
  // for gemm:jit, 1.8 instead of 3.2 TOP/s at 2048^3 here.
  dnnl::primitive_attr attr;
  attr.set_output_scales(1 << 1, std::vector<float>(args.c_scale, args.c_scale + args.n));
  attr.set_zero_points(DNNL_ARG_SRC, 0, {args.a_zero_point});
  return prepare_matmul(args, DataType::u8, args.a_u8, DataType::s8, args.b_s8, attr);
}

}  // namespace dlb
