#include "bench/command_line.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/nn/infer/nn_layers.h"
#include "bench/suites.h"
#include "kernels/common/error.h"
#include "kernels/nn/data/dataset.h"
#include "kernels/nn/model/network.h"

// Google Benchmark 1.7's flags, defined and exported by its library but not
// declared in its header. Read and set around the one listing bench makes
// before a run (require_trace_case): Google Benchmark's --benchmark_list_tests
// path is the only one that says which cases a filter selects, with its own
// names and regex dialect, and its public API sets that flag only from the
// command line.
namespace benchmark {
extern bool FLAGS_benchmark_list_tests;
extern std::string FLAGS_benchmark_out;
}  // namespace benchmark

namespace dlb::bench {
namespace {

DLB_BENCH_FLAG(list_families, "list_families", "", "--list_families",
               "print each family: what it answers, its case names, its suites and its CPU and GPU variants on "
               "this machine (GPU ones marked when no GPU is visible); runs nothing");
DLB_BENCH_FLAG(check_only, "check_only", "", "--check_only",
               "validate every selected case against its reference, as before timing, and time nothing: one line "
               "per case (pass, FAIL with the error, unsupported with the reason, bad input); exit 1 if any "
               "failed (benchdnn's --mode=C)");

// The environment variables of bench and of the tools around it, for --help.
// tests/test_bench_help.py checks that every DLB_ variable the sources read
// is here.
struct EnvHelp {
  const char* name;
  const char* help;
};
constexpr EnvHelp kBenchEnvironment[] = {
    {"DLB_MODELS_DIR",
     "the networks' weights, PyTorch's reference outputs, calibration ranges and epoch references "
     "(default: models/fashion-mnist of the source tree)"},
    {"DLB_FASHION_MNIST_DIR",
     "the Fashion-MNIST idx files the network and training cases read (default: "
     "/usr/share/datasets/fashion-mnist, which scripts/setup fills)"},
};
constexpr EnvHelp kToolEnvironment[] = {
    {"DLB_MIN_TIME", "scripts/bench: --benchmark_min_time of its run (default 0.1 seconds)"},
    {"DLB_REPETITIONS", "scripts/bench: --benchmark_repetitions of its run (default 5)"},
    {"DLB_PROCESSES",
     "scripts/bench: runs bench that many times into one results file (default 1); with --peers, the peers "
     "after each time"},
    {"DLB_RESULTS_DIR", "scripts/bench: the folder its results file goes into (default results/ of the source tree)"},
    {"DLB_RESULTS_DB",
     "scripts/bench, scripts/results: the results store (default ~/.local/share/dlbench/results.sqlite)"},
    {"DLB_REQUIRE_GPU",
     "the GPU test binaries (scripts/gpu-kit sets it): =1 makes a missing CUDA device a failure, not a skip (77)"},
};

const FlagHelp* find_flag(std::string_view name) {
  for (const FlagHelp& f : flag_helps())
    if (name == f.name) return &f;
  return nullptr;
}

std::string with_commas(std::size_t n) {
  std::string digits = std::to_string(n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const auto end = text.find(sep, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// "a, b, c" of the items, in order, without repeats.
std::string joined(const std::vector<std::string>& items, const char* sep = ", ") {
  std::string out;
  for (const auto& item : items) out.append(out.empty() ? "" : sep).append(item);
  return out;
}

void add_once(std::vector<std::string>& items, const std::string& item) {
  if (std::find(items.begin(), items.end(), item) == items.end()) items.push_back(item);
}

// The names the filter (--benchmark_filter) selects, as Google Benchmark
// lists them (with its time suffix); what else it said (a regex it cannot
// compile, one that matches nothing) into *why_none.
std::vector<std::string> names_the_filter_selects(std::string* why_none) {
  std::ostringstream out;
  benchmark::ConsoleReporter lister(benchmark::ConsoleReporter::OO_None);
  lister.SetOutputStream(&out);
  lister.SetErrorStream(&out);  // "Failed to match any benchmarks": no name
  const bool listing = std::exchange(benchmark::FLAGS_benchmark_list_tests, true);
  // Without --benchmark_out for the listing: it would truncate the file.
  std::string file = std::exchange(benchmark::FLAGS_benchmark_out, std::string());
  benchmark::RunSpecifiedBenchmarks(&lister);
  benchmark::FLAGS_benchmark_out = std::move(file);
  benchmark::FLAGS_benchmark_list_tests = listing;
  std::vector<std::string> names;
  for (const std::string& line : split(out.str(), '\n')) {
    if (line.empty()) continue;
    if (line.find(' ') == std::string::npos) names.push_back(line);
    else if (why_none != nullptr) why_none->append(why_none->empty() ? "" : "; ").append(line);
  }
  return names;
}

CheckTally& check_tally() {
  static CheckTally tally;
  return tally;
}

// Shows nothing: a check-only run prints its lines as the cases end.
class SilentReporter final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

void print_help() {
  std::printf(
      "usage: bench [dlbench's flags] [Google Benchmark's flags]\n"
      "\n"
      "Without flags bench runs the full suite: every case of every family on this machine (bench "
      "--list_families\nlists them; the longest run). scripts/bench runs --suite=default and keeps the "
      "results.\n"
      "\ndlbench's own flags:\n");
  std::vector<const FlagHelp*> flags;
  for (const FlagHelp& f : flag_helps()) flags.push_back(&f);
  // --suite first (what runs), then the rest by name.
  std::sort(flags.begin(), flags.end(), [](const FlagHelp* a, const FlagHelp* b) {
    const bool a_suite = std::string_view(a->name) == "suite", b_suite = std::string_view(b->name) == "suite";
    return a_suite != b_suite ? a_suite : std::string_view(a->name) < std::string_view(b->name);
  });
  for (const FlagHelp* f : flags) {
    if (*f->value == '\0') {
      std::printf("  --%s\n      %s\n", f->name, f->help);
      continue;
    }
    std::printf("  --%s=%s\n      %s\n", f->name, f->value, f->help);
    if (std::string_view(f->name) == "suite")
      for (const Suite& s : suites())
        std::printf("        %-10.*s %.*s%s\n", static_cast<int>(s.name.size()), s.name.data(),
                    static_cast<int>(s.help.size()), s.help.data(), s.needs_gpu ? " (needs a GPU)" : "");
    std::printf("      e.g. %s\n", f->example);
  }
  std::printf(
      "  A flag of these without its value, with a bad value, or an unknown flag: exit 2 with the reason.\n"
      "\nEnvironment variables bench reads:\n");
  const std::string models = nn::models_dir(), fashion = nn::fashion_mnist_dir();
  for (const EnvHelp& e : kBenchEnvironment) {
    const std::string_view name = e.name;
    std::printf("  %s\n      %s; now %s\n", e.name, e.help,
                (name == "DLB_MODELS_DIR" ? models : name == "DLB_FASHION_MNIST_DIR" ? fashion : "?").c_str());
  }
  std::printf("Read by the tools around bench (not by bench):\n");
  for (const EnvHelp& e : kToolEnvironment) std::printf("  %s\n      %s\n", e.name, e.help);
  std::printf(
      "\nExit status: 0 done; 1 --check_only found a wrong result; 2 bad usage or bad input (the reason on "
      "stderr).\n"
      "\nGoogle Benchmark's flags:\n");
  benchmark::PrintDefaultHelp();
  std::fflush(stdout);
}

bool take_switch(Config& config, std::string_view name) {
  const std::string flag = std::string("--").append(name);
  bool found = false;
  for (auto it = config.flags.begin(); it != config.flags.end();) {
    if (it->rfind(flag + "=", 0) == 0) throw Error(flag + " takes no value: " + flag);
    if (*it == flag) {
      found = true;
      it = config.flags.erase(it);
    } else {
      ++it;
    }
  }
  return found;
}

void reject_flags_without_value(const Config& config) {
  for (const std::string& arg : config.flags) {
    if (arg.rfind("--", 0) != 0) continue;
    const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
    const FlagHelp* f = find_flag(name);
    if (f == nullptr) continue;  // main rejects what no family takes
    const bool is_switch = *f->value == '\0';
    if (!is_switch && arg == "--" + name)
      throw Error(arg + " needs a value: " + arg + "=" + f->value + ", e.g. " + f->example);
    if (is_switch && arg != "--" + name) throw Error("--" + name + " takes no value: --" + name);
  }
}

const char* no_gpu_reason() { return DLB_HAVE_CUDA ? "no CUDA device visible" : "built without CUDA"; }

int list_families(Config& config, const GpuInfo& gpu) {
  if (!config.flags.empty())
    throw Error("--list_families lists every family and takes no other flag of dlbench's (got '" +
                config.flags.front() + "')");
  select_suite("full");
  Config all;
  all.gpu = gpu.count > 0;
  all.name_only = true;  // GPU variants too, marked when they cannot run here
  const auto& registrars = families();
  const auto& abouts = family_abouts();
  std::vector<std::pair<std::size_t, std::size_t>> ranges;  // each family's cases in registered_cases()
  for (const FamilyRegistrar registrar : registrars) {
    const std::size_t begin = registered_cases().size();
    registrar(all);
    ranges.emplace_back(begin, registered_cases().size());
  }
  const auto& cases = registered_cases();
  // Which suites hold each case: select each suite in turn.
  std::vector<std::vector<bool>> in_suite;
  for (const Suite& s : suites()) {
    select_suite(s.name);
    std::vector<bool> in;
    for (const auto& c : cases) in.push_back(suite_includes(c.name));
    in_suite.push_back(std::move(in));
  }
  select_suite("full");

  std::size_t cpu_cases = 0, gpu_cases = 0, listed = 0;
  for (const auto& c : cases) (c.device == Device::gpu ? gpu_cases : cpu_cases) += 1;
  const bool gpu_here = gpu.count > 0;
  std::string gpu_line = gpu_here ? gpu.name : std::string("none (") + no_gpu_reason() + ")";
  for (std::size_t f = 0; f < registrars.size(); ++f) listed += ranges[f].second > ranges[f].first ? 1 : 0;
  std::printf("bench: %zu families, %s cases: %s CPU, %s GPU%s; GPU: %s\n", listed,
              with_commas(cases.size()).c_str(), with_commas(cpu_cases).c_str(), with_commas(gpu_cases).c_str(),
              gpu_here || !DLB_HAVE_CUDA ? "" : " (not registered in a run here)", gpu_line.c_str());
  std::printf("Case names: <prefix>/<variant>/<arg>:<value>/... (--benchmark_filter=REGEX selects by them)\n");
  for (std::size_t f = 0; f < registrars.size(); ++f) {
    const auto [begin, end] = ranges[f];
    if (begin == end) continue;  // a family with nothing to register in this build
    std::vector<std::string> prefixes, shapes, cpu_variants, gpu_variants;
    std::size_t cpu_n = 0, gpu_n = 0;
    std::vector<std::size_t> per_suite(suites().size(), 0);
    for (std::size_t i = begin; i < end; ++i) {
      const auto parts = split(cases[i].name, '/');
      add_once(prefixes, parts[0]);
      // The arguments' names, their values left out: "n:<n>", "batch:<batch>/pass".
      std::string shape = "<variant>";
      for (std::size_t p = 2; p < parts.size(); ++p) {
        const auto colon = parts[p].find(':');
        shape.append("/").append(colon == std::string::npos
                                     ? parts[p]
                                     : parts[p].substr(0, colon) + ":<" + parts[p].substr(0, colon) + ">");
      }
      add_once(shapes, shape);
      const bool on_gpu = cases[i].device == Device::gpu;
      add_once(on_gpu ? gpu_variants : cpu_variants, parts.size() > 1 ? parts[1] : "");
      (on_gpu ? gpu_n : cpu_n) += 1;
      for (std::size_t s = 0; s < suites().size(); ++s) per_suite[s] += in_suite[s][i] ? 1 : 0;
    }
    std::printf("\n%.*s: %.*s\n", static_cast<int>(abouts[f].name.size()), abouts[f].name.data(),
                static_cast<int>(abouts[f].answers.size()), abouts[f].answers.data());
    // append() rather than operator+: GCC 12's false -Wrestrict (harness.cpp says more).
    const std::string prefix =
        prefixes.size() == 1 ? prefixes[0] : std::string("{").append(joined(prefixes, "|")).append("}");
    for (const auto& shape : shapes) std::printf("  names   %s/%s\n", prefix.c_str(), shape.c_str());
    std::vector<std::string> suite_counts;
    for (std::size_t s = 0; s < suites().size(); ++s)
      if (per_suite[s] > 0)
        suite_counts.push_back(std::string(suites()[s].name) + " (" + with_commas(per_suite[s]) + ")");
    std::printf("  suites  %s\n", joined(suite_counts).c_str());
    if (!cpu_variants.empty())
      std::printf("  CPU     %s (%s cases)\n", joined(cpu_variants).c_str(), with_commas(cpu_n).c_str());
    else
      std::printf("  CPU     none\n");
    if (!gpu_variants.empty())
      std::printf("  GPU     %s (%s cases%s)\n", joined(gpu_variants).c_str(), with_commas(gpu_n).c_str(),
                  gpu_here ? "" : std::string("; needs a GPU: ").append(no_gpu_reason()).c_str());
    else
      std::printf("  GPU     none%s\n", DLB_HAVE_CUDA ? "" : " (built without CUDA)");
  }
  std::fflush(stdout);
  return 0;
}

void start_check_only(const Config& config) {
  for (const std::string& arg : config.flags)
    if (arg.rfind("--trace=", 0) == 0)
      throw Error("--check_only times nothing, so --trace has nothing to write: give one or the other");
  set_check_only([](const CheckOutcome& outcome) {
    check_tally().add(outcome);
    std::printf("%s\n", check_line(outcome).c_str());
    std::fflush(stdout);
  });
}

benchmark::BenchmarkReporter* check_only_reporter() {
  static SilentReporter reporter;
  return &reporter;
}

int finish_check_only(const Config& config) {
  std::printf("%s\n", check_tally().summary().c_str());
  std::fflush(stdout);
  if (const int status = check_tally().exit_status(); status != 0) return status;
  for (const auto& finish : config.at_end)
    if (const int status = finish(); status != 0) return status;
  return 0;
}

void require_gpu_for_suite(bool gpu) {
  const Suite& suite = selected_suite();
  if (suite.needs_gpu && !gpu)
    throw Error("--suite=" + std::string(suite.name) + " holds GPU cases only and needs a GPU: " + no_gpu_reason() +
                ", so GPU cases are not registered (gpu: none)");
}

void require_trace_case() {
  if (!tracing()) return;
  std::string said;
  for (const std::string& name : names_the_filter_selects(&said))
    if (writes_trace(name)) return;
  std::string networks;
  for (const std::string_view n : nn::network_names()) networks.append(networks.empty() ? "" : ", ").append(n);
  drop_trace();
  throw Error("--trace: the filter '" + benchmark::GetBenchmarkFilter() +
              "' selects no case that writes a trace. --trace needs a network case (<network>/<backend>/batch:<b>) "
              "or a layer case (<network>_layer/<backend>/...) of " +
              networks + ", e.g. --benchmark_filter='^resnet20/cpu_onednn/batch:16/'" +
              (said.empty() ? "" : " (Google Benchmark: " + said + ")"));
}

void note_full_suite() {
  if (check_only() || benchmark::FLAGS_benchmark_list_tests || selected_suite().name != "full") return;
  const std::string filter = benchmark::GetBenchmarkFilter();
  if (!(filter.empty() || filter == "." || filter == ".*" || filter == "all")) return;
  std::fprintf(stderr,
               "bench: the full suite: %s cases; scripts/bench runs the default suite "
               "(--suite=default; --benchmark_filter=REGEX narrows either)\n",
               with_commas(registered_cases().size()).c_str());
}

}  // namespace dlb::bench
