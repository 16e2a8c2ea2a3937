// The GPU training step's schedule and its host twin (train_plan.h).
#include "kernels/nn/train/train_plan.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "kernels/common/error.h"
#include "kernels/nn/train/plain_loops.h"
#include "kernels/nn/train/train_walk.h"

namespace dlb::nn {

namespace {
std::int64_t aligned(std::int64_t n) { return (n + TrainPlan::kAlign - 1) / TrainPlan::kAlign * TrainPlan::kAlign; }
}  // namespace

TrainPlan::TrainPlan(const Network& net, std::int64_t batch)
    : net_(net), batch_(batch), params_(trainable_params(net)), flow_(train_flow(net)) {
  DLB_REQUIRE(batch >= 1, "GPU training step: batch " + std::to_string(batch) + " is not positive");
  const auto& ls = net.layers;
  logits_ = flow_.logits;
  weight_of_.assign(ls.size(), -1);
  bias_of_.assign(ls.size(), -1);
  gamma_of_.assign(ls.size(), -1);
  beta_of_.assign(ls.size(), -1);
  for (std::size_t j = 0; j < params_.size(); ++j) {
    param_offset_.push_back(param_floats_);
    param_floats_ += aligned(params_[j].size());
    const TrainParam& p = params_[j];
    (p.bn ? (p.bias ? beta_of_ : gamma_of_) : (p.bias ? bias_of_ : weight_of_))[p.layer] = static_cast<int>(j);
  }
  out_offset_.assign(ls.size(), -1);
  route_offset_.assign(ls.size(), -1);
  z_offset_.assign(ls.size(), -1);
  bn_offset_.assign(ls.size(), -1);
  running_offset_.assign(ls.size(), -1);
  bn_slices_.assign(ls.size(), 0);
  std::int64_t largest = ls[logits_].out_size();
  for (std::size_t i = 0; i <= logits_; ++i) {
    const Layer& l = ls[i];
    out_offset_[i] = act_floats_;
    act_floats_ += aligned(batch * l.out_size());
    if (l.kind == LayerKind::max_pool) {
      route_offset_[i] = route_bytes_;
      route_bytes_ += aligned(batch * l.out_size());
    }
    if (gamma_of_[i] >= 0) {
      z_offset_[i] = act_floats_;
      act_floats_ += aligned(batch * l.out_size());
      bn_offset_[i] = bn_floats_;
      bn_floats_ += aligned(tg::kBnStats * l.k);
      running_offset_[i] = running_floats_;
      running_floats_ += aligned(2 * l.k);
      bn_slices_[i] = tg::bn_slices(batch * l.oh * l.ow);
      if (bn_slices_[i] > 1) bn_part_doubles_ = std::max(bn_part_doubles_, 2 * l.k * bn_slices_[i]);
    }
    // Backward's buffers hold the gradient of every layer's output and input.
    largest = std::max({largest, l.out_size(), l.in_size()});
  }
  logp_offset_ = act_floats_;
  act_floats_ += aligned(batch * classes());
  dbuf_floats_ = aligned(batch * largest);
  assign_gradient_buffers();
}

// As the CPU steps': the gradient of layer j's output is written first by
// the last layer that reads it (the loss for the logits: the walk's flow)
// and read by layer j's own backward; layers whose intervals do not overlap
// share a buffer (share_gradient_buffers). The first writer overwrites,
// later ones add, which only a conv's input gradient and a join can. And
// which max pools apply the ReLU mask of the layer they read (its only
// reader).
void TrainPlan::assign_gradient_buffers() {
  const auto& ls = net_.layers;
  const auto n = static_cast<int>(logits_) + 1;
  for (int i = 0; i < n; ++i) {
    const Layer& l = ls[static_cast<std::size_t>(i)];
    if (l.input >= 0 && flow_.first_write[static_cast<std::size_t>(l.input)] != i && l.kind != LayerKind::conv)
      throw Error("GPU training step: " + net_.name + " layer '" + l.name + "': a " + layer_kind_name(l.kind) +
                  " reading an output that another layer also reads is not supported");
  }
  // A max pool applies the ReLU mask of the conv or fc it reads, where it is that layer's only reader.
  pool_masks_.assign(static_cast<std::size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const Layer& l = ls[static_cast<std::size_t>(i)];
    if (l.kind != LayerKind::max_pool || l.input < 0) continue;
    const auto below = static_cast<std::size_t>(l.input);
    const Layer& b = ls[below];
    pool_masks_[below] = (b.kind == LayerKind::conv || b.kind == LayerKind::fc) && b.relu && flow_.readers[below] == 1;
  }
  std::vector<int> read(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) read[static_cast<std::size_t>(j)] = j;  // layer j's own backward
  std::size_t buffers = 0;
  const std::vector<int> buf = share_gradient_buffers(flow_.first_write, read, buffers);
  dbuf_of_.assign(ls.size(), 0);
  for (int j = 0; j < n; ++j) dbuf_of_[static_cast<std::size_t>(j)] = std::max(buf[static_cast<std::size_t>(j)], 0);
  dbuf_count_ = static_cast<std::int64_t>(buffers);
}

std::vector<float> TrainPlan::initial_params() const {
  std::vector<float> p(static_cast<std::size_t>(param_floats_), 0.0f);
  for (std::size_t j = 0; j < params_.size(); ++j) {
    const auto values = param_values(net_, params_[j]);
    std::copy(values.begin(), values.end(), p.begin() + param_offset_[j]);
  }
  return p;
}

std::vector<float> TrainPlan::initial_running() const {
  std::vector<float> r(static_cast<std::size_t>(running_floats_), 0.0f);
  for (std::size_t i = 0; i < running_offset_.size(); ++i) {
    if (running_offset_[i] < 0) continue;
    const Layer& l = net_.layers[i];
    float* mean = r.data() + running_offset_[i];
    float* var = mean + l.k;
    std::fill(var, var + l.k, 1.0f);
    if (static_cast<std::int64_t>(l.raw.bn_mean.size()) == l.k)
      std::copy(l.raw.bn_mean.begin(), l.raw.bn_mean.end(), mean);
    if (static_cast<std::int64_t>(l.raw.bn_var.size()) == l.k)
      std::copy(l.raw.bn_var.begin(), l.raw.bn_var.end(), var);
  }
  return r;
}

TrainMemory TrainPlan::memory() const {
  TrainMemory m;
  m.weights = m.gradients = m.optimizer = param_floats_ * static_cast<std::int64_t>(sizeof(float));
  m.activations = (act_floats_ + bn_floats_ + running_floats_) * static_cast<std::int64_t>(sizeof(float)) +
                  route_bytes_ + batch_ * static_cast<std::int64_t>(sizeof(double));
  m.workspace = dbuf_count_ * dbuf_floats_ * static_cast<std::int64_t>(sizeof(float)) +
                bn_part_doubles_ * static_cast<std::int64_t>(sizeof(double));
  return m;
}

const float* TrainPlan::input_of(const TrainArenas& a, const float* x, std::size_t i) const {
  const int in = net_.layers[i].input;
  return in < 0 ? x : a.acts + out_offset_[static_cast<std::size_t>(in)];
}

// The plan as a backend of the training walk (train_walk.h): one function
// per layer kind, each layer's calls in both directions on the given ops,
// arenas and batch; conv and fc share their arithmetic's plan (the
// library's call is the one difference).
struct TrainPlan::Layers final : TrainLayers {
  const TrainPlan& p;
  TrainOps& ops;
  const TrainArenas& a;
  const float* x;
  const std::uint8_t* labels;

  Layers(const TrainPlan& plan, TrainOps& o, const TrainArenas& arenas, const float* in, const std::uint8_t* l)
      : p(plan), ops(o), a(arenas), x(in), labels(l) {}

  TrainCalls linear(const Layer& l, const TrainIo& io, bool is_conv) {
    const std::size_t i = io.index;
    const float* in = p.input_of(a, x, i);
    float* y = p.out(a, i);
    float* dy = p.grad_of(a, static_cast<int>(i));
    TrainCalls c;
    c.forward = [this, &l, i, in, y, is_conv] {
      ops.mark(i, TrainPart::forward);
      const float* w = p.param(a.params, p.weight_of_[i]);
      const float* bias = p.param(a.params, p.bias_of_[i]);
      const float* res = l.residual >= 0 ? p.out(a, static_cast<std::size_t>(l.residual)) : nullptr;
      const std::int64_t count = p.batch_ * l.out_size(), plane = l.oh * l.ow;
      if (p.gamma_of_[i] >= 0) {
        float* z = a.acts + p.z_offset_[i];
        float* stats = a.bn + p.bn_offset_[i];
        ops.conv_forward(i, l, in, w, z);
        if (bias != nullptr) ops.run(tg::BiasAct{z, bias, count, plane, l.k, 0});
        ops.mark(i, TrainPart::batch_norm);
        ops.run(tg::BnStats{z, p.param(a.params, p.gamma_of_[i]), p.param(a.params, p.beta_of_[i]), stats,
                            a.running + p.running_offset_[i], p.batch_, l.k, plane, l.raw.bn_eps, l.raw.bn_momentum,
                            a.bn_parts, p.bn_slices_[i]});
        ops.run(tg::BnApply{z, y, stats, res, count, l.k, plane, l.relu ? 1 : 0});
        return;
      }
      if (is_conv) ops.conv_forward(i, l, in, w, y);
      else ops.fc_forward(i, l, in, w, y);
      if (bias != nullptr || l.relu || res != nullptr)
        ops.run(tg::BiasAct{y, bias, count, plane, l.k, l.relu ? 1 : 0, res});
    };
    // bwd_w, after what both need (ReLU's mask, the join, batch-norm's
    // backward): the weights' and the bias's gradients.
    c.backward_weights = [this, &l, i, in, dy, io, is_conv] {
      const std::int64_t count = p.batch_ * l.out_size(), plane = l.oh * l.ow;
      ops.mark(i, TrainPart::backward_data);
      if (l.relu && p.pool_masks_[i] == 0) ops.run(tg::ReluBack{dy, p.out(a, i), count});
      if (l.residual >= 0)
        ops.run(tg::AddGrad{dy, p.grad_of(a, l.residual), count, io.add_to_residual ? 1 : 0});
      if (p.gamma_of_[i] >= 0) {
        const float* z = a.acts + p.z_offset_[i];
        float* stats = a.bn + p.bn_offset_[i];
        ops.mark(i, TrainPart::batch_norm_backward);
        ops.run(tg::BnBackStats{dy, z, stats, p.param(a.grads, p.gamma_of_[i]), p.param(a.grads, p.beta_of_[i]),
                                p.batch_, l.k, plane, a.bn_parts, p.bn_slices_[i]});
        ops.run(tg::BnBackData{dy, z, stats, count, l.k, plane});
      }
      float* dw = p.param(a.grads, p.weight_of_[i]);
      ops.mark(i, TrainPart::backward_weights);
      if (is_conv) ops.conv_backward_filter(i, l, in, dy, dw);
      else ops.fc_backward_weights(i, l, in, dy, dw);
      if (float* db = p.param(a.grads, p.bias_of_[i]); db != nullptr)
        ops.run(tg::BiasGrad{dy, db, p.batch_, l.k, plane});
    };
    // bwd_d: the input's gradient.
    c.backward_data = [this, &l, i, dy, io, is_conv] {
      ops.mark(i, TrainPart::backward_data);
      if (!io.need_dx) return;
      const float* w = p.param(a.params, p.weight_of_[i]);
      float* to = p.grad_of(a, l.input);
      if (is_conv) ops.conv_backward_data(i, l, w, dy, to, io.add_to_input);
      else ops.fc_backward_data(i, l, w, dy, to, io.add_to_input);
    };
    return c;
  }
  TrainCalls conv(const Layer& l, const TrainIo& io) override { return linear(l, io, true); }
  TrainCalls fc(const Layer& l, const TrainIo& io) override { return linear(l, io, false); }
  TrainCalls max_pool(const Layer& l, const TrainIo& io) override {
    const std::size_t i = io.index;
    TrainCalls c;
    c.forward = [this, &l, i, in = p.input_of(a, x, i), y = p.out(a, i)] {
      ops.mark(i, TrainPart::forward);
      ops.run(tg::MaxPool{in, y, a.routes + p.route_offset_[i], p.batch_ * l.c, l.h, l.w, l.oh, l.ow, l.window,
                          l.stride});
    };
    c.backward_data = [this, &l, i, io] {
      ops.mark(i, TrainPart::backward_data);
      if (!io.need_dx) return;
      const auto below = static_cast<std::size_t>(l.input);
      ops.run(tg::MaxPoolBack{p.grad_of(a, static_cast<int>(i)), a.routes + p.route_offset_[i],
                              p.pool_masks_[below] != 0 ? p.out(a, below) : nullptr, p.grad_of(a, l.input),
                              p.batch_ * l.c, l.h, l.w, l.oh, l.ow, l.window, l.stride});
    };
    return c;
  }
  TrainCalls global_avg_pool(const Layer& l, const TrainIo& io) override {
    const std::size_t i = io.index;
    TrainCalls c;
    c.forward = [this, &l, i, in = p.input_of(a, x, i), y = p.out(a, i)] {
      ops.mark(i, TrainPart::forward);
      ops.run(tg::AvgPool{in, y, p.batch_ * l.c, l.h * l.w});
    };
    c.backward_data = [this, &l, i, io] {
      ops.mark(i, TrainPart::backward_data);
      if (io.need_dx) ops.run(tg::AvgPoolBack{p.grad_of(a, static_cast<int>(i)), p.grad_of(a, l.input), p.batch_ * l.c, l.h * l.w});
    };
    return c;
  }
  TrainCalls loss(const TrainIo&) override {
    TrainCalls c;
    c.forward = [this] {
      ops.mark(p.loss_layer(), TrainPart::forward);
      ops.run(tg::LogSoftmaxNll{p.out(a, p.logits_), a.acts + p.logp_offset_, labels, a.loss, p.batch_, p.classes()});
      ops.mark(p.loss_layer(), TrainPart::end);
    };
    c.backward_data = [this] {
      ops.mark(p.loss_layer(), TrainPart::backward_data);
      ops.run(tg::NllGrad{a.acts + p.logp_offset_, labels, p.grad_of(a, static_cast<int>(p.logits_)), p.batch_,
                          p.classes(), 1.0f / static_cast<float>(p.batch_)});
    };
    return c;
  }
};

void TrainPlan::forward(TrainOps& ops, const TrainArenas& a, const float* x, const std::uint8_t* labels) const {
  Layers layers(*this, ops, a, x, labels);
  walk_train(net_, flow_, layers).forward();
}

void TrainPlan::backward(TrainOps& ops, const TrainArenas& a, const float* x, const std::uint8_t* labels) const {
  Layers layers(*this, ops, a, x, labels);
  walk_train(net_, flow_, layers).backward();
  ops.mark(0, TrainPart::end);
}

void TrainPlan::update(TrainOps& ops, const TrainArenas& a, const Sgd& sgd) const {
  ops.mark(net_.layers.size() - 1, TrainPart::update);
  ops.run(tg::Sgd{a.params, a.grads, a.velocity, param_floats_, static_cast<float>(sgd.lr),
                  static_cast<float>(sgd.momentum), static_cast<float>(sgd.weight_decay)});
  ops.mark(net_.layers.size() - 1, TrainPart::end);
}

const char* train_part_name(TrainPart part) {
  switch (part) {
    case TrainPart::forward: return "forward";
    case TrainPart::batch_norm: return "batch_norm";
    case TrainPart::backward_data: return "backward_data";
    case TrainPart::batch_norm_backward: return "batch_norm_backward";
    case TrainPart::backward_weights: return "backward_weights";
    case TrainPart::update: return "update";
    case TrainPart::end: return "end";
  }
  return "unknown";
}

std::string train_part_counter(std::size_t layer, TrainPart part) {
  if (part == TrainPart::update) return "update_us";
  return "layer_us." + std::to_string(layer) + "." + train_part_name(part);
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<std::pair<std::string, double>> train_profile_counters(std::span<const std::vector<TrainStamp>> steps) {
  DLB_REQUIRE(!steps.empty(), "training profile: no profiled steps");
  const std::vector<TrainStamp>& first = steps.front();
  DLB_REQUIRE(!first.empty() && first.back().part == TrainPart::end,
              "training profile: a step's marks do not end with the end of a phase");
  // The parts in counter order: by layer, then TrainPart's order (update last).
  std::vector<std::pair<std::size_t, TrainPart>> keys;
  for (const TrainStamp& s : first)
    if (s.part != TrainPart::end)
      keys.emplace_back(s.part == TrainPart::update ? SIZE_MAX : s.layer, s.part);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::vector<double>> us(keys.size());
  std::vector<double> total;
  for (std::size_t n = 0; n < steps.size(); ++n) {
    const std::vector<TrainStamp>& step = steps[n];
    DLB_REQUIRE(step.size() == first.size(), "training profile: step " + std::to_string(n) + " has " +
                                                 std::to_string(step.size()) + " marks, step 0 " +
                                                 std::to_string(first.size()));
    std::vector<double> sum(keys.size(), 0.0);
    double all = 0;
    for (std::size_t j = 0; j < step.size(); ++j) {
      const TrainStamp& s = step[j];
      DLB_REQUIRE(s.layer == first[j].layer && s.part == first[j].part,
                  "training profile: mark " + std::to_string(j) + " of step " + std::to_string(n) + " (" +
                      train_part_counter(s.layer, s.part) + ") differs from step 0's (" +
                      train_part_counter(first[j].layer, first[j].part) + ")");
      if (j + 1 < step.size())
        DLB_REQUIRE(step[j + 1].us >= s.us, "training profile: marks " + std::to_string(j) + " and " +
                                                std::to_string(j + 1) + " of step " + std::to_string(n) +
                                                " are out of order");
      if (s.part == TrainPart::end) continue;
      const double d = step[j + 1].us - s.us;  // the last mark is an end: j + 1 exists
      const auto key = std::make_pair(s.part == TrainPart::update ? SIZE_MAX : s.layer, s.part);
      sum[static_cast<std::size_t>(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin())] += d;
      all += d;
    }
    for (std::size_t k = 0; k < keys.size(); ++k) us[k].push_back(sum[k]);
    total.push_back(all);
  }
  std::vector<std::pair<std::string, double>> counters;
  for (std::size_t k = 0; k < keys.size(); ++k)
    counters.emplace_back(train_part_counter(keys[k].first, keys[k].second), median_of(us[k]));
  counters.emplace_back("profiled_us", median_of(total));
  counters.emplace_back("profile_steps", static_cast<double>(steps.size()));
  return counters;
}

// ------------------------------------------------------------------ host twin

namespace {

// The library calls as plain fp32 loops (plain_loops.h), the own kernels as their element
// functions over every element (bias_grad: the block's partial sums and
// combining tree, as the kernel runs them).
class HostOps final : public TrainOps {
 public:
  explicit HostOps(std::int64_t batch) : n_(batch) {}

  // Profiling (TwinTrainStep::profile): each mark stamped by the steady
  // clock into *stamps while it is set.
  std::vector<TrainStamp>* stamps = nullptr;
  void mark(std::size_t layer, TrainPart part) override {
    if (stamps == nullptr) return;
    const std::chrono::duration<double, std::micro> us = std::chrono::steady_clock::now().time_since_epoch();
    stamps->push_back({layer, part, us.count()});
  }

  void conv_forward(std::size_t, const Layer& l, const float* x, const float* w, float* y) override {
    plain::conv_forward(l, n_, x, w, y);
  }
  void conv_backward_filter(std::size_t, const Layer& l, const float* x, const float* dy, float* dw) override {
    plain::conv_backward_weights(l, n_, x, dy, dw);
  }
  // accumulate: the gradient into a buffer of its own, then added (as the
  // library's beta = 1: one more rounding where a fork's gradients meet).
  void conv_backward_data(std::size_t, const Layer& l, const float* w, const float* dy, float* out,
                          bool accumulate) override {
    plain::conv_backward_data(l, n_, w, dy, out, accumulate, scratch_);
  }
  void fc_forward(std::size_t, const Layer& l, const float* x, const float* w, float* y) override {
    plain::fc_forward(l, n_, x, w, y);
  }
  void fc_backward_weights(std::size_t, const Layer& l, const float* x, const float* dy, float* dw) override {
    plain::fc_backward_weights(l, n_, x, dy, dw);
  }
  void fc_backward_data(std::size_t, const Layer& l, const float* w, const float* dy, float* dx,
                        bool accumulate) override {
    plain::fc_backward_data(l, n_, w, dy, dx, accumulate);
  }

  void run(const tg::BiasAct& p) override { each(p.count, [&](std::int64_t i) { tg::bias_act(p, i); }); }
  void run(const tg::MaxPool& p) override { each(p.count(), [&](std::int64_t i) { tg::max_pool(p, i); }); }
  void run(const tg::MaxPoolBack& p) override { each(p.count(), [&](std::int64_t i) { tg::max_pool_back(p, i); }); }
  void run(const tg::ReluBack& p) override { each(p.count, [&](std::int64_t i) { tg::relu_back(p, i); }); }
  void run(const tg::AvgPool& p) override { each(p.planes, [&](std::int64_t i) { tg::avg_pool(p, i); }); }
  void run(const tg::AvgPoolBack& p) override {
    each(p.planes * p.plane, [&](std::int64_t i) { tg::avg_pool_back(p, i); });
  }
  void run(const tg::LogSoftmaxNll& p) override { each(p.rows, [&](std::int64_t i) { tg::log_softmax_nll(p, i); }); }
  void run(const tg::NllGrad& p) override { each(p.rows * p.classes, [&](std::int64_t i) { tg::nll_grad(p, i); }); }
  void run(const tg::BiasGrad& p) override {
    float part[tg::kBiasGradThreads];
    for (std::int64_t channel = 0; channel < p.k; ++channel) {
      for (int t = 0; t < tg::kBiasGradThreads; ++t) part[t] = tg::bias_grad_partial(p, channel, t);
      for (int half = tg::kBiasGradThreads / 2; half > 0; half /= 2)
        for (int t = 0; t < half; ++t) tg::tree_step(part, t, half);
      p.db[channel] = part[0];
    }
  }
  void run(const tg::Sgd& p) override { each(p.count, [&](std::int64_t i) { tg::sgd(p, i); }); }
  void run(const tg::BnStats& p) override { tg::bn_sums_on_host(p, tg::bn_stats_partial, tg::bn_stats_finish); }
  void run(const tg::BnApply& p) override { each(p.count, [&](std::int64_t i) { tg::bn_apply(p, i); }); }
  void run(const tg::BnBackStats& p) override {
    tg::bn_sums_on_host(p, tg::bn_back_stats_partial, tg::bn_back_stats_finish);
  }
  void run(const tg::BnBackData& p) override { each(p.count, [&](std::int64_t i) { tg::bn_back_data(p, i); }); }
  void run(const tg::AddGrad& p) override { each(p.count, [&](std::int64_t i) { tg::add_grad(p, i); }); }

 private:
  template <class F>
  static void each(std::int64_t count, F&& f) {
    for (std::int64_t i = 0; i < count; ++i) f(i);
  }
  std::int64_t n_;
  std::vector<float> scratch_;
};

}  // namespace

struct TwinTrainStep::Impl {
  Impl(const Network& net, std::int64_t batch, Sgd s)
      : plan(net, batch), sgd(s), ops(batch), params(plan.initial_params()),
        grads(params.size(), 0.0f), velocity(params.size(), 0.0f),
        acts(static_cast<std::size_t>(plan.act_floats()), 0.0f),
        routes(static_cast<std::size_t>(plan.route_bytes()), 0),
        loss(static_cast<std::size_t>(batch), 0.0),
        dbuf(static_cast<std::size_t>(plan.dbuf_count() * plan.dbuf_floats()), 0.0f),
        bn(static_cast<std::size_t>(plan.bn_floats()), 0.0f), running(plan.initial_running()),
        bn_parts(static_cast<std::size_t>(plan.bn_part_doubles()), 0.0) {
    arenas = {params.data(), grads.data(), velocity.data(), acts.data(), routes.data(), loss.data(),
              dbuf.data(), bn.data(), running.data(), bn_parts.data()};
  }
  TrainPlan plan;
  Sgd sgd;
  HostOps ops;
  std::vector<float> params, grads, velocity, acts;
  std::vector<std::uint8_t> routes;
  std::vector<double> loss;
  std::vector<float> dbuf, bn, running;
  std::vector<double> bn_parts;
  TrainArenas arenas;
  const float* x = nullptr;
  const std::uint8_t* labels = nullptr;
  bool forward_done = false, backward_done = false;

  std::span<const float> running_stat(std::size_t layer, int which) const {
    const std::int64_t at = plan.running_offset(layer);
    if (at < 0) return {};
    const auto k = static_cast<std::size_t>(plan.network().layers[layer].k);
    return std::span<const float>(running).subspan(static_cast<std::size_t>(at) + which * k, k);
  }
  std::span<const float> tensor(const std::vector<float>& arena, std::size_t j) const {
    return std::span<const float>(arena).subspan(static_cast<std::size_t>(plan.param_offset(j)),
                                                 static_cast<std::size_t>(plan.params().at(j).size()));
  }
};

TwinTrainStep::TwinTrainStep(const Network& net, std::int64_t batch, Sgd sgd)
    : impl_(std::make_unique<Impl>(net, batch, sgd)) {}
TwinTrainStep::~TwinTrainStep() = default;

double TwinTrainStep::forward(const float* x, const std::uint8_t* labels) {
  DLB_REQUIRE(x != nullptr, "training step: no input");
  check_labels(impl_->plan.network(), labels, impl_->plan.batch());
  impl_->x = x;
  impl_->labels = labels;
  impl_->plan.forward(impl_->ops, impl_->arenas, x, labels);
  impl_->forward_done = true;
  impl_->backward_done = false;
  double sum = 0;
  for (const double l : impl_->loss) sum += l;
  return sum / static_cast<double>(impl_->plan.batch());
}

void TwinTrainStep::backward() {
  DLB_REQUIRE(impl_->forward_done, "training step: backward without a forward");
  impl_->plan.backward(impl_->ops, impl_->arenas, impl_->x, impl_->labels);
  impl_->backward_done = true;
}

void TwinTrainStep::update() {
  DLB_REQUIRE(impl_->backward_done, "training step: update without a backward");
  impl_->plan.update(impl_->ops, impl_->arenas, impl_->sgd);
  impl_->backward_done = false;
}

std::vector<std::pair<std::string, double>> TwinTrainStep::profile(const float* x, const std::uint8_t* labels,
                                                                   int steps) {
  DLB_REQUIRE(steps >= 1, "training profile: " + std::to_string(steps) + " steps; at least 1");
  std::vector<std::vector<TrainStamp>> stamps(static_cast<std::size_t>(steps));
  for (auto& step : stamps) {
    impl_->ops.stamps = &step;
    try {
      forward(x, labels);
      backward();
      update();
    } catch (...) {
      impl_->ops.stamps = nullptr;
      throw;
    }
    impl_->ops.stamps = nullptr;
  }
  return train_profile_counters(stamps);
}

const TrainPlan& TwinTrainStep::plan() const { return impl_->plan; }
std::span<const float> TwinTrainStep::param(std::size_t j) const { return impl_->tensor(impl_->params, j); }
std::span<const float> TwinTrainStep::grad(std::size_t j) const { return impl_->tensor(impl_->grads, j); }
std::span<const float> TwinTrainStep::velocity(std::size_t j) const { return impl_->tensor(impl_->velocity, j); }
std::span<const float> TwinTrainStep::running_mean(std::size_t layer) const { return impl_->running_stat(layer, 0); }
std::span<const float> TwinTrainStep::running_var(std::size_t layer) const { return impl_->running_stat(layer, 1); }
std::span<const float> TwinTrainStep::log_probs() const {
  return std::span<const float>(impl_->acts).subspan(static_cast<std::size_t>(impl_->plan.logp_offset()),
                                                     static_cast<std::size_t>(impl_->plan.batch() * impl_->plan.classes()));
}

}  // namespace dlb::nn
