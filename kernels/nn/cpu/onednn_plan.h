// What the oneDNN network backends (cpu_onednn, cpu_onednn_bf16,
// cpu_onednn_s8) share: a layer as a list of primitive executions, and the
// helpers that make its memories. Internal to kernels/nn; include only from
// code built with oneDNN.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/onednn.h"
#include "kernels/nn/infer/nn.h"

namespace dlb::nn {

// cpu_onednn's fp32 pass with one of its two layout policies (oneDNN's
// layouts, or nChw16c from 32 channels), not the faster of them that the
// variant keeps; with winograd_always, Winograd wherever oneDNN has it for a
// layer, not where it was faster: the tests hold each to the reference.
Run prepare_cpu_onednn_fp32(const NetArgs& args, bool blocked_wide, bool winograd_always = false);
// cpu_onednn_ownwino's pass; with own_always, the own Winograd on every
// layer it takes (where oneDNN's kernel for it reads and writes NHWC), not
// only where it was faster.
Run prepare_cpu_onednn_ownwino(const NetArgs& args, bool own_always);
// cpu_onednn_s8's pass with each conv on oneDNN's first kernel for it
// (first), on the next one of the same ISA and layouts where there is one
// (next), or on the faster of those two, timed in prepare (faster: the
// row's).
enum class S8Kernels { faster, first, next };
Run prepare_cpu_onednn_s8(const NetArgs& args, S8Kernels kernels);

// Whether call `a` is faster than call `b` (nn_cpu_onednn.cpp): the best
// of five timed runs each, alternating, `zero` before each run.
bool first_is_faster(const std::function<void()>& zero, const std::function<void()>& a,
                     const std::function<void()>& b);

struct Step {
  dnnl::primitive primitive;
  std::unordered_map<int, dnnl::memory> args;
};

// For first_is_faster: zeros what the steps read and write (their sources
// and destinations); runs them and waits.
void zero_activations(const std::vector<Step>& steps);
void run_steps(const std::vector<Step>& steps);

// Where a layer writes what it makes when it does not write into a
// shortcut: a buffer of the same descriptor that an earlier layer's output
// held, once every reader of that output has run, or a new one. The layers
// run in index order. take(writer, of, desc): layer `writer` writes the
// output of layer `of` (itself, or the pool after it that it runs) or a
// buffer of its own (its input reordered, a conv's output before its join:
// `of` = `writer`, held as long as its output would be). An output some
// layer joins into (a residual) lives on as that layer's output and is never
// given back. Fewer buffers keep a pass's activations in cache: at batch 64
// a ResNet20 stage-1 activation is 4 MB in fp32, and with a new buffer for
// every layer's output each conv without a residual sum wrote memory the
// pass had not touched since the pass before (resnet20 fp32 batch 64 on a
// Zen 4: those layers 0.86-0.89 ms against 0.68-0.72 with the buffers
// shared).
class OutputBuffers {
 public:
  explicit OutputBuffers(const Network& net) : net_(net) {}
  dnnl::memory take(std::size_t writer, std::size_t of, const dnnl::memory::desc& desc) {
    const auto& ls = net_.layers;
    std::size_t last = of;
    for (std::size_t j = of + 1; j < ls.size(); ++j) {
      if (ls[j].residual == static_cast<int>(of)) return dnnl::memory(desc, onednn_engine());
      if (ls[j].input == static_cast<int>(of)) last = j;
    }
    // Of the free ones, the one read last: the likeliest still in cache.
    Buffer* warmest = nullptr;
    for (auto& b : buffers_)
      if (b.free_after < writer && b.m.get_desc() == desc && (warmest == nullptr || b.free_after > warmest->free_after))
        warmest = &b;
    if (warmest != nullptr) {
      warmest->free_after = last;
      return warmest->m;
    }
    buffers_.push_back({dnnl::memory(desc, onednn_engine()), last});
    return buffers_.back().m;
  }

 private:
  const Network& net_;
  struct Buffer {
    dnnl::memory m;
    std::size_t free_after;  // the last layer that reads what it holds
  };
  std::vector<Buffer> buffers_;
};

// One layer's work: an optional reorder before (the network input, or
// into a Winograd layout), the primitive, an optional join (a residual sum
// the primitive could not fuse), an optional reorder after (the network
// output).
// Or, in place of the primitive, `own`: a dlbench kernel on the same
// memories (run after the stream has finished the reorder before it).
struct LayerPlan {
  std::optional<Step> before, join, after;
  Step main;
  std::function<void()> own;
  void run() {
    auto& stream = onednn_stream();
    if (before) before->primitive.execute(stream, before->args);
    if (own) {
      stream.wait();
      own();
    } else {
      main.primitive.execute(stream, main.args);
    }
    if (join) join->primitive.execute(stream, join->args);
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
// not take, left by a Winograd layer), made again for each of `others` in
// turn (by default the layout it prefers, format_tag::any; a primitive that
// cannot choose its input layout, as pooling, lists concrete ones), the
// first with a fast kernel kept, and the caller reorders into it.
template <class Make>
auto not_reference(Make make, const dnnl::memory::desc& fixed,
                   std::initializer_list<dnnl::memory::format_tag> others = {dnnl::memory::format_tag::any}) {
  const auto is_reference = [](const auto& pd) { return std::string_view(pd.impl_info_str()).substr(0, 3) == "ref"; };
  auto pd = make(fixed);
  if (!is_reference(pd)) return pd;
  for (const auto layout : others) {
    try {
      auto other = make(dnnl::memory::desc(fixed.dims(), fixed.data_type(), layout));
      if (!is_reference(other)) return other;
    } catch (const dnnl::error&) {
      // Not a layout this primitive takes.
    }
  }
  return pd;
}

// Layer l's output at batch n as its primitive writes it: [n, k] for fc and
// log-softmax (the classes), [n, k, oh, ow] for the spatial layers.
inline dnnl::memory::dims output_dims(const Layer& l, std::int64_t n) {
  if (l.kind == LayerKind::fc || l.kind == LayerKind::log_softmax) return {n, l.k};
  return {n, l.k, l.oh, l.ow};
}

// A fully connected layer's weights on input `src`. A 4-D input (NCHW, or
// blocked) is flattened by oneDNN itself: the weights are then [k, c, h, w]
// (oihw), the same bytes as PyTorch's [k, c*h*w]; a 2-D input's are [k, c]
// (oi).
struct FcWeights {
  dnnl::memory::dims dims;
  dnnl::memory::format_tag user_tag;  // the committed weights' layout
};
inline FcWeights fc_weights(const Layer& l, const dnnl::memory& src) {
  const dnnl::memory::dims in = src.get_desc().dims();
  if (in.size() == 4) return {{l.k, in[1], in[2], in[3]}, dnnl::memory::format_tag::oihw};
  return {{l.k, in[1]}, dnnl::memory::format_tag::oi};
}

// Layer l's inner product reading `src_desc` (made again for
// format_tag::any where that one has only the reference kernel), weights
// `w` of `weight_type` in the layout oneDNN chooses, an fp32 bias, writing
// `dst`, with `attr`.
inline dnnl::inner_product_forward::primitive_desc fc_pd(const Layer& l, const dnnl::memory::desc& src_desc,
                                                          const FcWeights& w, dnnl::memory::data_type weight_type,
                                                          const dnnl::memory::desc& dst,
                                                          const dnnl::primitive_attr& attr) {
  return not_reference(
      [&](const dnnl::memory::desc& from) {
        const dnnl::inner_product_forward::desc desc(
            dnnl::prop_kind::forward_inference, from,
            dnnl::memory::desc(w.dims, weight_type, dnnl::memory::format_tag::any),
            dnnl::memory::desc({l.k}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a), dst);
        return dnnl::inner_product_forward::primitive_desc(desc, attr, onednn_engine());
      },
      src_desc);
}

// Layer i adds into its shortcut's buffer in place (the sum post-op):
// refuses a network where a later layer still reads that buffer.
inline void require_shortcut_unread(const Network& net, std::size_t i, const char* backend) {
  const Layer& l = net.layers[i];
  for (std::size_t j = i + 1; j < net.layers.size(); ++j)
    DLB_REQUIRE(net.layers[j].input != l.residual && net.layers[j].residual != l.residual,
                std::string(backend) + " accumulates " + l.name +
                    " into its shortcut's buffer, which a later layer reads");
}

// A max pool (window x window, stride = window) or global average pool
// primitive for layer l reading `src_desc` (made again for a layout with a
// jit kernel where that one has only the reference kernel: a pool cannot
// take format_tag::any), writing `dst` (format_tag::any).
inline dnnl::pooling_forward::primitive_desc pool_pd(const Layer& l, const dnnl::memory::desc& src_desc,
                                                     const dnnl::memory::desc& dst) {
  const bool max = l.kind == LayerKind::max_pool;
  const dnnl::memory::dims kernel = max ? dnnl::memory::dims{l.window, l.window} : dnnl::memory::dims{l.h, l.w};
  return not_reference(
      [&](const dnnl::memory::desc& from) {
        const dnnl::pooling_forward::desc desc(
            dnnl::prop_kind::forward_inference,
            max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding, from, dst, kernel,
            kernel, {0, 0}, {0, 0});
        return dnnl::pooling_forward::primitive_desc(desc, onednn_engine());
      },
      src_desc, {dnnl::memory::format_tag::nhwc, dnnl::memory::format_tag::nChw16c, dnnl::memory::format_tag::nChw8c});
}

// Log-softmax over the classes of `src` into a new memory `out` of `dst` (format_tag::any).
inline Step log_softmax_step(const dnnl::memory& src, const dnnl::memory::desc& dst, dnnl::memory& out) {
  const dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_log,
                                            src.get_desc(), dst, 1);
  const dnnl::softmax_v2_forward::primitive_desc pd(desc, onednn_engine());
  out = dnnl::memory(pd.dst_desc(), onednn_engine());
  return Step{dnnl::softmax_v2_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out}}};
}

// The last layer writes the caller's y (`user_y`, plain [n, classes]) in
// place where its output `result` has that layout, else through one reorder.
inline void write_user_y(LayerPlan& last, const dnnl::memory& result, const dnnl::memory& user_y) {
  if (result.get_desc() == user_y.get_desc()) {
    last.main.args[DNNL_ARG_DST] = user_y;
  } else {
    last.after = Step{dnnl::reorder(result, user_y), {{DNNL_ARG_FROM, result}, {DNNL_ARG_TO, user_y}}};
  }
}

// The report's implementation: the kernels, comma-separated.
inline std::string kernel_list(const std::set<std::string>& kernels) {
  std::string impl;
  for (const auto& k : kernels) impl.append(impl.empty() ? "" : ", ").append(k);
  return impl;
}

}  // namespace dlb::nn
