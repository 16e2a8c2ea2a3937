#include "bench/harness.h"

#include <algorithm>
#include <exception>

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
  for (auto _ : state) run();
}

void set_bytes(benchmark::State& state, double bytes_per_call) {
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes_per_call * static_cast<double>(state.iterations())));
}

void set_flops(benchmark::State& state, double flops_per_call) {
  state.counters["flops"] = benchmark::Counter(flops_per_call, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace dlb::bench
