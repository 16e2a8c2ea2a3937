// cpu_onednn: the network as a framework runs it on oneDNN (see nn.h). Every
// primitive is created for the batch once, in prepare. Activations stay in
// the layouts oneDNN's kernels chose (format_tag::any for each layer's
// output, the next layer taking that layout as its input), so the only
// reorders in the pass are the input (NCHW -> blocked) and, where the last
// layer's layout is not plain, the output. Weights are reordered into each
// primitive's layout once, here. Each 3x3 stride-1 conv past the first is
// oneDNN's Winograd or convolution_auto, whichever ran it faster here
// (Winograd with the reorder into its layout where it wants another one).
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "kernels/common/error.h"
#include "kernels/common/onednn.h"
#include "kernels/nn/layers.h"
#include "kernels/nn/nn.h"
#include "kernels/nn/onednn_plan.h"

namespace dlb::nn {
namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

// Best of three runs of `steps` in order, after a warm-up.
double best_of_three(const std::vector<Step>& steps) {
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& step : steps) step.primitive.execute(onednn_stream(), step.args);
    onednn_stream().wait();
    if (i > 0) best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// Whether convolution `a` runs this layer faster than `b`, each with the
// reorder of src into the layout it takes where that differs, timed on
// zeroed activations (their values do not change the time of these
// kernels, and zeros are never denormal).
bool faster_of_two(const dnnl::convolution_forward::primitive_desc& a,
                   const dnnl::convolution_forward::primitive_desc& b, const memory& src,
                   const std::optional<memory>& dst, const Layer& l, const memory::dims& w_dims) {
  std::memset(src.get_data_handle(), 0, src.get_desc().get_size());
  double seconds[2];
  int i = 0;
  for (const auto* pd : {&a, &b}) {
    std::vector<Step> steps;
    memory in = src;
    if (pd->src_desc() != src.get_desc()) {
      in = memory(pd->src_desc(), onednn_engine());
      steps.push_back(Step{dnnl::reorder(src, in), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, in}}});
    }
    memory out = dst ? *dst : memory(pd->dst_desc(), onednn_engine());
    std::memset(out.get_data_handle(), 0, out.get_desc().get_size());
    steps.push_back(Step{dnnl::convolution_forward(*pd),
                         {{DNNL_ARG_SRC, in},
                          {DNNL_ARG_WEIGHTS, weights_in(pd->weights_desc(), memory::desc(w_dims, f32, tag::oihw), l.weight)},
                          {DNNL_ARG_BIAS, owned_copy(pd->bias_desc(), l.bias)},
                          {DNNL_ARG_DST, out}}});
    seconds[i++] = best_of_three(steps);
  }
  return seconds[0] < seconds[1];
}

// The whole network in `act`: activations and weights in that data type
// (f32, or bf16 with fp32 accumulation inside oneDNN's kernels), biases in
// fp32, the network's input and output fp32 (the first layer's reorder
// rounds the input; the last layer writes fp32). `mixed` (what PyTorch's
// autocast does): the first conv, whose input is the raw image, and
// log-softmax stay fp32, and so do their outputs and the logits that
// log-softmax reads; a layer whose input is in the other type reorders it.
Run prepare_onednn(const NetArgs& args, memory::data_type act, bool mixed = false) {
  const Network& net = *args.net;
  const std::int64_t n = args.batch;
  auto& engine = onednn_engine();
  const auto& layers = net.layers;
  const memory user_x({{n, net.c, net.h, net.w}, f32, tag::nchw}, engine, const_cast<float*>(args.x));
  const memory user_y({{n, net.classes}, f32, tag::nc}, engine, args.y);

  std::vector<memory> out(layers.size());  // each layer's output, in its layout
  auto plans = std::make_shared<std::vector<LayerPlan>>(layers.size());
  std::set<std::string> kernels;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    LayerPlan& plan = (*plans)[i];
    const bool first = l.input < 0;
    memory src = first ? user_x : out[static_cast<std::size_t>(l.input)];
    const memory::dims dst_dims = l.kind == LayerKind::conv || l.kind == LayerKind::max_pool ||
                                          l.kind == LayerKind::global_avg_pool
                                      ? memory::dims{n, l.k, l.oh, l.ow}
                                      : memory::dims{n, l.k};
    const bool fp32_layer = act == f32 || (mixed && (first || l.kind == LayerKind::log_softmax));
    const memory::data_type type = fp32_layer ? f32 : act;
    // The first layer picks its input layout; the others take what the
    // layer before them left, in their own data type (a conv or fc picks
    // its layout then too; a pool keeps the layout, which it cannot choose).
    memory::desc src_desc = src.get_desc();
    if (first || (src_desc.data_type() != type && (l.kind == LayerKind::conv || l.kind == LayerKind::fc))) {
      src_desc = memory::desc(src_desc.dims(), type, tag::any);
    } else if (src_desc.data_type() != type) {
      dnnl_memory_desc_t retyped = src_desc.data;
      retyped.data_type = memory::convert_to_c(type);
      src_desc = memory::desc(retyped);
    }
    const bool last = i + 1 == layers.size();
    const bool fp32_out = last || (mixed && (first || dequantized_output(net, i)));
    const memory::desc any_dst(dst_dims, fp32_out ? f32 : act, tag::any);
    auto take_src = [&](const memory::desc& want) {
      if (want != src.get_desc()) {
        memory converted(want, engine);
        plan.before = Step{dnnl::reorder(src, converted), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, converted}}};
        src = converted;
      }
    };

    switch (l.kind) {
      case LayerKind::conv: {
        // The residual join: a sum post-op accumulates into dst, so dst is
        // the shortcut's own buffer (in place), in the shortcut's layout.
        // Safe because no later layer reads the shortcut's output.
        memory::desc dst_desc = any_dst;
        std::optional<memory> dst;
        if (l.residual >= 0) {
          require_shortcut_unread(net, i, "cpu_onednn");
          dst = out[static_cast<std::size_t>(l.residual)];
          dst_desc = dst->get_desc();
        }
        const memory::dims w_dims{l.k, l.c, l.window, l.window};
        const auto attr = relu_attr(l.residual >= 0, l.relu);
        const auto conv_pd = [&](dnnl::algorithm algorithm, const memory::desc& from) {
          const dnnl::convolution_forward::desc desc(
              dnnl::prop_kind::forward_inference, algorithm, from, memory::desc(w_dims, type, tag::any),
              memory::desc({l.k}, f32, tag::a), dst_desc, {l.stride, l.stride}, {l.pad, l.pad}, {l.pad, l.pad});
          return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
        };
        auto pd = not_reference(
            [&](const memory::desc& from) { return conv_pd(dnnl::algorithm::convolution_auto, from); }, src_desc);
        // Past the first layer, oneDNN's Winograd where it has one for the
        // shape and the post-ops (not with the residual sum in oneDNN 2.6),
        // in the layout it wants: Winograd plus the reorder into that layout
        // is timed against convolution_auto once, here, and the faster kept
        // (as a framework's autotuner does; which wins depends on the shape
        // and the batch).
        if (!first && l.window == 3 && l.stride == 1) {
          try {
            auto wino = conv_pd(dnnl::algorithm::convolution_winograd, memory::desc(src_desc.dims(), type, tag::any));
            if (faster_of_two(wino, pd, src, dst, l, w_dims)) pd = wino;
          } catch (const dnnl::error&) {
            // No Winograd implementation for this shape, CPU or post-ops.
          }
        }
        take_src(pd.src_desc());
        if (!dst) dst = memory(pd.dst_desc(), engine);
        plan.main = Step{dnnl::convolution_forward(pd),
                         {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_WEIGHTS, weights_in(pd.weights_desc(), memory::desc(w_dims, f32, tag::oihw), l.weight)},
                          {DNNL_ARG_BIAS, owned_copy(pd.bias_desc(), l.bias)},
                          {DNNL_ARG_DST, *dst}}};
        kernels.insert(pd.impl_info_str());
        out[i] = *dst;
        break;
      }
      case LayerKind::max_pool:
      case LayerKind::global_avg_pool: {
        const auto pd = pool_pd(l, src_desc, any_dst);
        take_src(pd.src_desc());
        out[i] = memory(pd.dst_desc(), engine);
        plan.main = Step{dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out[i]}}};
        break;
      }
      case LayerKind::fc: {
        // A 4-D input (NCHW, or blocked) is flattened by oneDNN itself: the
        // weights are then [k, c, h, w], the same bytes as [k, c*h*w] (oihw).
        const memory::dims in_dims = src.get_desc().dims();
        const bool spatial = in_dims.size() == 4;
        const memory::dims w_dims = spatial ? memory::dims{l.k, in_dims[1], in_dims[2], in_dims[3]}
                                            : memory::dims{l.k, in_dims[1]};
        const auto pd = not_reference(
            [&](const memory::desc& from) {
              const dnnl::inner_product_forward::desc desc(dnnl::prop_kind::forward_inference, from,
                                                           memory::desc(w_dims, type, tag::any),
                                                           memory::desc({l.k}, f32, tag::a), any_dst);
              return dnnl::inner_product_forward::primitive_desc(desc, relu_attr(false, l.relu), engine);
            },
            src_desc);
        take_src(pd.src_desc());
        out[i] = memory(pd.dst_desc(), engine);
        plan.main = Step{dnnl::inner_product_forward(pd),
                         {{DNNL_ARG_SRC, src},
                          {DNNL_ARG_WEIGHTS, weights_in(pd.weights_desc(),
                                                        memory::desc(w_dims, f32, spatial ? tag::oihw : tag::oi), l.weight)},
                          {DNNL_ARG_BIAS, owned_copy(pd.bias_desc(), l.bias)},
                          {DNNL_ARG_DST, out[i]}}};
        kernels.insert(pd.impl_info_str());
        break;
      }
      case LayerKind::log_softmax:
        // softmax_v2 takes src and dst in different data types: bf16 in, fp32 out.
        plan.main = log_softmax_step(src, last ? any_dst : src_desc, out[i]);
        break;
    }
  }
  return finish_plans(plans, out.back(), user_y, kernels, args.report);
}

}  // namespace

Run prepare_net_cpu_onednn(const NetArgs& args, const Exec&) { return prepare_onednn(args, f32); }

namespace {

Run prepare_bf16(const NetArgs& args, bool mixed) {
  try {
    return prepare_onednn(args, memory::data_type::bf16, mixed);
  } catch (const dnnl::error& e) {
    // oneDNN 2.6 has bf16 kernels on AVX-512 (native with AVX512-BF16 or
    // AMX, emulated on plain AVX-512) and none below.
    throw Unsupported(std::string("oneDNN has no bf16 implementation on this CPU: ") + e.what());
  }
}

}  // namespace

Run prepare_net_cpu_onednn_bf16(const NetArgs& args, const Exec&) { return prepare_bf16(args, false); }
Run prepare_net_cpu_onednn_mixed_bf16(const NetArgs& args, const Exec&) { return prepare_bf16(args, true); }

}  // namespace dlb::nn
