// cpu_onednn_s8: the network in int8 on oneDNN's primitives, quantized as
// cpu_own_s8 is (the same calibration, the same per-tensor u8 activations
// and per-channel s8 weights: only the kernels differ), chained as
// cpu_onednn chains fp32 (format_tag::any, layouts kept between layers).
//
// oneDNN 2.x's int8 convolution and inner product compute, per output
// channel k, dst = output_scale[k] * (sum (src - src_zero_point) * w + bias)
// then the post-ops, then round and saturate into dst's type (plus dst's
// zero point). So: output_scale[k] = s_in * s_w[k] / s_out (s_in * s_w[k]
// for the fp32 logits), the bias given in the accumulator's units (bias /
// (s_in * s_w[k]), fp32), the input's zero point as a run-time src zero point
// where it is not 0 (the network input), the output's as a dst zero point
// (the downsample convs, whose output is signed). The residual join is the
// sum post-op into the shortcut's buffer, in place, with scale
// s_shortcut / s_out and the shortcut's zero point, then ReLU. Max and
// average pooling run on the codes: their output keeps the input's
// quantization. The network input is quantized by the first reorder (scale
// 1 / s, the zero point as the reorder's dst zero point); the last conv/fc
// writes fp32, log-softmax runs in fp32.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "kernels/common/error.h"
#include "kernels/common/onednn.h"
#include "kernels/gemm/quant.h"
#include "kernels/nn/calibration.h"
#include "kernels/nn/layers.h"
#include "kernels/nn/onednn_plan.h"

namespace dlb::nn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// s8 weights in PyTorch's layout `user`, reordered once into `want`.
memory s8_weights(const memory::desc& want, const memory::desc& user, const std::vector<std::int8_t>& values) {
  memory plain(user, onednn_engine());
  std::memcpy(plain.get_data_handle(), values.data(), values.size());
  if (want == user) return plain;
  memory out(want, onednn_engine());
  dnnl::reorder(plain, out).execute(onednn_stream(), plain, out);
  onednn_stream().wait();
  return out;
}

memory zero_point_memory(std::int32_t zero_point) {
  memory m({{1}, dt::s32, tag::x}, onednn_engine());
  *static_cast<std::int32_t*>(m.get_data_handle()) = zero_point;
  return m;
}

}  // namespace

namespace {

Run prepare_s8(const NetArgs& args) {
  const Network& net = *args.net;
  const ActivationQuant quant = activation_quant(net, calibration(net.name));
  const std::int64_t n = args.batch;
  auto& engine = onednn_engine();
  const auto& layers = net.layers;
  const memory user_x({{n, net.c, net.h, net.w}, dt::f32, tag::nchw}, engine, const_cast<float*>(args.x));
  const memory user_y({{n, net.classes}, dt::f32, tag::nc}, engine, args.y);
  const AffineU8 input_q = quant.input;

  std::vector<memory> out(layers.size());
  std::vector<AffineU8> q(layers.size());
  auto plans = std::make_shared<std::vector<LayerPlan>>(layers.size());
  std::set<std::string> kernels;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    LayerPlan& plan = (*plans)[i];
    const bool first = l.input < 0;
    const bool logits = dequantized_output(net, i);
    const AffineU8 in_q = first ? input_q : q[static_cast<std::size_t>(l.input)];
    memory src = first ? user_x : out[static_cast<std::size_t>(l.input)];
    q[i] = quant.outputs[i];
    const bool spatial_out = l.kind != LayerKind::fc && l.kind != LayerKind::log_softmax;
    const memory::dims dst_dims = spatial_out ? memory::dims{n, l.k, l.oh, l.ow} : memory::dims{n, l.k};
    const memory::desc src_desc = first ? memory::desc(src.get_desc().dims(), dt::u8, tag::any) : src.get_desc();
    const memory::desc any_dst(dst_dims, logits ? dt::f32 : dt::u8, tag::any);
    // The input into the layout (and, for the network input, the u8 codes) the primitive takes.
    auto take_src = [&](const memory::desc& want) {
      if (want == src.get_desc()) return;
      memory converted(want, engine);
      dnnl::primitive_attr attr;
      if (first) {
        attr.set_output_scales(0, {1.0f / input_q.scale});
        attr.set_zero_points(DNNL_ARG_DST, 0, {input_q.zero_point});
      }
      plan.before = Step{dnnl::reorder(src, converted, attr), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, converted}}};
      src = converted;
    };

    switch (l.kind) {
      case LayerKind::conv:
      case LayerKind::fc: {
        const bool conv = l.kind == LayerKind::conv;
        const S8Weights w = quantize_weights(l);
        const float out_scale = logits ? 1.0f : q[i].scale;
        std::vector<float> scales(w.scales.size()), bias(w.scales.size());
        for (std::size_t k = 0; k < scales.size(); ++k) {
          scales[k] = in_q.scale * w.scales[k] / out_scale;
          bias[k] = l.bias[k] / (in_q.scale * w.scales[k]);
        }
        dnnl::primitive_attr attr;
        attr.set_output_scales(1 << 1, scales);  // per output channel: dim 1 of dst
        if (in_q.zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
        dnnl::post_ops ops;
        memory::desc dst_desc = any_dst;
        std::optional<memory> dst;
        if (l.residual >= 0) {
          // In place into the shortcut's buffer, as cpu_onednn does.
          require_shortcut_unread(net, i, "cpu_onednn_s8");
          const auto r = static_cast<std::size_t>(l.residual);
          DLB_REQUIRE(!logits && q[i].zero_point == 0,
                      "cpu_onednn_s8: " + l.name + " adds into a shortcut but its output range is not >= 0");
          dst = out[r];
          dst_desc = dst->get_desc();
          ops.append_sum(q[r].scale / q[i].scale, q[r].zero_point);
        } else if (!logits && q[i].zero_point != 0) {
          attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
        }
        if (l.relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(ops);

        memory weights, bias_mem;
        dnnl::primitive primitive;
        memory::desc pd_src;
        // What a primitive descriptor made for this layer leaves: its
        // weights (PyTorch's layout `user_w` reordered into its own), bias,
        // output and kernel.
        const auto adopt = [&](const auto& pd, const memory::desc& user_w) {
          pd_src = pd.src_desc();
          weights = s8_weights(pd.weights_desc(), user_w, w.values);
          bias_mem = owned_copy(pd.bias_desc(), bias);
          if (!dst) dst = memory(pd.dst_desc(), engine);
          kernels.insert(pd.impl_info_str());
        };
        if (conv) {
          const memory::dims w_dims{l.k, l.c, l.window, l.window};
          const auto pd = not_reference(
              [&](const memory::desc& from) {
                const dnnl::convolution_forward::desc desc(
                    dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, from,
                    memory::desc(w_dims, dt::s8, tag::any), memory::desc({l.k}, dt::f32, tag::a), dst_desc,
                    {l.stride, l.stride}, {l.pad, l.pad}, {l.pad, l.pad});
                return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
              },
              src_desc);
          adopt(pd, memory::desc(w_dims, dt::s8, tag::oihw));
          primitive = dnnl::convolution_forward(pd);
        } else {
          // A 4-D input is flattened by oneDNN itself: weights [k, c, h, w]
          // are the same bytes as PyTorch's [k, c*h*w].
          const memory::dims in_dims = src.get_desc().dims();
          const bool image = in_dims.size() == 4;
          const memory::dims w_dims =
              image ? memory::dims{l.k, in_dims[1], in_dims[2], in_dims[3]} : memory::dims{l.k, in_dims[1]};
          const auto pd = not_reference(
              [&](const memory::desc& from) {
                const dnnl::inner_product_forward::desc desc(dnnl::prop_kind::forward_inference, from,
                                                             memory::desc(w_dims, dt::s8, tag::any),
                                                             memory::desc({l.k}, dt::f32, tag::a), dst_desc);
                return dnnl::inner_product_forward::primitive_desc(desc, attr, engine);
              },
              src_desc);
          adopt(pd, memory::desc(w_dims, dt::s8, image ? tag::oihw : tag::oi));
          primitive = dnnl::inner_product_forward(pd);
        }
        take_src(pd_src);
        plan.main = Step{primitive,
                         {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias_mem},
                          {DNNL_ARG_DST, *dst}}};
        if (in_q.zero_point != 0)
          plan.main.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zero_point_memory(in_q.zero_point);
        if (l.residual < 0 && !logits && q[i].zero_point != 0)
          plan.main.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = zero_point_memory(q[i].zero_point);
        out[i] = *dst;
        break;
      }
      case LayerKind::max_pool:
      case LayerKind::global_avg_pool: {
        DLB_REQUIRE(!first && !logits, "cpu_onednn_s8: " + l.name + " cannot start or end the network");
        const auto pd = pool_pd(l, src_desc, memory::desc(dst_dims, dt::u8, tag::any));
        take_src(pd.src_desc());
        out[i] = memory(pd.dst_desc(), engine);
        plan.main = Step{dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out[i]}}};
        break;
      }
      case LayerKind::log_softmax: {
        DLB_REQUIRE(!first && src.get_desc().data_type() == dt::f32,
                    "cpu_onednn_s8: log-softmax must read the fp32 logits");
        plan.main = log_softmax_step(src, any_dst, out[i]);
        break;
      }
    }
  }
  return finish_plans(plans, out.back(), user_y, kernels, args.report);
}

}  // namespace

Run prepare_net_cpu_onednn_s8(const NetArgs& args, const Exec&) {
  try {
    return prepare_s8(args);
  } catch (const dnnl::error& e) {
    throw Unsupported(std::string("oneDNN has no int8 implementation for this network here: ") + e.what());
  }
}

}  // namespace dlb::nn
