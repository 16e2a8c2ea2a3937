// gpu_onekernel's program (nn_onekernel.h) and its host twin: the
// descriptors the kernel walks, run here by the same element functions
// (onekernel_math.h) over the same work items, so that the CPU tests check
// the program and the indexing no GPU here can run.
#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/common/error.h"
#include "kernels/nn/onekernel/nn_onekernel.h"

namespace dlb::nn {

namespace {

std::int64_t aligned(std::int64_t n) { return (n + kOneKernelAlign - 1) / kOneKernelAlign * kOneKernelAlign; }

ok::Kind kind_of(LayerKind kind) {
  switch (kind) {
    case LayerKind::conv: return ok::Kind::conv;
    case LayerKind::fc: return ok::Kind::fc;
    case LayerKind::max_pool: return ok::Kind::max_pool;
    case LayerKind::global_avg_pool: return ok::Kind::global_avg_pool;
    case LayerKind::log_softmax: return ok::Kind::log_softmax;
  }
  throw Error("gpu_onekernel: unknown layer kind");
}

// One warp's work on one item, with the butterfly of __shfl_xor_sync.
void run_item(const ok::Layer& d, const ok::Buffers& b, std::int64_t item) {
  if (d.kind == ok::Kind::log_softmax) {
    ok::log_softmax_row(d, b, item);
    return;
  }
  std::array<float, ok::kLanes> v{}, t{};
  for (int lane = 0; lane < ok::kLanes; ++lane) v[lane] = ok::partial(d, b, item, lane);
  for (int offset = ok::kLanes / 2; offset > 0; offset /= 2) {
    for (int lane = 0; lane < ok::kLanes; ++lane) t[lane] = ok::combine(d, v[lane], v[lane ^ offset]);
    v = t;
  }
  ok::store(d, b, item, v[0]);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<OneKernelPhase> onekernel_phases(const OneKernelProgram& program) {
  std::vector<OneKernelPhase> phases{{0, 0}};
  const int count = static_cast<int>(program.layers.size());
  const int barriers = ok::walk(
      program.layers.data(), 0, count,
      [&](int slot) {
        DLB_REQUIRE(slot == static_cast<int>(phases.size()), "gpu_onekernel: the walk stamps slot " +
                                                                  std::to_string(slot) + " after " +
                                                                  std::to_string(phases.size()) + " phases");
        phases.push_back({phases.back().last, phases.back().last});
      },
      [&](int i) {
        DLB_REQUIRE(i == phases.back().last, "gpu_onekernel: the walk skips a layer");
        phases.back().last = i + 1;
      });
  DLB_REQUIRE(barriers + 1 == static_cast<int>(phases.size()), "gpu_onekernel: the walk's barrier count is off");
  return phases;
}

std::string onekernel_phase_counter(const OneKernelPhase& phase) {
  std::string name = "layer_us.";
  name += std::to_string(phase.first);
  if (phase.last - phase.first > 1) name += '-' + std::to_string(phase.last - 1);
  return name;
}

std::vector<std::pair<std::string, double>> onekernel_stamp_counters(
    const std::vector<OneKernelPhase>& phases, std::span<const std::vector<std::uint64_t>> passes) {
  DLB_REQUIRE(!phases.empty() && !passes.empty(), "gpu_onekernel: no stamps to report");
  std::vector<std::vector<double>> us(phases.size());
  std::vector<double> total;
  for (const auto& stamps : passes) {
    DLB_REQUIRE(stamps.size() == phases.size() + 1, "gpu_onekernel: a pass has " + std::to_string(stamps.size()) +
                                                        " stamps for " + std::to_string(phases.size()) + " phases");
    for (std::size_t p = 0; p < phases.size(); ++p) {
      DLB_REQUIRE(stamps[p] > 0 && stamps[p + 1] >= stamps[p],
                  "gpu_onekernel: stamps " + std::to_string(p) + " and " + std::to_string(p + 1) +
                      " of a pass are missing or out of order");
      us[p].push_back(static_cast<double>(stamps[p + 1] - stamps[p]) * 1e-3);
    }
    total.push_back(static_cast<double>(stamps.back() - stamps.front()) * 1e-3);
  }
  std::vector<std::pair<std::string, double>> counters;
  for (std::size_t p = 0; p < phases.size(); ++p) counters.emplace_back(onekernel_phase_counter(phases[p]), median(us[p]));
  counters.emplace_back("stamped_us", median(total));
  counters.emplace_back("barriers", static_cast<double>(phases.size() - 1));
  return counters;
}

OneKernelProgram build_onekernel_program(const Network& net, std::int64_t batch) {
  DLB_REQUIRE(batch >= 1, "gpu_onekernel: batch must be at least 1");
  OneKernelProgram p;
  const auto& layers = net.layers;
  std::vector<std::int64_t> region(layers.size(), ok::kNone);
  std::size_t phase = 0;  // the first layer of the current phase (between two barriers)
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    const bool last = i + 1 == layers.size();
    const auto source = [&](int layer, const char* what) {
      if (layer < 0) return ok::kInput;
      DLB_REQUIRE(static_cast<std::size_t>(layer) < i && region[static_cast<std::size_t>(layer)] >= 0,
                  "gpu_onekernel: the " + std::string(what) + " of " + l.name + " is not an earlier layer's output");
      return region[static_cast<std::size_t>(layer)];
    };
    ok::Layer d;
    d.kind = kind_of(l.kind);
    d.relu = l.relu ? 1 : 0;
    d.batch = batch;
    d.c = l.c, d.h = l.h, d.w = l.w, d.k = l.k, d.oh = l.oh, d.ow = l.ow;
    d.window = l.window, d.stride = l.stride, d.pad = l.pad;
    d.in = source(l.input, "input");
    d.residual = l.residual < 0 ? ok::kNone : source(l.residual, "residual");
    if (l.residual >= 0)
      DLB_REQUIRE(layers[static_cast<std::size_t>(l.residual)].out_size() == l.out_size(),
                  "gpu_onekernel: the residual of " + l.name + " has another shape");
    if (l.kind == LayerKind::conv || l.kind == LayerKind::fc) {
      DLB_REQUIRE(static_cast<std::int64_t>(l.weight.size()) == l.k * ok::reduction(d) &&
                      static_cast<std::int64_t>(l.bias.size()) == l.k,
                  "gpu_onekernel: the weights of " + l.name + " have another shape");
      d.weight = static_cast<std::int64_t>(p.params.size());
      p.params.insert(p.params.end(), l.weight.begin(), l.weight.end());
      p.params.resize(static_cast<std::size_t>(aligned(static_cast<std::int64_t>(p.params.size()))), 0.0f);
      d.bias = static_cast<std::int64_t>(p.params.size());
      p.params.insert(p.params.end(), l.bias.begin(), l.bias.end());
      p.params.resize(static_cast<std::size_t>(aligned(static_cast<std::int64_t>(p.params.size()))), 0.0f);
    }
    if (l.kind == LayerKind::log_softmax) {
      DLB_REQUIRE(l.out_size() == l.in_size() && l.oh * l.ow == 1, "gpu_onekernel: " + l.name + " is not a row");
      d.items = batch;
    } else {
      d.items = batch * l.out_size();
    }
    constexpr std::int64_t kMax = 0x7fffffff;  // the element functions index in 32 bits
    DLB_REQUIRE(batch * std::max(l.in_size(), l.out_size()) <= kMax && l.k * ok::reduction(d) <= kMax,
                "gpu_onekernel: " + l.name + " at batch " + std::to_string(batch) + " has more than 2^31 - 1 elements");
    const bool reads_this_phase = (l.input >= 0 && static_cast<std::size_t>(l.input) >= phase) ||
                                  (l.residual >= 0 && static_cast<std::size_t>(l.residual) >= phase);
    d.barrier = i == 0 || reads_this_phase ? 1 : 0;
    if (d.barrier != 0) phase = i;
    if (last) {
      d.out = ok::kOutput;
    } else {
      d.out = p.arena_floats;
      region[i] = d.out;
      p.arena_floats += aligned(batch * l.out_size());
    }
    p.layers.push_back(d);
  }
  DLB_REQUIRE(p.arena_floats <= 0x7fffffff, "gpu_onekernel: the activations at batch " + std::to_string(batch) +
                                               " exceed 2^31 - 1 floats");
  return p;
}

Run prepare_onekernel_on_host(const NetArgs& args) {
  struct State {
    OneKernelProgram program;
    std::vector<OneKernelPhase> phases;
    HostBuffer<float> arena;
    std::vector<std::uint64_t> stamps;  // the last pass's, ns of the steady clock (0: not stamped)
  };
  auto s = std::make_shared<State>();
  s->program = build_onekernel_program(*args.net, args.batch);
  s->phases = onekernel_phases(s->program);
  s->stamps.assign(s->phases.size() + 1, 0);
  s->arena = HostBuffer<float>(static_cast<std::size_t>(std::max<std::int64_t>(s->program.arena_floats, 1)));
  // NaN until written: a layer that read a region before its producer wrote it shows in the logits.
  std::fill(s->arena.span().begin(), s->arena.span().end(), std::numeric_limits<float>::quiet_NaN());
  const ok::Buffers b{s->program.params.data(), args.x, s->arena.data(), args.y};
  std::vector<Run> calls;
  for (std::size_t i = 0; i < s->program.layers.size(); ++i)
    calls.push_back([s, b, i] {
      const ok::Layer& d = s->program.layers[i];
      // The items of a layer write disjoint outputs, as the warps of the grid do.
#pragma omp parallel for schedule(static)
      for (std::int64_t item = 0; item < d.items; ++item) run_item(d, b, item);
    });
  // The pass stamps where the kernel does, by the same walk; a stamp is
  // the steady clock's ns, + 1 so that none is 0 (the mark of a slot never
  // written).
  const auto now = [] {
    return static_cast<std::uint64_t>(
               std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
                   .count()) +
           1;
  };
  if (args.report != nullptr) {
    args.report->implementation = "gpu_onekernel's program and element functions on the host";
    args.report->layer_calls = calls;
    args.report->measured_counters = [s] {
      return onekernel_stamp_counters(s->phases, std::span<const std::vector<std::uint64_t>>(&s->stamps, 1));
    };
  }
  return [s, calls = std::move(calls), now] {
    std::fill(s->stamps.begin(), s->stamps.end(), 0);
    s->stamps.front() = now();
    const int barriers = ok::walk(
        s->program.layers.data(), 0, static_cast<int>(s->program.layers.size()),
        [&](int slot) { s->stamps.at(static_cast<std::size_t>(slot)) = now(); },
        [&](int i) { calls[static_cast<std::size_t>(i)](); });
    s->stamps.at(static_cast<std::size_t>(barriers) + 1) = now();
  };
}

}  // namespace dlb::nn
