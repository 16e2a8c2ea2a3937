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
#include <unordered_map>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/common/onednn.h"
#include "kernels/gemm/quant.h"
#include "kernels/nn/model/calibration.h"
#include "kernels/nn/infer/layers.h"
#include "kernels/nn/cpu/onednn_plan.h"
#include "kernels/nn/infer/walk.h"

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

// A layer's output as the next layers read it: its memory and its quantization.
struct S8Memory {
  memory m;
  AffineU8 q;
};

// The int8 chain as a whole-graph backend (walk.h).
class OnednnS8Layers final : public GraphBackend<S8Memory> {
 public:
  OnednnS8Layers(const NetArgs& args, S8Kernels kernels)
      : kernels_choice_(kernels), net_(*args.net), n_(args.batch), quant_(activation_quant(net_, calibration(net_.name))),
        user_y_({{n_, net_.classes}, dt::f32, tag::nc}, onednn_engine(), args.y),
        plans_(std::make_shared<std::vector<LayerPlan>>(net_.layers.size())) {}

  S8Memory input(const float* x) const {
    return {memory({{n_, net_.c, net_.h, net_.w}, dt::f32, tag::nchw}, onednn_engine(), const_cast<float*>(x)),
            quant_.input};
  }

  Out conv(const Layer& l, const Io& io) override { return weighted(l, io); }
  Out fc(const Layer& l, const Io& io) override { return weighted(l, io); }
  Out max_pool(const Layer& l, const Io& io) override { return pool(l, io); }
  Out global_avg_pool(const Layer& l, const Io& io) override { return pool(l, io); }

  Out log_softmax(const Layer& l, const Io& io) override {
    Start s = start(l, io);
    DLB_REQUIRE(!s.first && s.src.get_desc().data_type() == dt::f32,
                "cpu_onednn_s8: log-softmax must read the fp32 logits");
    memory y;
    (*plans_)[io.index].main = log_softmax_step(s.src, s.any_dst, y);
    return {{y, s.out_q}, call(io.index)};
  }

  void finish(const S8Memory& result) override { write_user_y(plans_->back(), result.m, user_y_); }
  std::string implementation() const override { return kernel_list(kernels_); }

 private:
  // What every layer starts from: its input and its quantization, its
  // output's, dimensions and descriptor (u8, or the fp32 logits).
  struct Start {
    memory src;
    AffineU8 in_q, out_q;
    memory::dims dst_dims;
    memory::desc src_desc, any_dst;
    bool first, logits;
  };
  Start start(const Layer& l, const Io& io) const {
    Start s;
    s.first = l.input < 0;
    s.logits = dequantized_output(net_, io.index);
    s.src = io.x.m;
    s.in_q = io.x.q;
    s.out_q = quant_.outputs[io.index];
    s.dst_dims = output_dims(l, n_);
    s.src_desc = s.first ? memory::desc(s.src.get_desc().dims(), dt::u8, tag::any) : s.src.get_desc();
    s.any_dst = memory::desc(s.dst_dims, s.logits ? dt::f32 : dt::u8, tag::any);
    return s;
  }

  // Layer i's input into the layout (and, for the network input, the u8 codes) the primitive takes.
  void take_src(LayerPlan& plan, Start& s, const memory::desc& want, std::size_t i) {
    if (want == s.src.get_desc()) return;
    const memory converted = buffers_.take(i, i, want);
    dnnl::primitive_attr attr;
    if (s.first) {
      attr.set_output_scales(0, {1.0f / s.in_q.scale});
      attr.set_zero_points(DNNL_ARG_DST, 0, {s.in_q.zero_point});
    }
    plan.before = Step{dnnl::reorder(s.src, converted, attr), {{DNNL_ARG_FROM, s.src}, {DNNL_ARG_TO, converted}}};
    s.src = converted;
  }

  // conv or fc.
  Out weighted(const Layer& l, const Io& io) {
    Start s = start(l, io);
    LayerPlan& plan = (*plans_)[io.index];
    auto& engine = onednn_engine();
    const bool conv = l.kind == LayerKind::conv;
    const S8Weights w = quantize_weights(l);
    const float out_scale = s.logits ? 1.0f : s.out_q.scale;
    std::vector<float> scales(w.scales.size()), bias(w.scales.size());
    for (std::size_t k = 0; k < scales.size(); ++k) {
      scales[k] = s.in_q.scale * w.scales[k] / out_scale;
      bias[k] = l.bias[k] / (s.in_q.scale * w.scales[k]);
    }
    dnnl::primitive_attr attr;
    attr.set_output_scales(1 << 1, scales);  // per output channel: dim 1 of dst
    if (s.in_q.zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::post_ops ops;
    memory::desc dst_desc = s.any_dst;
    std::optional<memory> dst;
    if (io.residual != nullptr) {
      // In place into the shortcut's buffer, as cpu_onednn does.
      require_shortcut_unread(net_, io.index, "cpu_onednn_s8");
      DLB_REQUIRE(!s.logits && s.out_q.zero_point == 0,
                  "cpu_onednn_s8: " + l.name + " adds into a shortcut but its output range is not >= 0");
      dst = io.residual->m;
      dst_desc = dst->get_desc();
      ops.append_sum(io.residual->q.scale / s.out_q.scale, io.residual->q.zero_point);
    } else if (!s.logits && s.out_q.zero_point != 0) {
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
      if (!dst) dst = buffers_.take(io.index, io.index, pd.dst_desc());
      kernels_.insert(pd.impl_info_str());
    };
    if (conv) {
      const memory::dims w_dims{l.k, l.c, l.window, l.window};
      const memory::desc user_w(w_dims, dt::s8, tag::oihw);
      // The primitive descriptor of the kernel `skip` places after oneDNN's
      // first for this conv, or none where its list ends first. (The list
      // is walked here, while the op descriptor it points to is alive.)
      const auto make_nth = [&](const memory::desc& from,
                                int skip) -> std::optional<dnnl::convolution_forward::primitive_desc> {
        const dnnl::convolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, from,
            memory::desc(w_dims, dt::s8, tag::any), memory::desc({l.k}, dt::f32, tag::a), dst_desc,
            {l.stride, l.stride}, {l.pad, l.pad}, {l.pad, l.pad});
        dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
        for (int i = 0; i < skip; ++i)
          if (!pd.next_impl()) return std::nullopt;
        return pd;
      };
      auto pd = not_reference([&](const memory::desc& from) { return *make_nth(from, 0); }, s.src_desc);
      // oneDNN lists brgconv first for these convs, but on the Zen 4 VM its
      // jit_int8 kernel, next in its list, ran every resnet20 int8 conv
      // faster (one thread, batch 64: 17% on the 16-channel stage, 6% on
      // the 64-channel one): the next kernel of the same ISA that reads and
      // writes the same layouts is timed against the first here, once, and
      // the faster kept (S8Kernels::faster; the tests force either).
      const auto other = kernels_choice_ == S8Kernels::first ? std::nullopt : next_kernel(make_nth, pd);
      if (other && kernels_choice_ == S8Kernels::next) {
        pd = *other;
      } else if (other) {
        const auto steps_of = [&](const dnnl::convolution_forward::primitive_desc& candidate) {
          const memory src = candidate.src_desc() == s.src.get_desc() ? s.src : memory(candidate.src_desc(), engine);
          const memory out = dst ? *dst : memory(candidate.dst_desc(), engine);
          return std::vector<Step>{Step{dnnl::convolution_forward(candidate),
                                        conv_args(s, l, src, s8_weights(candidate.weights_desc(), user_w, w.values),
                                                  owned_copy(candidate.bias_desc(), bias), out)}};
        };
        const std::vector<Step> steps[2] = {steps_of(*other), steps_of(pd)};
        const auto zero = [&] {
          zero_activations(steps[0]);
          zero_activations(steps[1]);
        };
        if (first_is_faster(zero, [&] { run_steps(steps[0]); }, [&] { run_steps(steps[1]); })) pd = *other;
      }
      adopt(pd, user_w);
      primitive = dnnl::convolution_forward(pd);
    } else {
      const FcWeights fc = fc_weights(l, s.src);
      const auto pd = fc_pd(l, s.src_desc, fc, dt::s8, dst_desc, attr);
      adopt(pd, memory::desc(fc.dims, dt::s8, fc.user_tag));
      primitive = dnnl::inner_product_forward(pd);
    }
    take_src(plan, s, pd_src, io.index);
    plan.main = Step{primitive, conv_args(s, l, s.src, weights, bias_mem, *dst)};
    return {{*dst, s.out_q}, call(io.index)};
  }

  // A conv or fc's arguments: its memories and the zero points it reads at run time.
  static std::unordered_map<int, memory> conv_args(const Start& s, const Layer& l, const memory& src,
                                                   const memory& weights, const memory& bias, const memory& dst) {
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    if (s.in_q.zero_point != 0) args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zero_point_memory(s.in_q.zero_point);
    if (l.residual < 0 && !s.logits && s.out_q.zero_point != 0)
      args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = zero_point_memory(s.out_q.zero_point);
    return args;
  }

  // The first kernel after pd's in oneDNN's list for the same problem that
  // reads and writes pd's layouts (so the layers around it do not change)
  // and is written for the same ISA, if there is one before the reference
  // kernels; make_nth(src, n) as in weighted(). The same ISA: the first
  // kernel's is one whose int8 sums are exact (onednn_int8_exact, VNNI or
  // AMX), and an older one's may not be (on AVX2 its 16-bit pair sums
  // saturate): forced onto resnet20's conv1, the next kernel,
  // jit_uni_int8:avx2, failed the pass's validation (max_rel_err 0.19).
  template <class MakeNth>
  static std::optional<dnnl::convolution_forward::primitive_desc> next_kernel(
      const MakeNth& make_nth, const dnnl::convolution_forward::primitive_desc& pd) {
    const std::string first = pd.impl_info_str();
    const auto isa = [](const std::string& name) { return name.substr(name.find(':') + 1); };
    for (int skip = 1; skip < 16; ++skip) {
      const auto other = make_nth(pd.src_desc(), skip);
      if (!other) return std::nullopt;
      const std::string name = other->impl_info_str();
      if (name.rfind("ref", 0) == 0) return std::nullopt;
      if (name != first && isa(name) == isa(first) && other->src_desc() == pd.src_desc() &&
          other->dst_desc() == pd.dst_desc())
        return other;
    }
    return std::nullopt;
  }

  Out pool(const Layer& l, const Io& io) {
    Start s = start(l, io);
    LayerPlan& plan = (*plans_)[io.index];
    DLB_REQUIRE(!s.first && !s.logits, "cpu_onednn_s8: " + l.name + " cannot start or end the network");
    const auto pd = pool_pd(l, s.src_desc, memory::desc(s.dst_dims, dt::u8, tag::any));
    take_src(plan, s, pd.src_desc(), io.index);
    const memory y = buffers_.take(io.index, io.index, pd.dst_desc());
    plan.main = Step{dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, s.src}, {DNNL_ARG_DST, y}}};
    return {{y, s.out_q}, call(io.index)};
  }

  Run call(std::size_t i) const {
    return [plans = plans_, i] { (*plans)[i].run(); };
  }

  const S8Kernels kernels_choice_;
  const Network& net_;
  const std::int64_t n_;
  const ActivationQuant quant_;
  const memory user_y_;
  std::shared_ptr<std::vector<LayerPlan>> plans_;
  std::set<std::string> kernels_;
  OutputBuffers buffers_{net_};
};

}  // namespace

Run prepare_cpu_onednn_s8(const NetArgs& args, S8Kernels kernels) {
  try {
    OnednnS8Layers backend(args, kernels);
    return walk_graph(args, backend, backend.input(args.x));
  } catch (const dnnl::error& e) {
    throw Unsupported(std::string("oneDNN has no int8 implementation for this network here: ") + e.what());
  }
}

Run prepare_net_cpu_onednn_s8(const NetArgs& args, const Exec&) { return prepare_cpu_onednn_s8(args, S8Kernels::faster); }

}  // namespace dlb::nn
