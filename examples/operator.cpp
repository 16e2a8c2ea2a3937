// The recipe "An operator" of docs/architecture.md, compiled and run by ctest
// (example_operator) so that it cannot drift from the code: a new operator,
// relu (y = max(x, 0) over a vector of fp32), with each layer's part in the
// section named after the file the recipe puts it in (test_docs checks that
// the recipe's lines are these). The operator is not bench's: nothing here
// is linked into build/bench or named by a suite.
//
// main() then does what bench and test_relu would: every row is validated
// against the fp64 reference over odd lengths and unaligned pointers, two
// planted rows are refused by the same check; and the family's registrar,
// called as bench/main.cpp calls every DLB_BENCH_FAMILY, registers its
// cases with Google Benchmark through bench's harness, which validates each
// before timing it (two repetitions of a few iterations here) and refuses
// the planted rows' cases untimed.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "bench/cases/checked_run.h"
#include "bench/harness.h"
#include "examples/example_checks.h"
#include "kernels/common/error.h"
#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/common/random.h"
#include "kernels/common/variant.h"
#include "reference/compare.h"

// ---- kernels/relu/relu.h: the arguments and the table's declaration.
namespace dlb {

struct ReluArgs {
  std::int64_t n = 0;
  const float* x = nullptr;  // [n]
  float* y = nullptr;        // [n]
};

using ReluVariant = Variant<ReluArgs>;
VariantTable<ReluArgs> relu_variants();

void relu_loop(const ReluArgs& args);
void relu_omp(const ReluArgs& args);

// ---- kernels/relu/relu_cpu.cpp: the implementations.
void relu_loop(const ReluArgs& args) {
  for (std::int64_t i = 0; i < args.n; ++i) args.y[i] = args.x[i] > 0.0f ? args.x[i] : 0.0f;
}

void relu_omp(const ReluArgs& args) {
  const float* __restrict x = args.x;
  float* __restrict y = args.y;
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < args.n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// ---- kernels/relu/relu.cpp: the variant table.
// Tolerance 0 (exact): each element is x or 0, nothing is rounded.
static const ReluVariant kReluVariants[] = {
    {"cpu_loop", Device::cpu, plain<relu_loop>, 0.0, nullptr, nullptr, 1},
    {"cpu_omp", Device::cpu, plain<relu_omp>, 0.0},
};

VariantTable<ReluArgs> relu_variants() { return kReluVariants; }

}  // namespace dlb

// ---- reference/relu.{h,cpp}: the oracle, in double, its own loop.
namespace dlb::ref {

void relu(std::span<const float> x, std::span<double> y) {
  DLB_REQUIRE(x.size() == y.size(), "relu: x and y differ in length");
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::max(static_cast<double>(x[i]), 0.0);
}

}  // namespace dlb::ref

// ---- bench/cases/relu_case.{h,cpp}: one problem set up for one variant.
namespace dlb {

class ReluCase {
 public:
  // x_offset, y_offset: elements by which x and y start past a 64-byte
  // boundary (unaligned pointers).
  ReluCase(const ReluVariant& variant, std::int64_t n, std::size_t x_offset = 0, std::size_t y_offset = 0)
      : variant_(variant),
        ctx_(variant.device),
        x_(checked_length(n), variant.device, x_offset),
        y_(checked_length(n), variant.device, y_offset),
        expected_(checked_length(n)),
        n_(n) {
    fill_random(x_.host(), kSeedX);  // uniform [-1, 1): half the elements negative
    ref::relu(x_.host(), expected_);
    x_.upload();
    run_ = variant.prepare(ReluArgs{n, x_.data(), y_.data()}, ctx_.exec());
  }

  // y poisoned with NaN (an element never written shows), one call, compared.
  ref::Comparison validate() { return checked_run(run_, ctx_, y_, expected_, variant_.tolerance); }
  void run() { run_(); }
  const ExecContext& context() const { return ctx_; }
  // Minimum traffic of one call: read x, write y.
  double bytes_per_call() const { return 2.0 * sizeof(float) * static_cast<double>(n_); }

 private:
  static constexpr std::uint64_t kSeedX = 71;
  static std::size_t checked_length(std::int64_t n) {
    DLB_REQUIRE(n >= 0, "relu: n must be >= 0, got " + std::to_string(n));
    return static_cast<std::size_t>(n);
  }

  const ReluVariant& variant_;
  ExecContext ctx_;
  Operand<float> x_, y_;
  std::vector<double> expected_;
  std::int64_t n_;
  Run run_;
};

}  // namespace dlb

// ---- bench/relu.cpp: the family's registrar.
namespace dlb::bench {
namespace {

// The case's body: validated before it is timed (a wrong result is skipped
// with its mismatches and never timed), then timed against the triad
// ceiling on the row's threads, as daxpy's cases are.
void time_relu(benchmark::State& state, const ReluVariant& variant, std::int64_t n) {
  auto* c = validated_case<ReluCase>(state, variant, n);
  if (c == nullptr) return;
  time_memory_bound(state, [c] { c->run(); }, c->context(), c->bytes_per_call(), Ceiling::cpu_triad, variant.threads);
}

void register_relu(Config& config) {
  for (const ReluVariant* variant : variants_to_run(relu_variants(), config))
    for (const std::int64_t n : {std::int64_t{1} << 12, std::int64_t{1} << 20})
      add_case(case_name("relu", variant->name, {{"n", n}}), variant->device,
               [variant, n](benchmark::State& state) { time_relu(state, *variant, n); });
}

DLB_BENCH_FAMILY(register_relu, "relu over 2^12 and 2^20 floats against the memory ceiling (the recipe's example)");

}  // namespace
}  // namespace dlb::bench

// ---- Not the recipe: the planted rows the checks must refuse, and main().
namespace dlb {

// A leaky relu where a relu was meant: every negative element is off.
void relu_leaky(const ReluArgs& args) {
  for (std::int64_t i = 0; i < args.n; ++i) args.y[i] = args.x[i] > 0.0f ? args.x[i] : 0.01f * args.x[i];
}
// Misses the tail past the last multiple of 8 (left NaN by the poison).
void relu_no_tail(const ReluArgs& args) {
  for (std::int64_t i = 0; i + 8 <= args.n; i += 8)
    for (std::int64_t j = i; j < i + 8; ++j) args.y[j] = args.x[j] > 0.0f ? args.x[j] : 0.0f;
}
const ReluVariant kPlanted[] = {
    {"cpu_planted_leaky", Device::cpu, plain<relu_leaky>, 0.0, nullptr, nullptr, 1},
    {"cpu_planted_no_tail", Device::cpu, plain<relu_no_tail>, 0.0, nullptr, nullptr, 1},
};

// Keeps what Google Benchmark reports, per case name (as registered: without
// the /real_time Google Benchmark appends).
class Collect final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs)
      if (r.run_type == Run::RT_Iteration) by_name[r.run_name.function_name].push_back(r);
  }
  std::map<std::string, std::vector<Run>> by_name;
};

}  // namespace dlb

int main() {
  using namespace dlb;
  example::Checks checks;

  // What test_relu would check: every row, odd lengths, unaligned pointers.
  for (const ReluVariant& row : relu_variants())
    for (const std::int64_t n : {0, 1, 3, 17, 1000, 4099, 1 << 20})
      for (const std::size_t offset : {0, 1}) {
        ReluCase c(row, n, offset, 2 * offset);
        const auto result = c.validate();
        checks.check(result.ok, std::string(row.name) + " n=" + std::to_string(n) + " offset=" +
                                    std::to_string(offset) + ": " + result.summary());
      }
  // The checks must be able to fail.
  for (const ReluVariant& row : kPlanted)
    if (ReluCase(row, 1003).validate().ok) checks.fail(std::string(row.name) + " passed validation");

  // What bench does: the family registers (as bench/main.cpp calls every
  // registrar), Google Benchmark runs the cases, the harness validates each
  // before timing it. Two repetitions, each as few iterations as reach 1 ms.
  std::string program = "example_operator", min_time = "--benchmark_min_time=0.001",
              repetitions = "--benchmark_repetitions=2";
  char* argv[] = {program.data(), min_time.data(), repetitions.data(), nullptr};
  int argc = 3;
  benchmark::Initialize(&argc, argv);
  bench::Config config;
  for (const auto registrar : bench::families()) registrar(config);
  std::vector<std::string> expected;
  for (const ReluVariant& row : relu_variants())
    for (const char* n : {"4096", "1048576"}) expected.push_back("relu/" + std::string(row.name) + "/n:" + n);
  std::vector<std::string> registered;
  for (const auto& c : bench::registered_cases()) registered.push_back(c.name);
  if (registered != expected)
    checks.fail("the registrar registered " + std::to_string(registered.size()) + " cases, not " +
                std::to_string(expected.size()) + " named relu/<row>/n:<n>");
  for (const ReluVariant& row : kPlanted)
    bench::add_case(bench::case_name("relu", row.name, {{"n", 1003}}), row.device,
                    [&row](benchmark::State& state) { bench::time_relu(state, row, 1003); });
  Collect collect;
  benchmark::RunSpecifiedBenchmarks(&collect);

  for (const std::string& name : expected) {
    const auto& runs = collect.by_name[name];
    if (runs.size() != 2) {
      checks.fail(name + ": " + std::to_string(runs.size()) + " repetitions reported, not 2");
      continue;
    }
    for (const auto& r : runs) {
      const auto counter = [&r](const char* key) {
        const auto it = r.counters.find(key);
        return it == r.counters.end() ? std::numeric_limits<double>::quiet_NaN() : it->second.value;
      };
      if (r.error_occurred) checks.fail(name + ": " + r.error_message);
      else if (r.iterations < 1 || counter("max_rel_err") != 0.0 || !(counter("frac_of_ceiling") > 0.0))
        checks.fail(name + ": timed without its validation or its ceiling (iterations " +
                    std::to_string(r.iterations) + ", max_rel_err " + std::to_string(counter("max_rel_err")) + ")");
    }
  }
  for (const ReluVariant& row : kPlanted) {
    const std::string name = "relu/" + std::string(row.name) + "/n:1003";
    const auto& runs = collect.by_name[name];
    if (runs.empty() || !std::all_of(runs.begin(), runs.end(), [](const auto& r) {
          return r.error_occurred && r.error_message.find("WRONG RESULT") != std::string::npos;
        }))
      checks.fail(name + ": the harness did not refuse it as a wrong result");
  }

  return checks.finish("example_operator", std::to_string(checks.checked()) + " problems checked, " +
                                               std::to_string(expected.size()) +
                                               " cases registered and timed, the planted rows refused");
}
