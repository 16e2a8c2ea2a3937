// gpu_onekernel's program (nn_onekernel.h) and its host twin: the
// descriptors and tilings the kernel walks, run here by the same tile steps
// (onekernel_math.h) over the same tiles and threads, so that the CPU tests
// check the program, the tiling and the indexing no GPU here can run.
#include <algorithm>
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

// One layer on the host as the kernel runs it: every tile, its steps in
// order, each step by all kThreads threads one after another (a step's
// threads touch nothing another thread of the step reads, so this is the
// order of any schedule the block may take). Tiles write disjoint outputs,
// as the blocks do, so they run in parallel, each on its own "shared
// memory", poisoned with NaN before every tile: a thread that reads a value
// its tile did not stage shows in the logits.
void run_layer(const ok::Layer& d, const ok::Buffers& b, bool reversed) {
  const int steps = ok::steps(d);
#pragma omp parallel
  {
    std::vector<float> smem(static_cast<std::size_t>(std::max<std::int64_t>(d.smem, 1)));
#pragma omp for schedule(static)
    for (std::int64_t tile = 0; tile < d.tiles; ++tile) {
      std::fill(smem.begin(), smem.end(), std::numeric_limits<float>::quiet_NaN());
      for (int s = 0; s < steps; ++s)
        for (int i = 0; i < ok::kThreads; ++i) ok::step(d, b, tile, smem.data(), s, reversed ? ok::kThreads - 1 - i : i);
    }
  }
}

// A conv's tiling: of the tilings that fit (tile_k a divisor of k and a
// multiple of per_thread, at most kThreads threads' work, shared memory
// within kSharedFloats), the one of least modelled time on kTargetBlocks
// blocks. The model (cycles of one block, from the H100's and H200's
// figures: an L2 round trip about 700 cycles, four warp schedulers, a
// shared load and an fmaf an issue slot each): waves of tiles x (staging:
// one round trip and about 40 issue cycles per element a thread stages, its
// index arithmetic included; the sums: per step of the chain the issue of
// one input and per_thread weight loads and fmafs for each scheduler's warps,
// or the fmaf latency where the warps are too few; the join of the slices;
// a __syncthreads a step). It need not be exact, only rank the tilings: it
// favours enough tiles to fill kTargetBlocks blocks at batch 1 (short
// chains, the reduction split into slices) and more work a thread at batch
// 16. It reads the shape and batch alone, never the device, so the host
// twin computes the kernel's sums in the kernel's order.
constexpr std::int64_t kTargetBlocks = 132;  // the H100's and H200's multiprocessors

void tile_conv(ok::Layer& d, const std::string& name) {
  double best = std::numeric_limits<double>::infinity();
  ok::Layer chosen = d;
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  for (const int kp : {1, 2, 4, 8}) {
    if (d.k % kp != 0) continue;
    for (std::int64_t kt = kp; kt <= d.k; kt += kp) {
      if (d.k % kt != 0) continue;
      for (std::int64_t rows = 1; rows <= d.oh; ++rows) {
        const std::int64_t slots = kt / kp * rows * d.ow;
        if (slots > ok::kThreads) break;
        for (std::int64_t slices = 1; slices <= d.c && slots * slices <= ok::kThreads; ++slices) {
          const std::int64_t per_slice = ceil_div(d.c, slices);
          if ((slices - 1) * per_slice >= d.c) continue;  // an empty slice
          ok::Layer t = d;
          t.per_thread = kp, t.tile_k = static_cast<std::int32_t>(kt), t.tile_rows = static_cast<std::int32_t>(rows);
          t.slices = static_cast<std::int32_t>(slices);
          t.tiles = d.batch * (d.k / kt) * ceil_div(d.oh, rows);
          t.smem = ok::conv_smem(t);
          if (t.smem > ok::kSharedFloats) continue;
          const ok::ConvTile g = ok::conv_tile(t, 0);
          const double stage = 700.0 + 40.0 * static_cast<double>(ceil_div(g.in_floats + g.w_floats, ok::kThreads));
          const double chain = static_cast<double>(per_slice * d.window * d.window);
          const double per_scheduler = static_cast<double>(ceil_div(ceil_div(slots * slices, 32), 4));
          const double sums = chain * std::max(per_scheduler * (2.0 * kp + 2.0), 4.0 + kp);
          const double join = slices > 1 ? 150.0 + 8.0 * static_cast<double>(slices * kp) : 0.0;
          const double cost = static_cast<double>(ceil_div(t.tiles, kTargetBlocks)) *
                              (stage + sums + join + 60.0 * ok::steps(t));
          if (cost < best) best = cost, chosen = t;
        }
      }
    }
  }
  DLB_REQUIRE(best < std::numeric_limits<double>::infinity(),
              "gpu_onekernel: no tiling of " + name + " fits " + std::to_string(ok::kThreads) + " threads and " +
                  std::to_string(ok::kSharedFloats * 4 / 1024) + " KiB of shared memory");
  d = chosen;
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
    constexpr std::int64_t kMax = 0x7fffffff;  // the tile steps index in 32 bits
    DLB_REQUIRE(batch * std::max(l.in_size(), l.out_size()) <= kMax && l.k * ok::reduction(d) <= kMax,
                "gpu_onekernel: " + l.name + " at batch " + std::to_string(batch) + " has more than 2^31 - 1 elements");
    switch (d.kind) {
      case ok::Kind::conv: tile_conv(d, l.name); break;
      case ok::Kind::fc:
        d.tile_k = static_cast<std::int32_t>(std::min<std::int64_t>(batch, ok::kFcImages));
        d.tiles = d.k * ((batch + d.tile_k - 1) / d.tile_k);
        d.smem = static_cast<std::int64_t>(d.tile_k) * ok::kThreads;
        break;
      default: d.tiles = (d.items + ok::kThreads - 1) / ok::kThreads; break;
    }
    p.smem_floats = std::max(p.smem_floats, d.smem);
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

namespace {

Run prepare_on_host(const NetArgs& args, bool reversed) {
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
    calls.push_back([s, b, i, reversed] { run_layer(s->program.layers[i], b, reversed); });
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
    args.report->implementation = "gpu_onekernel's program and tile steps on the host";
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

}  // namespace

Run prepare_onekernel_on_host(const NetArgs& args) { return prepare_on_host(args, false); }

Run prepare_onekernel_on_host_threads_reversed(const NetArgs& args) { return prepare_on_host(args, true); }

}  // namespace dlb::nn
