// cpu_onednn: the network as a framework runs it on oneDNN (see nn.h). Every
// primitive is created for the batch once, in prepare. Activations stay in
// the layouts oneDNN's kernels chose (format_tag::any for each layer's
// output, the next layer taking that layout as its input), so the only
// reorders in the pass are the input (NCHW -> blocked), into a Winograd
// layer's layout, and, where the last layer's layout is not plain, the
// output. Weights are reordered into each primitive's layout once, here.
// Each 3x3 stride-1 conv past the first is oneDNN's Winograd or
// convolution_auto, whichever ran it faster here (Winograd with the reorder
// into its layout where it wants another one; for a residual conv, with the
// join as a binary add after it, oneDNN 2.6's Winograd taking no sum).
// fp32 prepares the network twice, with oneDNN's layouts and with the
// CPU's blocked layout (nChw16c on AVX-512, nChw8c on AVX2) from 32
// channels up (what lets the residual convs of ResNet20's wider stages run
// Winograd on AVX-512), times both passes and keeps the faster.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>

#include "kernels/common/cpu_info.h"
#include "kernels/common/error.h"
#include "kernels/common/onednn.h"
#include "kernels/common/thread_scratch.h"
#include "kernels/conv/conv_few_channels_nhwc.h"
#include "kernels/conv/conv_winograd_nhwc.h"
#include "kernels/conv/conv_winograd_s2_nhwc.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/infer/nn.h"
#include "kernels/nn/cpu/onednn_plan.h"
#include "kernels/nn/infer/walk.h"

namespace dlb::nn {

// Whether call `a` is faster than call `b`: the best of five runs each, a
// and b alternating, after a warm-up of each, so that a moment of a busy
// machine does not fall on one of them only; `zero` clears what they read
// and write before each run (their values do not change the time of these
// kernels, and zeros are never denormal).
bool first_is_faster(const std::function<void()>& zero, const std::function<void()>& a,
                     const std::function<void()>& b) {
  const std::function<void()>* calls[2] = {&a, &b};
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 2; ++i) {
      zero();
      const auto start = std::chrono::steady_clock::now();
      (*calls[i])();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (round > 0) best[i] = std::min(best[i], seconds);
    }
  }
  return best[0] < best[1];
}

void zero_activations(const std::vector<Step>& steps) {
  for (const auto& step : steps)
    for (const auto& [arg, m] : step.args)
      if (arg == DNNL_ARG_SRC || arg == DNNL_ARG_SRC_0 || arg == DNNL_ARG_FROM || arg == DNNL_ARG_DST)
        std::memset(m.get_data_handle(), 0, m.get_desc().get_size());
}

void run_steps(const std::vector<Step>& steps) {
  for (const auto& step : steps) step.primitive.execute(onednn_stream(), step.args);
  onednn_stream().wait();
}

namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

// A conv layer as oneDNN will run it: the reorder of its input into the
// layout the primitive takes (where that differs), the primitive, and for a
// residual conv that cannot fuse the sum, the join after it.
struct ConvChoice {
  dnnl::convolution_forward::primitive_desc pd;
  std::optional<dnnl::binary::primitive_desc> join;  // dst = relu(shortcut + conv), in place into the shortcut
};

// Where a step writes what it makes: a new memory, or (OutputBuffers,
// onednn_plan.h) one an earlier layer's output no longer needs.
using MakeMemory = std::function<memory(const memory::desc&)>;
memory new_memory(const memory::desc& desc) { return memory(desc, onednn_engine()); }

// The steps of `c` from `src` into `dst` (the shortcut's buffer for a
// residual conv; else null: a memory from `make`), weights and bias
// reordered for it.
std::vector<Step> conv_steps(const ConvChoice& c, const memory& src, const std::optional<memory>& dst,
                             const Layer& l, const memory::dims& w_dims, std::optional<memory>* out = nullptr,
                             const MakeMemory& make = new_memory) {
  std::vector<Step> steps;
  memory in = src;
  if (c.pd.src_desc() != src.get_desc()) {
    in = make(c.pd.src_desc());
    steps.push_back(Step{dnnl::reorder(src, in), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, in}}});
  }
  // With a join, the conv writes a buffer of its own and the join adds it
  // into the shortcut.
  memory conv_out = dst && !c.join ? *dst : make(c.pd.dst_desc());
  const memory::desc user_weights(w_dims, f32, tag::oihw);
  steps.push_back(Step{dnnl::convolution_forward(c.pd),
                       {{DNNL_ARG_SRC, in},
                        {DNNL_ARG_WEIGHTS, weights_in(c.pd.weights_desc(), user_weights, l.weight)},
                        {DNNL_ARG_BIAS, owned_copy(c.pd.bias_desc(), l.bias)},
                        {DNNL_ARG_DST, conv_out}}});
  if (c.join) {
    steps.push_back(
        Step{dnnl::binary(*c.join), {{DNNL_ARG_SRC_0, *dst}, {DNNL_ARG_SRC_1, conv_out}, {DNNL_ARG_DST, *dst}}});
  }
  if (out != nullptr) *out = c.join ? *dst : conv_out;
  return steps;
}

// Whether conv choice `a` runs this layer faster than `b`, each with its
// reorder and join.
bool faster_of_two(const ConvChoice& a, const ConvChoice& b, const memory& src, const std::optional<memory>& dst,
                   const Layer& l, const memory::dims& w_dims) {
  const std::vector<Step> steps[2] = {conv_steps(a, src, dst, l, w_dims), conv_steps(b, src, dst, l, w_dims)};
  return first_is_faster([&] {
                           zero_activations(steps[0]);
                           zero_activations(steps[1]);
                         },
                         [&] { run_steps(steps[0]); }, [&] { run_steps(steps[1]); });
}

// The activations' layouts: oneDNN's choice for every layer, or the CPU's
// blocked layout (blocked_layout) for the fp32 convs of 32 or more output
// channels.
// own_winograd: oneDNN's layouts (nhwc for its brgconv kernels), and each
// 3x3 stride-1 conv past the first whose channels are multiples of 16 run by
// dlbench's own Winograd F(4x4, 3x3) on NHWC (conv_winograd_nhwc.h, its
// bias, residual sum and ReLU fused) where that ran it faster than oneDNN's
// convolution_auto (timed once, here).
enum class Layouts { picked, blocked_wide, own_winograd };
// The blocked layout of oneDNN's jit kernels on this CPU: a block of
// channels fills a vector register of fp32, 16 with AVX-512, 8 with AVX2
// (where a pool on nChw16c has only oneDNN's reference kernel).
tag blocked_layout() { return cpu_has_avx512f() ? tag::nChw16c : tag::nChw8c; }
const char* blocked_layout_name() { return cpu_has_avx512f() ? "nChw16c" : "nChw8c"; }
bool blocked_when_wide(const Layer& l) { return l.kind == LayerKind::conv && l.k >= 32 && l.k % 16 == 0; }

// The chain as a whole-graph backend (walk.h): a layer's Value is its
// output's memory, in the layout and data type its primitive chose.
// winograd_always: oneDNN's Winograd where it has one for the layer (and a
// jit join), or with own_winograd the own one where it takes the layer,
// always instead of when faster (tests).
class OnednnLayers final : public GraphBackend<memory> {
 public:
  OnednnLayers(const NetArgs& args, memory::data_type act, bool mixed, Layouts layouts, bool winograd_always)
      : net_(*args.net), n_(args.batch), act_(act), mixed_(mixed), layouts_(layouts),
        winograd_always_(winograd_always), user_y_({{n_, net_.classes}, f32, tag::nc}, onednn_engine(), args.y),
        plans_(std::make_shared<std::vector<LayerPlan>>(net_.layers.size())) {}

  Out conv(const Layer& l, const Io& io) override {
    Start s = start(l, io);
    LayerPlan& plan = (*plans_)[io.index];
    auto& engine = onednn_engine();
    // The residual join: a sum post-op accumulates into dst, so dst is
    // the shortcut's own buffer (in place), in the shortcut's layout.
    // Safe because no later layer reads the shortcut's output.
    memory::desc dst_desc = s.any_dst;
    std::optional<memory> dst;
    if (io.residual != nullptr) {
      require_shortcut_unread(net_, io.index, "cpu_onednn");
      dst = *io.residual;
      dst_desc = dst->get_desc();
    }
    const memory::dims w_dims{l.k, l.c, l.window, l.window};
    const auto attr = relu_attr(l.residual >= 0, l.relu);
    const auto conv_pd = [&](dnnl::algorithm algorithm, const memory::desc& from) {
      const dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, algorithm, from, memory::desc(w_dims, s.type, tag::any),
          memory::desc({l.k}, f32, tag::a), dst_desc, {l.stride, l.stride}, {l.pad, l.pad}, {l.pad, l.pad});
      return dnnl::convolution_forward::primitive_desc(desc, attr, engine);
    };
    ConvChoice choice{not_reference(
        [&](const memory::desc& from) { return conv_pd(dnnl::algorithm::convolution_auto, from); }, s.src_desc),
                      std::nullopt};
    const memory& src = s.src;
    const std::int64_t n = n_;
    // The first conv, on the network's NCHW input, by the own direct kernel
    // for few input channels into NHWC (conv_few_channels_nhwc.h, bias and
    // ReLU fused) where oneDNN's choice writes NHWC too and the own kernel
    // runs faster than it with its input's reorder (timed once, here).
    if (layouts_ == Layouts::own_winograd && s.first && act_ == f32 && !dst &&
        FewChannelsNhwc::accepts(l.c, l.k, l.window, l.stride)) {
      const memory::desc nchw_in(s.src_desc.dims(), f32, tag::nchw), nhwc_out(s.dst_dims, f32, tag::nhwc);
      if (src.get_desc() == nchw_in && choice.pd.dst_desc() == nhwc_out) {
        const memory y = buffers_.take(io.index, io.index, nhwc_out);
        auto kernel = std::make_shared<FewChannelsNhwc>(l.weight.data(), l.k, l.c, l.window, l.h, l.w, l.pad);
        auto bias = std::make_shared<std::vector<float>>(l.bias);
        const bool relu = l.relu;
        std::function<void()> own = [kernel, bias, src, y, n, relu] {
          (*kernel)(static_cast<const float*>(src.get_data_handle()), n, bias->empty() ? nullptr : bias->data(),
                    relu, static_cast<float*>(y.get_data_handle()));
        };
        const std::vector<Step> theirs = conv_steps(choice, src, y, l, w_dims);
        // Zeroes the output only: the input is the caller's.
        const auto zero = [&] { std::memset(y.get_data_handle(), 0, nhwc_out.get_size()); };
        if (winograd_always_ || first_is_faster(zero, own, [&] { run_steps(theirs); })) {
          plan.own = std::move(own);
          kernels_.insert("own direct conv (few channels, into NHWC)");
          return {y, call(io.index)};
        }
      }
    }
    const bool own_stride1 = WinogradNhwc::accepts(l.c, l.k, l.window, l.window, l.stride);
    if (layouts_ == Layouts::own_winograd && !s.first && act_ == f32 &&
        (own_stride1 || WinogradStride2Nhwc::accepts(l.c, l.k, l.window, l.window, l.stride))) {
      // Own Winograd reads and writes NHWC: where oneDNN's choice has the
      // same layouts (its input, its output or the shortcut it adds
      // into), the two are timed on the same memories and the faster kept.
      // At stride 1 F(4x4, 3x3), at stride 2 the parity phases' F(4x4, 2x2)
      // (conv_winograd_s2_nhwc.h).
      const memory::desc nhwc_in(s.src_desc.dims(), f32, tag::nhwc), nhwc_out(s.dst_dims, f32, tag::nhwc);
      if (choice.pd.src_desc() == nhwc_in && src.get_desc() == nhwc_in && choice.pd.dst_desc() == nhwc_out) {
        const memory y = dst ? *dst : buffers_.take(io.index, io.index, nhwc_out);
        auto bias = std::make_shared<std::vector<float>>(l.bias);
        const std::int64_t h = l.h, w = l.w, pad = l.pad;
        const bool accumulate = l.residual >= 0, relu = l.relu;
        std::shared_ptr<WinogradNhwc> kernel;
        std::function<void()> own;
        if (own_stride1) {
          kernel = std::make_shared<WinogradNhwc>(l.weight.data(), l.k, l.c, own_scratch_);
          own = [kernel, bias, src, y, n, h, w, pad, accumulate, relu] {
            (*kernel)(static_cast<const float*>(src.get_data_handle()), n, h, w, pad, bias->data(), accumulate,
                      relu, false, static_cast<float*>(y.get_data_handle()));
          };
        } else {
          auto strided = std::make_shared<WinogradStride2Nhwc>(l.weight.data(), l.k, l.c, own_scratch_);
          own = [strided, bias, src, y, n, h, w, pad, accumulate, relu] {
            (*strided)(static_cast<const float*>(src.get_data_handle()), n, h, w, pad, bias->data(), accumulate,
                       relu, static_cast<float*>(y.get_data_handle()));
          };
        }
        const std::vector<Step> theirs = conv_steps(choice, src, y, l, w_dims);
        const auto zero = [&] { zero_activations(theirs); };
        if (winograd_always_ || first_is_faster(zero, own, [&] { run_steps(theirs); })) {
          if (kernel && !dst && pool_folds_into(io.index)) {
            // The pool that alone reads this conv runs in its output
            // transform: the conv writes the pool's output (NHWC), and the
            // pool layer has nothing left to do (its layer_us is ~0).
            const memory pooled =
                buffers_.take(io.index, io.index + 1, {output_dims(net_.layers[io.index + 1], n), f32, tag::nhwc});
            plan.own = [kernel, bias, src, pooled, n, h, w, pad, relu] {
              (*kernel)(static_cast<const float*>(src.get_data_handle()), n, h, w, pad, bias->data(), false, relu,
                        true, static_cast<float*>(pooled.get_data_handle()));
            };
            folded_pool_ = io.index + 1;
            kernels_.insert("own F(4x4, 3x3) Winograd NHWC (+ its 2x2 max pool)");
            return {pooled, call(io.index)};
          }
          plan.own = std::move(own);
          kernels_.insert(kernel ? "own F(4x4, 3x3) Winograd NHWC" : "own stride-2 Winograd NHWC (parity phases)");
          return {y, call(io.index)};
        }
      }
    }
    // Past the first layer, oneDNN's Winograd where it has one for the
    // shape, in the layout it wants: Winograd plus the reorder into that
    // layout is timed against convolution_auto once, here, and the
    // faster kept (as a framework's autotuner does; which wins depends on
    // the shape and the batch). oneDNN 2.6's Winograd takes no residual
    // sum: there, Winograd writes its own buffer and a binary add with
    // the ReLU (the join) adds it into the shortcut.
    if (!s.first && l.window == 3 && l.stride == 1) {
      try {
        const memory::desc wino_src(s.src_desc.dims(), s.type, tag::any);
        ConvChoice wino{l.residual < 0 ? conv_pd(dnnl::algorithm::convolution_winograd, wino_src) : [&] {
          const dnnl::convolution_forward::desc desc(
              dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, wino_src,
              memory::desc(w_dims, s.type, tag::any), memory::desc({l.k}, f32, tag::a),
              memory::desc(s.dst_dims, s.type, tag::any), {l.stride, l.stride}, {l.pad, l.pad}, {l.pad, l.pad});
          return dnnl::convolution_forward::primitive_desc(desc, engine);
        }(), std::nullopt};
        if (l.residual >= 0) {
          const dnnl::binary::desc join(dnnl::algorithm::binary_add, dst_desc, wino.pd.dst_desc(), dst_desc);
          wino.join = dnnl::binary::primitive_desc(join, relu_attr(false, l.relu), engine);
        }
        // A join on oneDNN's reference kernel (the shortcut in another
        // layout than Winograd's) would cost more than Winograd saves.
        const bool reference_join = wino.join && std::string_view(wino.join->impl_info_str()).substr(0, 3) == "ref";
        if (!reference_join && (winograd_always_ || faster_of_two(wino, choice, src, dst, l, w_dims))) choice = wino;
      } catch (const dnnl::error&) {
        // No Winograd implementation for this shape, CPU or data type.
      }
    }
    std::optional<memory> result;
    std::vector<Step> steps = conv_steps(choice, src, dst, l, w_dims, &result, buffers_for(io.index));
    if (steps.size() == (choice.join ? 3u : 2u)) {
      plan.before = steps.front();
      steps.erase(steps.begin());
    }
    plan.main = steps.front();
    if (choice.join) {
      plan.join = steps.back();
      kernels_.insert(choice.join->impl_info_str());
    }
    kernels_.insert(choice.pd.impl_info_str());
    return {*result, call(io.index)};
  }

  Out max_pool(const Layer& l, const Io& io) override { return pool(l, io); }
  Out global_avg_pool(const Layer& l, const Io& io) override { return pool(l, io); }

  Out fc(const Layer& l, const Io& io) override {
    Start s = start(l, io);
    LayerPlan& plan = (*plans_)[io.index];
    const FcWeights w = fc_weights(l, s.src);
    const auto pd = fc_pd(l, s.src_desc, w, s.type, s.any_dst, relu_attr(false, l.relu));
    take_src(plan, s.src, pd.src_desc(), io.index);
    const memory y = buffers_.take(io.index, io.index, pd.dst_desc());
    plan.main = Step{dnnl::inner_product_forward(pd),
                     {{DNNL_ARG_SRC, s.src},
                      {DNNL_ARG_WEIGHTS,
                       weights_in(pd.weights_desc(), memory::desc(w.dims, f32, w.user_tag), l.weight)},
                      {DNNL_ARG_BIAS, owned_copy(pd.bias_desc(), l.bias)},
                      {DNNL_ARG_DST, y}}};
    kernels_.insert(pd.impl_info_str());
    return {y, call(io.index)};
  }

  Out log_softmax(const Layer& l, const Io& io) override {
    Start s = start(l, io);
    memory y;
    // softmax_v2 takes src and dst in different data types: bf16 in, fp32 out.
    (*plans_)[io.index].main = log_softmax_step(s.src, s.last ? s.any_dst : s.src_desc, y);
    return {y, call(io.index)};
  }

  void finish(const memory& result) override { write_user_y(plans_->back(), result, user_y_); }
  std::string implementation() const override { return kernel_list(kernels_); }

 private:
  // What every layer starts from: its input, its output's dimensions, its
  // data type, the input's descriptor as its primitive may take it, and its
  // output's (format_tag::any, or blocked_layout()).
  struct Start {
    memory src;
    memory::dims dst_dims;
    memory::data_type type;
    memory::desc src_desc, any_dst;
    bool first, last;
  };
  Start start(const Layer& l, const Io& io) const {
    Start s;
    s.first = l.input < 0;
    s.last = io.index + 1 == net_.layers.size();
    s.src = io.x;
    s.dst_dims = output_dims(l, n_);
    const bool fp32_layer = act_ == f32 || (mixed_ && (s.first || l.kind == LayerKind::log_softmax));
    s.type = fp32_layer ? f32 : act_;
    // The first layer picks its input layout; the others take what the
    // layer before them left, in their own data type (a conv or fc picks
    // its layout then too; a pool keeps the layout, which it cannot choose).
    s.src_desc = s.src.get_desc();
    if (s.first || (s.src_desc.data_type() != s.type && (l.kind == LayerKind::conv || l.kind == LayerKind::fc))) {
      s.src_desc = memory::desc(s.src_desc.dims(), s.type, tag::any);
    } else if (s.src_desc.data_type() != s.type) {
      dnnl_memory_desc_t retyped = s.src_desc.data;
      retyped.data_type = memory::convert_to_c(s.type);
      s.src_desc = memory::desc(retyped);
    }
    const bool fp32_out = s.last || (mixed_ && (s.first || dequantized_output(net_, io.index)));
    // blocked_wide: fp32 convs of 32 or more output channels write
    // blocked_layout(), the others the layout oneDNN picks (nhwc for its brgconv
    // kernels). Measured on a Zen 4 (AVX-512) at batch 64: brgconv on nhwc
    // runs ResNet20's 16-channel convs in 1.4-1.5 ms against 1.9-2.1 for the
    // nChw16c kernels, the 32- and 64-channel ones in 0.85-1.4 ms against
    // 0.58-1.0 for nChw16c with Winograd, whose residual join (below) needs
    // the shortcut in its own layout; mnist_cnn's convs run 25-30% slower
    // in nChw16c. Which policy wins is timed (prepare_net_cpu_onednn).
    const bool blocked = layouts_ == Layouts::blocked_wide && act_ == f32 && blocked_when_wide(l);
    // own_winograd without AVX-512: every conv writes NHWC, the layout of
    // the own kernels. oneDNN 2.6 picks NHWC by itself only for its AVX-512
    // brgconv kernels; on AVX2 it picks nChw8c, where the own Winograd
    // never got a layer.
    const bool nhwc = layouts_ == Layouts::own_winograd && act_ == f32 && l.kind == LayerKind::conv &&
                      !cpu_has_avx512f();
    s.any_dst = memory::desc(s.dst_dims, fp32_out ? f32 : act_,
                             blocked ? blocked_layout() : nhwc ? tag::nhwc : tag::any);
    return s;
  }

  Out pool(const Layer& l, const Io& io) {
    if (io.index == folded_pool_) {  // its conv ran it
      (*plans_)[io.index].own = [] {};
      return {io.x, call(io.index)};
    }
    Start s = start(l, io);
    LayerPlan& plan = (*plans_)[io.index];
    const auto pd = pool_pd(l, s.src_desc, s.any_dst);
    take_src(plan, s.src, pd.src_desc(), io.index);
    const memory y = buffers_.take(io.index, io.index, pd.dst_desc());
    plan.main = Step{dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, s.src}, {DNNL_ARG_DST, y}}};
    return {y, call(io.index)};
  }

  // The reorder of layer i's input into the layout its primitive takes, where that differs.
  void take_src(LayerPlan& plan, memory& src, const memory::desc& want, std::size_t i) {
    if (want == src.get_desc()) return;
    const memory converted = buffers_.take(i, i, want);
    plan.before = Step{dnnl::reorder(src, converted), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, converted}}};
    src = converted;
  }

  // Whether layer i's output is read by the max pool right after it alone,
  // a 2x2 window at stride 2 without padding: a pool the own Winograd
  // folds into its output transform.
  bool pool_folds_into(std::size_t i) const {
    const auto& ls = net_.layers;
    if (i + 1 >= ls.size()) return false;
    const Layer& p = ls[i + 1];
    if (p.kind != LayerKind::max_pool || p.input != static_cast<int>(i) || p.window != 2 || p.stride != 2 ||
        p.pad != 0)
      return false;
    for (std::size_t j = 0; j < ls.size(); ++j)
      if (j != i + 1 && (ls[j].input == static_cast<int>(i) || ls[j].residual == static_cast<int>(i))) return false;
    return true;
  }

  Run call(std::size_t i) const {
    return [plans = plans_, i] { (*plans)[i].run(); };
  }

  MakeMemory buffers_for(std::size_t i) {
    return [this, i](const memory::desc& desc) { return buffers_.take(i, i, desc); };
  }

  const Network& net_;
  const std::int64_t n_;
  const memory::data_type act_;
  const bool mixed_;
  const Layouts layouts_;
  const bool winograd_always_;
  const memory user_y_;
  std::shared_ptr<std::vector<LayerPlan>> plans_;
  // The own Winograd layers' per-thread scratch, one for all (they run one
  // at a time): as large as the largest need, in cache from layer to layer.
  std::shared_ptr<ThreadScratch> own_scratch_ = std::make_shared<ThreadScratch>();
  std::set<std::string> kernels_;
  std::size_t folded_pool_ = static_cast<std::size_t>(-1);  // the pool layer a conv ran, if any
  OutputBuffers buffers_{net_};
};

// The whole network in `act`: activations and weights in that data type
// (f32, or bf16 with fp32 accumulation inside oneDNN's kernels), biases in
// fp32, the network's input and output fp32 (the first layer's reorder
// rounds the input; the last layer writes fp32). `mixed` (what PyTorch's
// autocast does): the first conv, whose input is the raw image, and
// log-softmax stay fp32, and so do their outputs and the logits that
// log-softmax reads; a layer whose input is in the other type reorders it.
Run prepare_onednn(const NetArgs& args, memory::data_type act, bool mixed = false,
                   Layouts layouts = Layouts::picked, bool winograd_always = false) {
  const Network& net = *args.net;
  OnednnLayers backend(args, act, mixed, layouts, winograd_always);
  const memory user_x({{args.batch, net.c, net.h, net.w}, f32, tag::nchw}, onednn_engine(),
                      const_cast<float*>(args.x));
  return walk_graph(args, backend, user_x);
}

}  // namespace

Run prepare_cpu_onednn_fp32(const NetArgs& args, bool blocked_wide, bool winograd_always) {
  return prepare_onednn(args, f32, false, blocked_wide ? Layouts::blocked_wide : Layouts::picked, winograd_always);
}

Run prepare_net_cpu_onednn(const NetArgs& args, const Exec&) {
  // Both layout policies prepared, their passes timed alternately (best of
  // five each after a warm-up, on the caller's input), the faster kept, and
  // named in the report; one where they are the same network.
  const auto& layers = args.net->layers;
  if (std::none_of(layers.begin(), layers.end(), blocked_when_wide)) return prepare_onednn(args, f32);
  NetReport reports[2];
  Run runs[2];
  for (int i = 0; i < 2; ++i) {
    NetArgs a = args;
    a.report = &reports[i];
    runs[i] = prepare_cpu_onednn_fp32(a, i == 1);
  }
  double best[2] = {1e30, 1e30};
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 2; ++i) {
      const auto start = std::chrono::steady_clock::now();
      runs[i]();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (round > 0) best[i] = std::min(best[i], seconds);
    }
  }
  const int keep = best[1] < best[0] ? 1 : 0;
  if (args.report != nullptr) {
    *args.report = reports[keep];
    args.report->implementation +=
        keep == 1 ? std::string("; ") + blocked_layout_name() + " from 32 channels (faster here)"
                  : std::string("; oneDNN's layouts (faster here)");
  }
  return runs[keep];
}

Run prepare_cpu_onednn_ownwino(const NetArgs& args, bool own_always) {
  return prepare_onednn(args, f32, false, Layouts::own_winograd, own_always);
}

Run prepare_net_cpu_onednn_ownwino(const NetArgs& args, const Exec&) { return prepare_cpu_onednn_ownwino(args, false); }

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
