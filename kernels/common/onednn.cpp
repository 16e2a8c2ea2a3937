#include "kernels/common/onednn.h"

#include "kernels/common/cpu_info.h"

namespace dlb {

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_stream() {
  static dnnl::stream stream(onednn_engine());
  return stream;
}

bool onednn_has_bf16() {
  static const bool has = [] {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    try {
      const dnnl::matmul::desc desc(dnnl::memory::desc({16, 16}, dt::bf16, tag::ab),
                                    dnnl::memory::desc({16, 16}, dt::bf16, tag::ab),
                                    dnnl::memory::desc({16, 16}, dt::f32, tag::ab));
      const dnnl::matmul::primitive_desc pd(desc, onednn_engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

bool onednn_int8_exact() { return cpu_has_avx512_vnni() || cpu_has_amx_int8(); }

}  // namespace dlb
