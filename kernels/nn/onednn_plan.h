// What the oneDNN network backends (cpu_onednn, cpu_onednn_bf16,
// cpu_onednn_s8) share: a layer as a list of primitive executions, and the
// helpers that make its memories. Internal to kernels/nn; include only from
// code built with oneDNN.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/common/onednn.h"

namespace dlb::nn {

struct Step {
  dnnl::primitive primitive;
  std::unordered_map<int, dnnl::memory> args;
};

// One layer's work: an optional reorder before (the network input), the
// primitive, an optional reorder after (the network output).
struct LayerPlan {
  std::optional<Step> before, after;
  Step main;
  void run() {
    auto& stream = onednn_stream();
    if (before) before->primitive.execute(stream, before->args);
    main.primitive.execute(stream, main.args);
    if (after) after->primitive.execute(stream, after->args);
    stream.wait();
  }
};

inline dnnl::memory owned_copy(const dnnl::memory::desc& desc, const std::vector<float>& values) {
  dnnl::memory m(desc, onednn_engine());
  std::memcpy(m.get_data_handle(), values.data(), values.size() * sizeof(float));
  return m;
}

// `values` in the user's plain layout `user`, reordered once into `want`.
inline dnnl::memory weights_in(const dnnl::memory::desc& want, const dnnl::memory::desc& user,
                               const std::vector<float>& values) {
  dnnl::memory plain = owned_copy(user, values);
  if (want == user) return plain;
  dnnl::memory out(want, onednn_engine());
  dnnl::reorder(plain, out).execute(onednn_stream(), plain, out);
  onednn_stream().wait();
  return out;
}

inline dnnl::primitive_attr relu_attr(bool sum, bool relu) {
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.0f);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  return attr;
}

// make(from): a primitive descriptor taking its input in layout `from`.
// Made for `fixed` (the layout the layer before left); where oneDNN has only
// its reference implementation for that layout (a layout its fast kernels do
// not take, left by a Winograd layer), made again for the layout it prefers
// (format_tag::any), and the caller reorders into it.
template <class Make>
auto not_reference(Make make, const dnnl::memory::desc& fixed) {
  auto pd = make(fixed);
  if (std::string_view(pd.impl_info_str()).substr(0, 3) == "ref") {
    auto other = make(dnnl::memory::desc(fixed.dims(), fixed.data_type(), dnnl::memory::format_tag::any));
    if (std::string_view(other.impl_info_str()).substr(0, 3) != "ref") return other;
  }
  return pd;
}

}  // namespace dlb::nn
