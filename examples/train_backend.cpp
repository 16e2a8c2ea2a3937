// The recipe "A training backend" of docs/architecture.md, compiled and run
// by ctest (example_train_backend) so that it cannot drift from the code: a
// training backend is a TrainStep that is also the walk's TrainLayers
// (kernels/nn/train/train_walk.h), one function per layer kind returning
// that layer's calls in every direction, and a row of the training table
// (kTrainVariants, kernels/nn/train/train_variants.cpp) that makes it;
// test_docs checks that the recipe's lines are these. cpu_naive here is the
// whole step in plain loops (NCHW, one thread, fp32), checked as bench
// checks every training row before timing it (TrainCase::validate: every
// gradient against the double reference within the row's bound) on every
// network it takes, then a few steps whose loss must go down and a profile
// that must name every layer's directions; a planted step that skips the
// ReLU mask in backward must be refused by the same check.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bench/cases/nn/train/train_case.h"
#include "examples/example_checks.h"
#include "kernels/common/error.h"
#include "kernels/nn/train/train.h"
#include "kernels/nn/train/train_variants.h"
#include "kernels/nn/train/plain_loops.h"
#include "kernels/nn/train/walked_step.h"

namespace dlb::nn {
namespace {

// cpu_naive's need: no batch-norm and no residual join (its conv refuses
// them by layer name; every stride and pad it takes).
bool plain_layer_chain(const Network& net) {
  for (const auto& l : net.layers)
    if (l.kind == LayerKind::conv && (l.residual >= 0 || !l.raw.bn_name.empty())) return false;
  return true;
}

// kPlanted: backward skips the ReLU mask (the gradient flows where the
// output was clamped to 0), an error the validation must catch.
template <bool kPlanted>
class NaiveStep final : public PlainParamsStep {
 public:
  NaiveStep(const Network& net, std::int64_t batch, Sgd sgd)
      : PlainParamsStep(net, batch, sgd, "training step cpu_naive") {
    layers_.resize(flow_.logits + 1);
    for (std::size_t j = 0; j < params_.size(); ++j) {
      PerLayer& s = layers_[params_[j].layer];
      if (!params_[j].bn) (params_[j].bias ? s.bias : s.weight) = static_cast<int>(j);  // conv() refuses batch-norm
    }
    // One output and one output-gradient buffer per layer (a backend that
    // wants less memory shares the gradients': share_gradient_buffers).
    for (std::size_t i = 0; i <= flow_.logits; ++i) {
      const auto size = static_cast<std::size_t>(batch_ * net_.layers[i].out_size());
      layers_[i].out.assign(size, 0.0f);
      layers_[i].dy.assign(size, 0.0f);
      if (net_.layers[i].kind == LayerKind::max_pool) layers_[i].arg.assign(size, 0);
    }
    walk();
  }

  // The walk's functions (train_walk.h): each layer's calls in every
  // direction, made once here; the walk runs them in its order.
  TrainCalls conv(const Layer& l, const TrainIo& io) override {
    if (!l.raw.bn_name.empty()) refuse(l, "batch-norm");
    if (l.residual >= 0) refuse(l, "a residual join");
    TrainCalls c;
    c.forward = [this, &l, io] { conv_forward(l, io); };
    c.backward_weights = [this, &l, io] { conv_backward_weights(l, io); };
    if (io.need_dx) c.backward_data = [this, &l, io] { conv_backward_data(l, io); };
    return c;
  }
  // The same through layer_calls (train_walk.h): forward, backward data
  // (kept where io.need_dx), backward weights.
  TrainCalls fc(const Layer& l, const TrainIo& io) override {
    return layer_calls(io, [this, &l, io] { fc_forward(l, io); }, [this, &l, io] { fc_backward_data(l, io); },
                       [this, &l, io] { fc_backward_weights(l, io); });
  }
  TrainCalls max_pool(const Layer& l, const TrainIo& io) override {
    return layer_calls(io, [this, &l, io] { max_pool_forward(l, io); }, [this, &l, io] { max_pool_backward(l, io); });
  }
  TrainCalls global_avg_pool(const Layer& l, const TrainIo& io) override {
    return layer_calls(io, [this, &l, io] { avg_pool_forward(l, io); }, [this, &l, io] { avg_pool_backward(l, io); });
  }
  TrainCalls loss(const TrainIo& logits) override {
    const std::size_t i = logits.index;
    TrainCalls c;
    c.forward = [this, i] { loss_forward(layers_[i].out.data()); };
    c.backward_data = [this, i] { loss_backward(layers_[i].dy.data()); };  // (softmax - onehot) / batch
    return c;
  }
  // The input of the forward that follows (walked_step.h keeps the order of
  // forward, backward and update, and runs SGD on the plain parameters).
  void set_input(const float* x) override { x_ = x; }

  TrainMemory memory() const override {
    TrainMemory m;
    count_params(m);
    const auto bytes = [](const auto& vec) { return static_cast<std::int64_t>(vec.size() * sizeof(vec[0])); };
    for (const auto& s : layers_) m.activations += bytes(s.out) + bytes(s.arg), m.workspace += bytes(s.dy);
    m.activations += bytes(log_probs_);
    return m;
  }
  std::span<const float> running_mean(std::size_t) const override { return {}; }  // no batch-norm
  std::span<const float> running_var(std::size_t) const override { return {}; }

 private:
  struct PerLayer {
    int weight = -1, bias = -1;      // parameter indices
    std::vector<float> out, dy;      // [batch, out_size]: the output (backward's ReLU mask) and its gradient
    std::vector<std::int64_t> arg;   // max_pool: where in the image's input each output's maximum is
  };

  [[noreturn]] void refuse(const Layer& l, const std::string& what) const {
    throw Unsupported("training step cpu_naive: " + net_.name + " layer " + l.name + ": " + what + " is not supported");
  }
  const float* input(const Layer& l) const {
    return l.input < 0 ? x_ : layers_[static_cast<std::size_t>(l.input)].out.data();
  }
  float* input_grad(const Layer& l) { return layers_[static_cast<std::size_t>(l.input)].dy.data(); }
  const float* w(const PerLayer& s) const { return p_[static_cast<std::size_t>(s.weight)].data(); }
  // Written by the first reader backward reaches, added to by the others.
  static void store(float& to, float value, bool add) { to = add ? to + value : value; }

  // The convolutions' and fc layers' sums are plain_loops.h's: each output
  // one fp32 sum, term after term, no longer than the sums
  // gradient_chain_length counts, so the row's bound is
  // gradient_tolerance's. The bias and ReLU are added here, each output
  // once.
  void bias_relu(const Layer& l, PerLayer& s) {
    const auto plane = static_cast<std::size_t>(l.out_size() / l.k);  // a conv's oh ow, an fc's 1
    const float* bias = s.bias >= 0 ? p_[static_cast<std::size_t>(s.bias)].data() : nullptr;
    for (std::size_t q = 0; q < s.out.size(); ++q) {
      float& y = s.out[q];
      if (bias != nullptr) y += bias[q / plane % static_cast<std::size_t>(l.k)];
      if (l.relu) y = std::max(y, 0.0f);
    }
  }
  void conv_forward(const Layer& l, const TrainIo& io) {
    PerLayer& s = layers_[io.index];
    plain::conv_forward(l, batch_, input(l), w(s), s.out.data());
    bias_relu(l, s);
  }
  // The ReLU mask on the output's gradient, in place (backward_data reads
  // it masked too).
  void mask(const Layer& l, PerLayer& s) {
    if (!l.relu || kPlanted) return;
    for (std::size_t q = 0; q < s.dy.size(); ++q)
      if (s.out[q] <= 0.0f) s.dy[q] = 0.0f;
  }
  // The bias's gradient: dy summed over the batch and the plane.
  void bias_backward(const Layer& l, const PerLayer& s) {
    if (s.bias < 0) return;
    const std::int64_t plane = l.out_size() / l.k;
    float* db = g(s.bias);
    for (std::int64_t k = 0; k < l.k; ++k) {
      float acc = 0.0f;
      for (std::int64_t n = 0; n < batch_; ++n)
        for (std::int64_t q = 0; q < plane; ++q) acc += s.dy[static_cast<std::size_t>((n * l.k + k) * plane + q)];
      db[k] = acc;
    }
  }
  // A conv's or fc layer's weight gradient: the ReLU mask on its output's
  // gradient, `sums` (plain_loops.h's) into the weights', the bias's.
  template <class Sums>
  void weights_backward(const Layer& l, const TrainIo& io, Sums sums) {
    PerLayer& s = layers_[io.index];
    mask(l, s);
    sums(l, batch_, input(l), s.dy.data(), g(s.weight));
    bias_backward(l, s);
  }
  void conv_backward_weights(const Layer& l, const TrainIo& io) {
    weights_backward(l, io, plain::conv_backward_weights);
  }
  void conv_backward_data(const Layer& l, const TrainIo& io) {
    const PerLayer& s = layers_[io.index];
    plain::conv_backward_data(l, batch_, w(s), s.dy.data(), input_grad(l), io.add_to_input, scratch_);
  }
  void fc_forward(const Layer& l, const TrainIo& io) {
    PerLayer& s = layers_[io.index];
    plain::fc_forward(l, batch_, input(l), w(s), s.out.data());
    bias_relu(l, s);
  }
  void fc_backward_weights(const Layer& l, const TrainIo& io) { weights_backward(l, io, plain::fc_backward_weights); }
  void fc_backward_data(const Layer& l, const TrainIo& io) {
    const PerLayer& s = layers_[io.index];
    plain::fc_backward_data(l, batch_, w(s), s.dy.data(), input_grad(l), io.add_to_input);
  }

  // Each output is its window's first maximum (as PyTorch routes its
  // gradient), kept as an index into the image's input.
  void max_pool_forward(const Layer& l, const TrainIo& io) {
    PerLayer& s = layers_[io.index];
    const float* x = input(l);
    for (std::int64_t plane = 0; plane < batch_ * l.c; ++plane)
      for (std::int64_t oy = 0; oy < l.oh; ++oy)
        for (std::int64_t ox = 0; ox < l.ow; ++ox) {
          std::int64_t best = -1;
          for (std::int64_t a = 0; a < l.window; ++a)
            for (std::int64_t b = 0; b < l.window; ++b) {
              const std::int64_t iy = oy * l.stride + a - l.pad, ix = ox * l.stride + b - l.pad;
              if (iy < 0 || iy >= l.h || ix < 0 || ix >= l.w) continue;
              const std::int64_t at = plane * l.h * l.w + iy * l.w + ix;
              if (best < 0 || x[at] > x[best]) best = at;
            }
          const auto q = static_cast<std::size_t>((plane * l.oh + oy) * l.ow + ox);
          s.out[q] = x[best];
          s.arg[q] = best;
        }
  }
  void max_pool_backward(const Layer& l, const TrainIo& io) {
    const PerLayer& s = layers_[io.index];
    float* dx = input_grad(l);
    if (!io.add_to_input) std::fill(dx, dx + batch_ * l.in_size(), 0.0f);
    for (std::size_t q = 0; q < s.dy.size(); ++q) dx[s.arg[q]] += s.dy[q];
  }

  void avg_pool_forward(const Layer& l, const TrainIo& io) {
    PerLayer& s = layers_[io.index];
    const float* x = input(l);
    const std::int64_t plane = l.h * l.w;
    for (std::int64_t q = 0; q < batch_ * l.c; ++q) {
      float acc = 0.0f;
      for (std::int64_t e = 0; e < plane; ++e) acc += x[q * plane + e];
      s.out[static_cast<std::size_t>(q)] = acc / static_cast<float>(plane);
    }
  }
  void avg_pool_backward(const Layer& l, const TrainIo& io) {
    const PerLayer& s = layers_[io.index];
    float* dx = input_grad(l);
    const std::int64_t plane = l.h * l.w;
    for (std::int64_t q = 0; q < batch_ * l.c; ++q)
      for (std::int64_t e = 0; e < plane; ++e)
        store(dx[q * plane + e], s.dy[static_cast<std::size_t>(q)] / static_cast<float>(plane), io.add_to_input);
  }

  std::vector<PerLayer> layers_;  // per layer up to the logits
  std::vector<float> scratch_;    // a conv's input gradient before it is added
  const float* x_ = nullptr;
};

std::unique_ptr<TrainStep> make_planted(const Network& net, std::int64_t batch, Sgd sgd) {
  return std::make_unique<NaiveStep<true>>(net, batch, sgd);
}

}  // namespace

std::unique_ptr<TrainStep> make_naive_train_step(const Network& net, std::int64_t batch, Sgd sgd) {
  return std::make_unique<NaiveStep<false>>(net, batch, sgd);
}

const TrainVariant kRows[] = {
    {"cpu_naive", Device::cpu, make_naive_train_step, nullptr, gradient_tolerance, plain_layer_chain, "plain loops, NCHW, one thread, fp32, SGD momentum 0.9"},
};
const TrainVariant kPlanted{"cpu_naive_planted", Device::cpu, make_planted, nullptr, gradient_tolerance,
                            plain_layer_chain, "cpu_naive without the ReLU mask in backward"};

// The counters profile() must give: every layer's directions, as the walk
// calls them (its backward_data only where its input's gradient is needed),
// the loss's as the layer after the logits, the update and the totals.
std::set<std::string> expected_counters(const Network& net) {
  const TrainFlow flow = train_flow(net);
  std::set<std::string> names{"update_us", "profiled_us", "profile_steps"};
  const auto add = [&](std::size_t i, const char* part) { names.insert("layer_us." + std::to_string(i) + "." + part); };
  for (std::size_t i = 0; i <= flow.logits; ++i) {
    const Layer& l = net.layers[i];
    add(i, "forward");
    if (l.kind == LayerKind::conv || l.kind == LayerKind::fc) add(i, "backward_weights");
    if (l.input >= 0 && flow.needed[static_cast<std::size_t>(l.input)]) add(i, "backward_data");
  }
  add(flow.logits + 1, "forward");
  add(flow.logits + 1, "backward_data");
  return names;
}

}  // namespace dlb::nn

int main() {
  using namespace dlb;
  constexpr std::int64_t kBatch = 4;
  example::Checks checks;
  const auto fail = [&](const std::string& what) { checks.fail(what); };
  for (const nn::TrainVariant& row : nn::kRows)
    for (const auto network : nn::network_names()) {
      const std::string name = std::string(row.name) + " " + std::string(network);
      const nn::Network& net = nn::network(network);
      if (!row.takes(net)) {
        // What the row does not take, its step refuses by layer name.
        try {
          row.make(net, kBatch, nn::Sgd{});
          fail(name + ": the step took a network its row refuses");
        } catch (const Unsupported& e) {
          const std::string what = e.what();
          if (what.find("training step cpu_naive: " + net.name + " layer ") == std::string::npos)
            fail(name + ": " + what);
          std::printf("%s: refused: %s\n", name.c_str(), what.c_str());
        }
        continue;
      }
      TrainCase c(network, kBatch, row);
      const auto gradients = c.validate();
      checks.check(gradients.ok, name + ": " + gradients.summary());
      // A few steps on the case's batch: the loss goes down.
      nn::TrainStep& step = c.step();
      const double first = step.step(c.x(), c.labels());
      double last = first;
      for (int s = 0; s < 4; ++s) last = step.step(c.x(), c.labels());
      if (!(last < first)) fail(name + ": loss " + std::to_string(first) + " -> " + std::to_string(last));
      // The profile names every layer's directions, and only those.
      std::set<std::string> got;
      for (const auto& [counter, value] : step.profile(c.x(), c.labels(), 2)) {
        got.insert(counter);
        if (!std::isfinite(value) || value < 0) fail(name + ": counter " + counter + " is " + std::to_string(value));
      }
      if (got != nn::expected_counters(net)) fail(name + ": the profile does not name every layer's directions");
      std::printf("%s batch %lld: %s; loss %.4f -> %.4f over 5 steps; %zu counters\n", name.c_str(),
                  static_cast<long long>(kBatch), gradients.summary().c_str(), first, last, got.size());
    }
  // The check must be able to fail: the planted step skips the ReLU mask.
  TrainCase planted("mnist_lenet", kBatch, nn::kPlanted);
  const auto refused = planted.validate();
  std::printf("planted (no ReLU mask): %s\n", refused.summary().c_str());
  checks.planted(refused.ok, "no ReLU mask in backward");
  return checks.finish("example_train_backend",
                       std::to_string(checks.checked()) + " networks checked and the planted row refused");
}
