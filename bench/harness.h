// What every benchmark family uses: naming, registration, validation before
// timing, and the timed loop (CPU wall clock, or CUDA events for GPU cases).
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/check_only.h"
#include "bench/machine_state.h"
#include "kernels/common/gpu.h"
#include "kernels/common/variant.h"
#include "reference/compare.h"

namespace dlb::bench {

// What main() knows when the families register their cases.
struct Config {
  bool gpu = false;  // a CUDA device is present and the build has CUDA
  // Registering only to name the cases (bench --list_families), never to run
  // them: GPU cases are registered too, with or without a device, and a
  // family asks the device nothing (it may be absent).
  bool name_only = false;
  // Flags left after Google Benchmark took its own, as --name=value; a
  // family takes the ones it knows (take_flag) and main rejects the rest.
  std::vector<std::string> flags;
  // Run by main after the benchmarks, in order; the first non-zero result is
  // the exit status (a family's flag that found nothing to act on).
  std::vector<std::function<int()>> at_end;
};

// One of dlbench's own flags, for `bench --help` and for the error of a flag
// given without its value. Declared once, next to the family that takes it,
// with DLB_BENCH_FLAG.
struct FlagHelp {
  const char* name;     // "conv": the flag is --conv=<value>
  const char* value;    // what the value is: "DESCRIPTOR[,DESCRIPTOR...]"
  const char* example;  // a whole flag: "--conv=n64c16h32w32k16r3s3stride1pad1"
  const char* help;     // one line
};
bool add_flag_help(const FlagHelp& flag);
const std::vector<FlagHelp>& flag_helps();
#define DLB_BENCH_FLAG(id, ...) \
  [[maybe_unused]] static const bool dlb_flag_##id = ::dlb::bench::add_flag_help({__VA_ARGS__})

// Removes --<name>=<value> from config.flags and returns the value, or ""
// when the flag is not there. Throws dlb::Error for the flag given with an
// empty value ("--<name>="), naming the flag's example.
std::string take_flag(Config& config, std::string_view name);

// The value of a flag that takes seconds: a finite number > 0; throws
// dlb::Error naming the flag otherwise.
double parse_seconds(std::string_view flag, const std::string& value);

using FamilyRegistrar = void (*)(Config&);
// Called at static-initialization time by DLB_BENCH_FAMILY.
bool add_family(FamilyRegistrar registrar, const char* name, const char* answers);
const std::vector<FamilyRegistrar>& families();
// What bench --list_families says of each family, in the order of families().
struct FamilyAbout {
  std::string_view name;     // the registrar's name without "register_": "daxpy"
  std::string_view answers;  // one line: the question the family's figures answer
};
const std::vector<FamilyAbout>& family_abouts();

// A family: its registrar, and in one line what it answers (--list_families).
#define DLB_BENCH_FAMILY(registrar, answers) \
  [[maybe_unused]] static const bool dlb_family_##registrar = ::dlb::bench::add_family(registrar, #registrar, answers)

// The rows of `table` to register: usable on this CPU, and GPU rows only
// when a GPU is present (or the cases are only named).
template <class Args>
std::vector<const Variant<Args>*> variants_to_run(VariantTable<Args> table, const Config& config) {
  std::vector<const Variant<Args>*> out;
  for (const auto& v : table)
    if (v.usable() && (v.device == Device::cpu || config.gpu || config.name_only)) out.push_back(&v);
  return out;
}

using NameArgs = std::initializer_list<std::pair<std::string_view, long long>>;

// "<op>/<variant>/<arg>:<value>/...", e.g. "daxpy/cpu_loop/n:1024".
std::string case_name(std::string_view op, std::string_view variant, NameArgs args);

// How a case's iterations are counted; the defaults suit most cases.
struct CaseOptions {
  // The body sets every iteration's time itself (state.SetIterationTime), on
  // the CPU too. GPU cases always do.
  bool manual_time = false;
  // A fixed number of iterations per repetition (0: Google Benchmark sizes
  // it from the minimum time).
  std::int64_t iterations = 0;
  // GPU cases: the (event) time a repetition accumulates at least; 0 means
  // gpu_min_time(). Ignored for CPU cases (--benchmark_min_time rules them)
  // and where `iterations` is set.
  double min_time = 0.0;
};

// --gpu_min_time: every timed call of a GPU case pays an L2 flush, the stream
// hold and a synchronization besides the call (some 50 us on an H100, far
// more than a small kernel), so GPU cases accumulate this much GPU time per
// repetition rather than Google Benchmark's --benchmark_min_time: at
// 0.002 s a 3 us kernel still gets about 900 timed calls a repetition, and
// costs 0.05 s of wall time instead of 1.5 s. Set by main before the
// families register.
inline constexpr double kDefaultGpuMinTime = 0.002;
void set_gpu_min_time(double seconds);
double gpu_min_time();

// Registers one case, if the selected suite (suites.h) includes its name;
// returns whether it did. `body` may throw: dlb::Unsupported skips the case
// with its message, any other exception fails it with the message. CPU cases
// are timed by wall clock (they may be multithreaded), GPU cases by CUDA
// events.
bool add_case(const std::string& name, Device device, std::function<void(benchmark::State&)> body,
              CaseOptions options = {});

// Every case add_case has registered, in order, with its device: what
// --list_families groups and what bench counts (a case the selected suite
// leaves out is not registered, so not here).
struct RegisteredCase {
  std::string name;
  Device device;
};
const std::vector<RegisteredCase>& registered_cases();

// Check-only runs (bench --check_only, check_only.h): set before the families
// register. Each case's body then runs as in a timing run up to its
// validation, where check() ends it, and `sink` gets one outcome per case
// (once, however often Google Benchmark calls the body); nothing is timed.
void set_check_only(std::function<void(const CheckOutcome&)> sink);
bool check_only();

// Bad input a case met (a missing weights file, say): the case is skipped
// with `message`, and bench exits 2 after the run, printing each message
// once, instead of reporting an errored case and exiting 0.
void report_input_error(benchmark::State& state, const std::string& message);
// The messages reported so far, each once, in order.
const std::vector<std::string>& input_errors();

// Records max_rel_err; on a wrong result skips the case with the comparison's
// summary and returns false. A wrong result never gets a time. In a
// check-only run it records the comparison, and a right result ends the
// case's body there (an exception add_case's wrapper takes).
bool check(benchmark::State& state, const ref::Comparison& comparison);

namespace detail {
// The one case object alive at a time (see validated_case).
struct CaseSlot {
  std::string name;
  std::shared_ptr<void> object;
  ref::Comparison comparison;
  double setup_seconds = 0.0;  // construction + validation, the last time
  bool gpu = false;            // a GPU case: set up once, whatever it costs
};
CaseSlot& case_slot();
const std::string& current_case_name();  // set by add_case around each body call
}  // namespace detail

// Below this set-up time a case is built afresh for every call.
inline constexpr double kRebuildBelowSeconds = 0.05;

// Sets up a Case (constructor arguments `args`) and validates it. Google
// Benchmark calls a case's body several times (to size the iteration count,
// once per repetition). A case that is cheap to set up is built afresh each
// time, on freshly allocated buffers: where its data lands in physical
// memory moves its time by up to 30% on this kind of machine (cache sets,
// pages), and that variation belongs in the repetitions, where the
// comparison tools see it, not hidden between one process and the next. A
// case whose set-up costs more (gigabytes of seeded data) is set up and
// validated once and reused by the calls that follow. One case object is
// alive at a time; the previous one is freed before the next is built. GPU
// cases are set up once whatever it costs: device memory is not placed
// as host pages are, and rebuilding one (upload, validation) in each of
// Google Benchmark's calls would cost more wall time than it measures.
// Records max_rel_err on every call; returns nullptr (case skipped with the
// comparison's summary) on a wrong result.
template <class Case, class... CtorArgs>
Case* validated_case(benchmark::State& state, CtorArgs&&... args) {
  auto& slot = detail::case_slot();
  if (slot.name != detail::current_case_name() || !slot.object ||
      (slot.setup_seconds < kRebuildBelowSeconds && !slot.gpu)) {
    slot.object.reset();
    slot.name.clear();
    const auto start = std::chrono::steady_clock::now();
    auto c = std::make_shared<Case>(std::forward<CtorArgs>(args)...);
    slot.comparison = c->validate();
    slot.setup_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if constexpr (requires { c->context().exec().stream; }) slot.gpu = c->context().exec().stream != nullptr;
    else slot.gpu = false;
    slot.object = std::move(c);
    slot.name = detail::current_case_name();
  }
  if (!check(state, slot.comparison)) return nullptr;
  return static_cast<Case*>(slot.object.get());
}

struct Timing {
  // GPU only: read through a buffer twice the size of L2 before each call
  // (outside the timed region), so memory-bound cases measure DRAM, not a
  // warm cache.
  bool flush_l2 = true;
  // GPU only: the stream the timed call is ordered with, when that is not the
  // context's own (nullptr: the context's stream). The flush, the events and
  // the waits go there. A synchronous cudaMemcpy runs on the legacy default
  // stream (cudaStreamLegacy), which the context's non-blocking stream is not
  // ordered with: events on the context's stream would not bracket it.
  CUstream_st* stream = nullptr;
  // GPU only: hold the stream with a kernel that waits until the host has
  // enqueued the whole call, so that the events bracket the GPU's work and
  // not the host's issuing of it. Off for calls that wait for the stream
  // themselves (cudaMemcpy, copies from or to pageable memory): they would
  // wait for the hold, and the hold for them.
  bool hold = true;
};

// GPU: the hold time_run puts on a stream ahead of a timed call (a kernel
// that waits until the host has enqueued the call), for callers that record
// their own events: construct it, enqueue the events and the calls,
// release(). The destructor releases it on every path, so a call that throws
// never leaves the stream held. After the stream has passed the hold,
// timed_out() says whether the timeout (one second) ended it. One at a time
// per process. Built with CUDA only.
class StreamHold {
 public:
  explicit StreamHold(CUstream_st* stream);
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  ~StreamHold();
  void release();
  bool timed_out() const;

 private:
  bool held_ = true;
};

// The timed loop. CPU: `run` back to back. GPU: one warm-up call, then per
// iteration: flush, hold, start event, the call, stop event, release (on
// Timing::stream, or the context's stream), SetIterationTime.
void time_run(benchmark::State& state, const Run& run, const ExecContext& ctx, Timing timing = {});

// Watches the machine around a CPU case's timed loop and records, per
// repetition, counters `contention` and `steal` (machine_state.h) and `noisy`
// (1 when either, or the drift of the case's ceiling bracket, is past its
// threshold; 0 otherwise). Construct it right before the loop, record right
// after. time_run and time_memory_bound do; a case with its own loop does
// the same. TallyingReporter sums them up at the end of the run.
class MachineWatch {
 public:
  MachineWatch() : start_(sample_machine()) {}
  // ceiling_drift: after / before - 1 of the case's ceiling bracket, or NaN.
  void record(benchmark::State& state, double ceiling_drift = std::numeric_limits<double>::quiet_NaN()) const;

 private:
  MachineSample start_;
};

// The display reporter bench runs with: Google Benchmark's own (the console,
// or what --benchmark_format names), to which it passes everything, and a
// tally of the repetitions it reports that carry `noisy` (the CPU cases).
// summary() is one line for the end of the run: the largest contention,
// steal and ceiling drift, and how many CPU cases were noisy, and which: by
// scripts/quality.py's rule (more than kNoisyShare of the repetitions
// noisy, or a roofline ceiling's rates spread by more than
// kNoisyCeilingSpread) over the reported repetitions, not the calls Google
// Benchmark makes to size the iteration count, so that it names the cases
// quality.py names in the JSON. Google Benchmark's
// --benchmark_display_aggregates_only would hold the repetitions back from
// it, so bench takes that flag (take_display_aggregates_only) and the
// reporter applies it: it passes on only the aggregates of a case that has
// them, as Google Benchmark does.
class TallyingReporter final : public benchmark::BenchmarkReporter {
 public:
  explicit TallyingReporter(bool display_aggregates_only);
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;
  std::string summary() const;

 private:
  struct Tally {
    int repetitions = 0;
    int noisy = 0;
    double contention = 0.0, steal = 0.0, drift = 0.0;  // the largest reported
    std::vector<double> rates;                          // a roofline ceiling's, per repetition
  };
  benchmark::BenchmarkReporter* display_;  // Google Benchmark's; it keeps it for the process
  bool display_aggregates_only_;
  std::map<std::string, Tally> tally_;  // per case
};

// Takes --benchmark_display_aggregates_only[=value] out of argv (before
// benchmark::Initialize sees it) and returns its value, read as Google
// Benchmark reads a bool flag (no value, or any but false/no/off/0/f/n, is
// true); false where it is absent. The last one given counts.
bool take_display_aggregates_only(int& argc, char** argv);

// A memory-bound CPU case, timed as time_run does but bracketed: `ceiling`
// is measured right before and right after the timed loop
// (measure_ceiling), and the case records bytes_per_second (set_bytes) and
// frac_of_ceiling = its bytes per second / the mean of the two,
// ceiling_bytes_per_second (that mean), ceiling_drift (after / before - 1),
// and the ceiling's name as its label. `threads` (the variant's: 1 for
// single-threaded code, 0 for all) is the thread count of the ceiling too,
// and the label says "1 thread" then. A GPU case is timed by time_run, with
// set_bytes, unbracketed.
void time_memory_bound(benchmark::State& state, const Run& run, const ExecContext& ctx, double bytes_per_call,
                       Ceiling ceiling, int threads);

// The q-quantile (0 <= q <= 1, nearest rank) of samples sorted ascending.
double percentile(const std::vector<double>& sorted, double q);

// Rate counters (per call figures; Google Benchmark divides by the time).
void set_bytes(benchmark::State& state, double bytes_per_call);
void set_flops(benchmark::State& state, double flops_per_call);

}  // namespace dlb::bench
