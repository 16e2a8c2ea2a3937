// softmax through oneDNN's softmax_v2 primitive over axis 1 of a [rows, cols]
// plain (ab) f32 tensor: softmax_accurate or softmax_log. The primitive and
// the memory objects are made once, outside the timed region; oneDNN runs it
// on all cores (OpenMP), parallel over rows.
#include <oneapi/dnnl/dnnl.hpp>

#include <unordered_map>

#include "kernels/common/onednn.h"
#include "kernels/softmax/softmax.h"

namespace dlb {

template <SoftmaxKind K>
Run prepare_softmax_onednn(const SoftmaxArgs& args, const Exec&) {
  using dnnl::memory;
  const memory::desc md({args.rows, args.cols}, memory::data_type::f32, memory::format_tag::ab);
  constexpr auto algorithm =
      K == SoftmaxKind::softmax ? dnnl::algorithm::softmax_accurate : dnnl::algorithm::softmax_log;
  const dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, md, md, 1);
  const dnnl::softmax_v2_forward primitive(dnnl::softmax_v2_forward::primitive_desc(desc, onednn_engine()));
  // The memory objects wrap the caller's buffers; oneDNN only reads src.
  const std::unordered_map<int, memory> buffers{
      {DNNL_ARG_SRC, memory(md, onednn_engine(), const_cast<float*>(args.x))},
      {DNNL_ARG_DST, memory(md, onednn_engine(), args.y)}};
  return [primitive, buffers] {
    primitive.execute(onednn_stream(), buffers);
    onednn_stream().wait();
  };
}

template Run prepare_softmax_onednn<SoftmaxKind::softmax>(const SoftmaxArgs&, const Exec&);
template Run prepare_softmax_onednn<SoftmaxKind::log_softmax>(const SoftmaxArgs&, const Exec&);

}  // namespace dlb
