#include "bench/harness.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <exception>
#include <map>
#include <set>

#include "bench/suites.h"
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

namespace {
std::vector<FamilyAbout>& family_about_list() {
  static std::vector<FamilyAbout> list;
  return list;
}
}  // namespace

bool add_family(FamilyRegistrar registrar, const char* name, const char* answers) {
  family_list().push_back(registrar);
  std::string_view short_name(name);
  if (short_name.starts_with("register_")) short_name.remove_prefix(9);
  family_about_list().push_back({short_name, answers});
  return true;
}

const std::vector<FamilyRegistrar>& families() { return family_list(); }
const std::vector<FamilyAbout>& family_abouts() { return family_about_list(); }

std::string case_name(std::string_view op, std::string_view variant, NameArgs args) {
  std::string name(op);
  name.append("/").append(variant);
  for (const auto& [key, value] : args) name.append("/").append(key).append(":").append(std::to_string(value));
  return name;
}

namespace {
double g_gpu_min_time = kDefaultGpuMinTime;
DLB_BENCH_FLAG(gpu_min_time, "gpu_min_time", "SECONDS", "--gpu_min_time=0.01",
               "GPU time each repetition of a GPU case accumulates at least (default 0.002; "
               "--benchmark_min_time applies to CPU cases)");
}  // namespace

double parse_seconds(std::string_view flag, const std::string& value) {
  double v = 0.0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (ec != std::errc() || ptr != end || !std::isfinite(v) || v <= 0.0)
    throw Error(std::string(flag) + "=" + value + ": not a number of seconds > 0");
  return v;
}

void set_gpu_min_time(double seconds) {
  DLB_REQUIRE(seconds > 0.0 && seconds <= 3600.0,
              "--gpu_min_time must be a number of seconds in (0, 3600], e.g. --gpu_min_time=0.002");
  g_gpu_min_time = seconds;
}
double gpu_min_time() { return g_gpu_min_time; }

namespace {

std::vector<RegisteredCase>& registered_list() {
  static std::vector<RegisteredCase> list;
  return list;
}

// Check-only runs: where the outcomes go (empty: a timing run), what check()
// and report_input_error saw in the case running now, and the cases reported.
std::function<void(const CheckOutcome&)> g_check_sink;
struct CheckRecord {
  bool checked = false;
  ref::Comparison comparison;
  std::string input_error;
};
CheckRecord g_check_record;
std::set<std::string> g_checked;
// Thrown by check() on a right result in a check-only run: the body ends at
// its validation, before its timed loop. Not a std::exception, so that no
// catch-all in a body takes it for an error.
struct CheckPassed {};

// A case's body in a check-only run, up to its validation, and its outcome.
void run_checking_only(benchmark::State& state, const std::string& name,
                       const std::function<void(benchmark::State&)>& body) {
  if (!g_checked.insert(name).second) {  // a repetition: reported already
    state.SkipWithError("check_only: reported");
    return;
  }
  using V = CheckOutcome::Verdict;
  g_check_record = {};
  CheckOutcome outcome{name, V::fail, ""};
  try {
    body(state);
    if (!g_check_record.input_error.empty()) outcome = {name, V::bad_input, g_check_record.input_error};
    else if (g_check_record.checked) outcome = {name, V::fail, g_check_record.comparison.summary()};
    else outcome = {name, V::fail, "its body never validated it (no check() before its timed loop)"};
  } catch (const CheckPassed&) {
    outcome = {name, V::pass, g_check_record.comparison.summary()};
  } catch (const Unsupported& e) {
    outcome = {name, V::unsupported, e.what()};
  } catch (const std::exception& e) {
    outcome = {name, V::fail, std::string("error: ").append(e.what())};
  }
  // Skipped, so that Google Benchmark neither times it nor calls it again
  // to size an iteration count.
  if (!state.error_occurred()) state.SkipWithError(("check_only: " + check_line(outcome)).c_str());
  g_check_sink(outcome);
}

}  // namespace

const std::vector<RegisteredCase>& registered_cases() { return registered_list(); }

void set_check_only(std::function<void(const CheckOutcome&)> sink) { g_check_sink = std::move(sink); }
bool check_only() { return static_cast<bool>(g_check_sink); }

bool add_case(const std::string& name, Device device, std::function<void(benchmark::State&)> body,
              CaseOptions options) {
  if (!suite_includes(name)) return false;
  registered_list().push_back({name, device});
  auto* b = benchmark::RegisterBenchmark(name.c_str(), [name, body](benchmark::State& state) {
    g_current_case = name;
    if (check_only()) return run_checking_only(state, name, body);
    try {
      body(state);
    } catch (const Unsupported& e) {
      state.SkipWithError(std::string("unsupported: ").append(e.what()).c_str());
    } catch (const std::exception& e) {
      state.SkipWithError(std::string("error: ").append(e.what()).c_str());
    }
  });
  if (device == Device::gpu || options.manual_time) {
    b->UseManualTime();
  } else {
    b->UseRealTime();
  }
  if (options.iterations > 0) {
    b->Iterations(options.iterations);
  } else if (device == Device::gpu) {
    b->MinTime(options.min_time > 0.0 ? options.min_time : gpu_min_time());
  }
  return true;
}

double percentile(const std::vector<double>& sorted, double q) {
  DLB_REQUIRE(!sorted.empty(), "percentile of no samples");
  const auto i = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(i, sorted.size() - 1)];
}

namespace {
std::vector<std::string>& input_error_list() {
  static std::vector<std::string> list;
  return list;
}
}  // namespace

void report_input_error(benchmark::State& state, const std::string& message) {
  auto& list = input_error_list();
  if (std::find(list.begin(), list.end(), message) == list.end()) list.push_back(message);
  if (check_only()) g_check_record.input_error = message;
  state.SkipWithError(("bad input: " + message).c_str());
}

const std::vector<std::string>& input_errors() { return input_error_list(); }

bool check(benchmark::State& state, const ref::Comparison& comparison) {
  state.counters["max_rel_err"] = comparison.max_rel_err;
  if (check_only()) {
    g_check_record.checked = true;
    g_check_record.comparison = comparison;
    if (comparison.ok) throw CheckPassed{};
  }
  if (comparison.ok) return true;
  state.SkipWithError(comparison.summary().c_str());
  return false;
}

namespace {

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * fraction);
  return buf;
}

// Median absolute deviation over the median, as quality.py's relative_mad
// (the median of an even count is the mean of the middle two).
double relative_mad(std::vector<double> v) {
  if (v.size() < 2) return 0.0;
  const auto median = [](std::vector<double>& x) {
    std::sort(x.begin(), x.end());
    const std::size_t h = x.size() / 2;
    return x.size() % 2 == 1 ? x[h] : 0.5 * (x[h - 1] + x[h]);
  };
  const double med = median(v);
  for (double& x : v) x = std::abs(x - med);
  return med > 0.0 ? median(v) / med : 0.0;
}

// The counter of a reported run, or 0 where it has none.
double counter(const benchmark::BenchmarkReporter::Run& run, const char* name) {
  const auto it = run.counters.find(name);
  return it == run.counters.end() ? 0.0 : it->second.value;
}

}  // namespace

void MachineWatch::record(benchmark::State& state, double ceiling_drift) const {
  const Disturbance d = disturbance_between(start_, sample_machine());
  const bool noisy = d.contention > kNoisyContention || d.steal > kNoisySteal ||
                     std::abs(ceiling_drift) > kNoisyCeilingDrift;  // NaN compares false
  if (!std::isnan(d.contention)) state.counters["contention"] = d.contention;
  if (!std::isnan(d.steal)) state.counters["steal"] = d.steal;
  state.counters["noisy"] = noisy ? 1.0 : 0.0;
}

TallyingReporter::TallyingReporter(bool display_aggregates_only)
    : display_(benchmark::CreateDefaultDisplayReporter()), display_aggregates_only_(display_aggregates_only) {}

bool TallyingReporter::ReportContext(const Context& context) { return display_->ReportContext(context); }

void TallyingReporter::ReportRuns(const std::vector<Run>& runs) {
  for (const Run& run : runs) {
    if (run.run_type != Run::RT_Iteration || run.error_occurred || !run.counters.count("noisy")) continue;
    // The case's name without Google Benchmark's time suffix, as in quality.py.
    std::string name = run.run_name.function_name;
    if (!run.run_name.args.empty()) name.append("/").append(run.run_name.args);
    Tally& t = tally_[name];
    ++t.repetitions;
    t.noisy += counter(run, "noisy") > 0.0 ? 1 : 0;
    t.contention = std::max(t.contention, counter(run, "contention"));
    t.steal = std::max(t.steal, counter(run, "steal"));
    t.drift = std::max(t.drift, std::abs(counter(run, "ceiling_drift")));
    if (name.rfind("roofline/", 0) == 0)
      t.rates.push_back(run.counters.count("bytes_per_second") ? counter(run, "bytes_per_second")
                                                               : counter(run, "flops"));
  }
  if (!display_aggregates_only_) {
    display_->ReportRuns(runs);
    return;
  }
  // A case of two or more repetitions has aggregates, reported after its
  // repetitions (in a call of their own): show those only.
  std::vector<Run> shown;
  for (const Run& run : runs)
    if (run.run_type == Run::RT_Aggregate || run.repetitions < 2) shown.push_back(run);
  if (!shown.empty()) display_->ReportRuns(shown);
}

bool take_display_aggregates_only(int& argc, char** argv) {
  constexpr std::string_view kFlag = "--benchmark_display_aggregates_only";
  bool value = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kFlag.size()) != kFlag || (arg.size() > kFlag.size() && arg[kFlag.size()] != '=')) {
      argv[kept++] = argv[i];
      continue;
    }
    std::string v(arg.size() > kFlag.size() ? arg.substr(kFlag.size() + 1) : std::string_view{});
    for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    value = !(v == "false" || v == "no" || v == "off" || v == "0" || v == "f" || v == "n");
  }
  argv[kept] = nullptr;
  argc = kept;
  return value;
}

void TallyingReporter::Finalize() { display_->Finalize(); }

std::string TallyingReporter::summary() const {
  if (tally_.empty()) return "machine during the run: not watched (no CPU case ran)";
  int noisy_cases = 0;
  Tally worst;
  std::string names;
  for (const auto& [name, t] : tally_) {
    worst.contention = std::max(worst.contention, t.contention);
    worst.steal = std::max(worst.steal, t.steal);
    worst.drift = std::max(worst.drift, t.drift);
    if (t.noisy <= kNoisyShare * t.repetitions && relative_mad(t.rates) <= kNoisyCeilingSpread) continue;
    if (++noisy_cases <= 5) names.append(names.empty() ? "" : ", ").append(name);
  }
  std::string out = "machine during the run: largest contention " + percent(worst.contention) + ", steal " +
                    percent(worst.steal) + ", ceiling drift " + percent(worst.drift) + " (noisy past " +
                    percent(kNoisyContention) + ", " + percent(kNoisySteal) + ", " + percent(kNoisyCeilingDrift) +
                    "): ";
  if (noisy_cases == 0) return out + "no CPU case noisy";
  out += "NOISY: " + std::to_string(noisy_cases) + " of " + std::to_string(tally_.size()) + " CPU cases noisy (" +
         names + (noisy_cases > 5 ? ", ..." : "") + "; more than " + percent(kNoisyShare) +
         " of the repetitions noisy, or a ceiling's spread by more than " + percent(kNoisyCeilingSpread) +
         "): their figures are not the code's alone";
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
