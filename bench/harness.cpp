#include "bench/harness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>

#include "kernels/common/error.h"

namespace dlb::bench {

#if DLB_HAVE_CUDA
void time_gpu(benchmark::State& state, const Run& run, const ExecContext& ctx, Timing timing);  // gpu_timer.cpp
#endif

std::string take_flag(Config& config, std::string_view name) {
  // append() rather than operator+ throughout: GCC 12 at -O3 gives a false
  // -Wrestrict warning on chained std::string operator+ (GCC bug 105329).
  std::string prefix = "--";
  prefix.append(name).append("=");
  for (auto it = config.flags.begin(); it != config.flags.end(); ++it) {
    if (it->rfind(prefix, 0) == 0) {
      std::string value = it->substr(prefix.size());
      config.flags.erase(it);
      if (value.empty()) {
        std::string message = prefix;
        message.append(" needs a value");
        for (const auto& f : flag_helps())
          if (name == f.name) message.append(", e.g. ").append(f.example);
        throw Error(message);
      }
      return value;
    }
  }
  return {};
}

namespace {
std::vector<FlagHelp>& flag_list() {
  static std::vector<FlagHelp> list;
  return list;
}
}  // namespace

bool add_flag_help(const FlagHelp& flag) {
  flag_list().push_back(flag);
  return true;
}

const std::vector<FlagHelp>& flag_helps() { return flag_list(); }

namespace {
std::vector<FamilyRegistrar>& family_list() {
  static std::vector<FamilyRegistrar> list;
  return list;
}
std::string g_current_case;
}  // namespace

namespace detail {
CaseSlot& case_slot() {
  static CaseSlot slot;
  return slot;
}
const std::string& current_case_name() { return g_current_case; }
}  // namespace detail

bool add_family(FamilyRegistrar registrar) {
  family_list().push_back(registrar);
  return true;
}

const std::vector<FamilyRegistrar>& families() { return family_list(); }

std::string case_name(std::string_view op, std::string_view variant, NameArgs args) {
  std::string name(op);
  name.append("/").append(variant);
  for (const auto& [key, value] : args) name.append("/").append(key).append(":").append(std::to_string(value));
  return name;
}

benchmark::internal::Benchmark* add_case(const std::string& name, Device device,
                                         std::function<void(benchmark::State&)> body, bool manual_time) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [name, body](benchmark::State& state) {
    g_current_case = name;
    try {
      body(state);
    } catch (const Unsupported& e) {
      state.SkipWithError(std::string("unsupported: ").append(e.what()).c_str());
    } catch (const std::exception& e) {
      state.SkipWithError(std::string("error: ").append(e.what()).c_str());
    }
  });
  if (device == Device::gpu || manual_time) {
    b->UseManualTime();
  } else {
    b->UseRealTime();
  }
  return b;
}

double percentile(const std::vector<double>& sorted, double q) {
  DLB_REQUIRE(!sorted.empty(), "percentile of no samples");
  const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

bool check(benchmark::State& state, const ref::Comparison& comparison) {
  state.counters["max_rel_err"] = comparison.max_rel_err;
  if (comparison.ok) return true;
  state.SkipWithError(comparison.summary().c_str());
  return false;
}

namespace {

// Per case, over every call of its body (the sizing call included).
struct NoisyTally {
  int calls = 0;
  int noisy_calls = 0;
  double contention = 0.0, steal = 0.0, drift = 0.0;  // the largest seen
};
std::map<std::string, NoisyTally>& noisy_tally() {
  static std::map<std::string, NoisyTally> tally;
  return tally;
}

// fmax that keeps the old value when `v` is NaN (not measured).
double larger(double old, double v) { return std::isnan(v) ? old : std::max(old, v); }

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * fraction);
  return buf;
}

}  // namespace

void MachineWatch::record(benchmark::State& state, double ceiling_drift) const {
  const Disturbance d = disturbance_between(start_, sample_machine());
  const bool noisy = d.contention > kNoisyContention || d.steal > kNoisySteal ||
                     std::abs(ceiling_drift) > kNoisyCeilingDrift;  // NaN compares false
  if (!std::isnan(d.contention)) state.counters["contention"] = d.contention;
  if (!std::isnan(d.steal)) state.counters["steal"] = d.steal;
  state.counters["noisy"] = noisy ? 1.0 : 0.0;
  auto& t = noisy_tally()[detail::current_case_name()];
  ++t.calls;
  t.noisy_calls += noisy ? 1 : 0;
  t.contention = larger(t.contention, d.contention);
  t.steal = larger(t.steal, d.steal);
  t.drift = larger(t.drift, std::abs(ceiling_drift));
}

std::string noisy_summary() {
  const auto& tally = noisy_tally();
  int noisy_cases = 0;
  NoisyTally worst;
  std::string names;
  for (const auto& [name, t] : tally) {
    worst.contention = std::max(worst.contention, t.contention);
    worst.steal = std::max(worst.steal, t.steal);
    worst.drift = std::max(worst.drift, t.drift);
    if (t.noisy_calls <= kNoisyShare * t.calls) continue;
    if (++noisy_cases <= 5) names.append(names.empty() ? "" : ", ").append(name);
  }
  std::string out = "machine during the run: largest contention " + percent(worst.contention) + ", steal " +
                    percent(worst.steal) + ", ceiling drift " + percent(worst.drift) + " (noisy past " +
                    percent(kNoisyContention) + ", " + percent(kNoisySteal) + ", " + percent(kNoisyCeilingDrift) +
                    "): ";
  if (noisy_cases == 0) return out + "no CPU case noisy";
  out += "NOISY: " + std::to_string(noisy_cases) + " of " + std::to_string(tally.size()) +
         " CPU cases had more than " + percent(kNoisyShare) + " of their calls noisy (" + names +
         (noisy_cases > 5 ? ", ..." : "") + "); their figures are not the code's alone";
  return out;
}

void time_run(benchmark::State& state, const Run& run, const ExecContext& ctx, Timing timing) {
#if DLB_HAVE_CUDA
  if (ctx.exec().stream != nullptr) {
    time_gpu(state, run, ctx, timing);
    return;
  }
#else
  (void)ctx;
  (void)timing;
#endif
  const MachineWatch watch;
  for (auto _ : state) run();
  watch.record(state);
}

void time_memory_bound(benchmark::State& state, const Run& run, const ExecContext& ctx, double bytes_per_call,
                       Ceiling ceiling, int threads) {
  if (ctx.exec().stream != nullptr) {  // a GPU case
    time_run(state, run, ctx);
    set_bytes(state, bytes_per_call);
    return;
  }
  const MachineWatch watch;
  const double before = measure_ceiling(ceiling, threads);
  // The loop's time by the same clock Google Benchmark reads for real time,
  // taken just outside its own start and stop (a rate counter would give the
  // same figure, but prints it with "/s").
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double after = measure_ceiling(ceiling, threads);
  const double ceiling_rate = 0.5 * (before + after);
  const double drift = after / before - 1.0;
  set_bytes(state, bytes_per_call);
  const double rate = bytes_per_call * static_cast<double>(state.iterations()) / seconds;
  state.counters["frac_of_ceiling"] = rate / ceiling_rate;
  state.counters["ceiling_bytes_per_second"] = ceiling_rate;
  state.counters["ceiling_drift"] = drift;
  watch.record(state, drift);
  state.SetLabel("vs " + ceiling_name(ceiling) + (threads == 1 ? ", 1 thread" : ""));
}

void set_bytes(benchmark::State& state, double bytes_per_call) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_call * static_cast<double>(state.iterations())));
}

void set_flops(benchmark::State& state, double flops_per_call) {
  state.counters["flops"] = benchmark::Counter(flops_per_call, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace dlb::bench
