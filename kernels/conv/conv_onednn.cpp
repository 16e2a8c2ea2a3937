// The oneDNN convolutions: convolution_direct, convolution_winograd and
// convolution_auto (oneDNN picks). Each primitive is created with
// format_tag::any for source, weights and destination, so oneDNN picks the
// layouts its kernels want (nChw16c and blocked weights for its AVX-512
// kernels). The caller's tensors are NCHW / OIHW, so a call is what a user
// holding NCHW data pays: reorder x into oneDNN's layout, convolve, reorder
// the result back into NCHW y, all inside the timed call. Only the weights
// are reordered once, in prepare (frameworks do that once per model).
//
// cpu_onednn_auto_blocked is what a framework that keeps activations in
// oneDNN's layout between layers pays: x is reordered once in prepare (as
// if the previous layer had left it blocked) and the timed call is the
// convolution alone, its output left blocked (ConvReport::timed_call); the
// validated call converts that output into NCHW y, to be checked.
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>
#include <string>

#include "kernels/common/error.h"
#include "kernels/common/onednn.h"
#include "kernels/conv/conv.h"

namespace dlb {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct OnednnConv {
  dnnl::convolution_forward conv;
  memory user_src, user_dst, src, weights, dst;
  std::optional<dnnl::reorder> src_reorder, dst_reorder;

  // The user's call: NCHW x in, NCHW y out.
  void run() {
    auto& stream = onednn_stream();
    if (src_reorder) src_reorder->execute(stream, user_src, src);
    convolve();
    if (dst_reorder) dst_reorder->execute(stream, dst, user_dst);
    stream.wait();
  }
  // The convolution alone, oneDNN's layouts in and out.
  void convolve() {
    conv.execute(onednn_stream(), {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}});
    onednn_stream().wait();
  }
};

const char* status_name(dnnl_status_t status) {
  switch (status) {
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_out_of_memory: return "out of memory";
    default: return "error";
  }
}

// The prepared convolution; `blocked`: x reordered here, once, and the
// convolution alone reported as the call to time.
Run prepare_onednn(const ConvArgs& args, dnnl::algorithm algorithm, const char* algorithm_name, bool blocked = false) {
  validate_conv_shape(args.shape);
  const ConvShape& p = args.shape;
  auto& engine = onednn_engine();
  const memory::dims src_dims{p.n, p.c, p.h, p.w}, weights_dims{p.k, p.c, p.r, p.s},
      dst_dims{p.n, p.k, p.oh(), p.ow()}, strides{p.stride, p.stride}, padding{p.pad, p.pad};
  const auto f32 = memory::data_type::f32;

  dnnl::convolution_forward::primitive_desc pd;
  try {
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm,
                                               memory::desc(src_dims, f32, tag::any),
                                               memory::desc(weights_dims, f32, tag::any),
                                               memory::desc(dst_dims, f32, tag::any), strides, padding, padding);
    pd = dnnl::convolution_forward::primitive_desc(desc, engine);
  } catch (const dnnl::error& e) {
    throw Unsupported(std::string("oneDNN ") + algorithm_name + ": " + status_name(e.status) + " for this shape (" +
                      e.what() + ")");
  }

  auto c = std::make_shared<OnednnConv>();
  c->conv = dnnl::convolution_forward(pd);
  // oneDNN reads src and weights through these handles and never writes them.
  c->user_src = memory({src_dims, f32, tag::nchw}, engine, const_cast<float*>(args.x));
  c->user_dst = memory({dst_dims, f32, tag::nchw}, engine, args.y);
  memory user_weights({weights_dims, f32, tag::oihw}, engine, const_cast<float*>(args.w));

  c->src = c->user_src;
  if (pd.src_desc() != c->user_src.get_desc()) {
    c->src = memory(pd.src_desc(), engine);
    c->src_reorder = dnnl::reorder(c->user_src, c->src);
  }
  c->dst = c->user_dst;
  if (pd.dst_desc() != c->user_dst.get_desc()) {
    c->dst = memory(pd.dst_desc(), engine);
    c->dst_reorder = dnnl::reorder(c->dst, c->user_dst);
  }
  c->weights = user_weights;
  if (pd.weights_desc() != user_weights.get_desc()) {
    c->weights = memory(pd.weights_desc(), engine);
    dnnl::reorder(user_weights, c->weights).execute(onednn_stream(), user_weights, c->weights);
    onednn_stream().wait();
  }

  if (blocked) {
    if (c->src_reorder) {
      c->src_reorder->execute(onednn_stream(), c->user_src, c->src);
      onednn_stream().wait();
      c->src_reorder.reset();
    }
    DLB_REQUIRE(args.report != nullptr, "cpu_onednn_auto_blocked reports the call to time through ConvArgs::report");
    args.report->timed_call = [c] { c->convolve(); };
    args.report->implementation = std::string(pd.impl_info_str()) + ", oneDNN layouts, no reorders timed";
    return [c] { c->run(); };
  }
  if (args.report != nullptr) {
    args.report->implementation = pd.impl_info_str();
    if (c->src_reorder || c->dst_reorder) args.report->implementation += ", NCHW reorders in the call";
  }
  return [c] { c->run(); };
}

}  // namespace

Run prepare_conv_onednn_direct(const ConvArgs& args, const Exec&) {
  return prepare_onednn(args, dnnl::algorithm::convolution_direct, "convolution_direct");
}
Run prepare_conv_onednn_winograd(const ConvArgs& args, const Exec&) {
  return prepare_onednn(args, dnnl::algorithm::convolution_winograd, "convolution_winograd");
}
Run prepare_conv_onednn_auto(const ConvArgs& args, const Exec&) {
  return prepare_onednn(args, dnnl::algorithm::convolution_auto, "convolution_auto");
}
Run prepare_conv_onednn_auto_blocked(const ConvArgs& args, const Exec&) {
  return prepare_onednn(args, dnnl::algorithm::convolution_auto, "convolution_auto", true);
}

}  // namespace dlb
