// The benchmark binary: Google Benchmark's main, plus the machine in the JSON
// context, GPU detection, and the families' own flags.
#include <benchmark/benchmark.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "bench/alloc_counter.h"
#include "bench/build_info.h"
#include "bench/command_line.h"
#include "bench/harness.h"
#include "bench/json_out.h"
#include "bench/suites.h"
#include "bench/user_shapes.h"
#include "kernels/common/cpu_info.h"
#include "kernels/common/gpu.h"

namespace {

// results/<machine>/ folder name: the GPU when there is one, else the CPU
// model, its microarchitecture (CPUID: "AMD EPYC" alone has named a Zen 4
// and a CPU with twice its FMA rate) and the cores this process may use.
std::string machine_slug(const dlb::GpuInfo& gpu) {
  std::string raw = gpu.count > 0 ? gpu.name : dlb::cpu_model();
  if (gpu.count == 0) {
    raw.append(" ").append(dlb::cpu_microarchitecture(dlb::cpu_id()));
    raw.append(" ").append(std::to_string(dlb::cpu_cores_usable())).append("c");
  }
  std::string slug;
  for (char c : raw) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      slug += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  // "(R)" and "(TM)" leave "-r-" and "-tm-": drop them.
  std::string out;
  std::size_t start = 0;
  while (start < slug.size()) {
    auto end = slug.find('-', start);
    if (end == std::string::npos) end = slug.size();
    const auto word = slug.substr(start, end - start);
    if (word != "r" && word != "tm") out.append(out.empty() ? "" : "-").append(word);
    start = end + 1;
  }
  return out;
}

void add_context(const dlb::GpuInfo& gpu) {
  using benchmark::AddCustomContext;
  AddCustomContext("machine", machine_slug(gpu));
  AddCustomContext("git_commit", dlb::build::git_commit());
  AddCustomContext("build_type", dlb::build::build_type());
  AddCustomContext("compiler", dlb::build::cxx_compiler());
  AddCustomContext("march_native", dlb::build::native() ? "yes" : "no");
  AddCustomContext("alloc_counting", dlb::bench::alloc_counting() ? "yes" : "no (sanitizer build)");
  if (dlb::build::planted_slowdown()) AddCustomContext("planted_slowdown", "daxpy/cpu_loop +20% (test build)");
  AddCustomContext("cuda_compiler", dlb::build::cuda_compiler());
  AddCustomContext("cuda_architectures", dlb::build::cuda_architectures());
  AddCustomContext("cpu_model", dlb::cpu_model());
  AddCustomContext("cpu_id", dlb::cpu_id_text(dlb::cpu_id()));
  AddCustomContext("cpu_microarchitecture", dlb::cpu_microarchitecture(dlb::cpu_id()));
  AddCustomContext("cpu_cores", std::to_string(dlb::cpu_cores_usable()));
  AddCustomContext("omp_threads", std::to_string(dlb::cpu_threads()));
  AddCustomContext("cpu_vector_isa", dlb::cpu_vector_isa());
  std::string ext;
  if (dlb::cpu_has_avx512_vnni()) ext += "avx512_vnni ";
  if (dlb::cpu_has_avx512_bf16()) ext += "avx512_bf16 ";
  if (dlb::cpu_has_amx_int8()) ext += "amx_int8 ";
  if (dlb::cpu_has_amx_bf16()) ext += "amx_bf16 ";
  if (!ext.empty()) ext.pop_back();
  AddCustomContext("cpu_extensions", ext.empty() ? "none" : ext);
  AddCustomContext("onednn_version", dlb::onednn_version());
  AddCustomContext("onednn_isa", dlb::onednn_isa());
  AddCustomContext("eigen_version", dlb::eigen_version());
  AddCustomContext("cuda_runtime", gpu.cuda_runtime);
  AddCustomContext("cuda_driver", gpu.cuda_driver);
  AddCustomContext("cudnn_version", gpu.cudnn);
  AddCustomContext("cublas_version", gpu.cublas);
  AddCustomContext("machine_load_at_start", dlb::bench::machine_load_now());
  AddCustomContext("suite", std::string(dlb::bench::selected_suite().name));
  AddCustomContext("gpu_min_time_s", std::to_string(dlb::bench::gpu_min_time()));
  AddCustomContext("gpu_count", std::to_string(gpu.count));
  AddCustomContext("gpu_name", gpu.count > 0 ? gpu.name : "none");
  if (gpu.count > 0) AddCustomContext("gpu_compute_capability", gpu.compute_capability);
}

}  // namespace

int main(int argc, char** argv) {
  const bool display_aggregates_only = dlb::bench::take_display_aggregates_only(argc, argv);
  const bool json_out = dlb::bench::json_out_requested(argc, argv);  // before Initialize takes the flags
  // Takes --benchmark_* flags, leaves the rest; for --help prints
  // command_line.h's help and exits.
  benchmark::Initialize(&argc, argv, dlb::bench::print_help);

  dlb::bench::Config config;
  for (int i = 1; i < argc; ++i) config.flags.emplace_back(argv[i]);

  bool check_only = false;
  try {
    // bench's own switches (command_line.h), before the families take their flags.
    dlb::bench::reject_flags_without_value(config);
    const bool list_families = dlb::bench::take_switch(config, "list_families");
    check_only = dlb::bench::take_switch(config, "check_only");
    // Descriptors and --shapes, before --suite (user_shapes.h); --list_families
    // lists every family and refuses them as other flags.
    if (!list_families) dlb::bench::take_user_shapes(config);
    // The suite and the GPU time per repetition, before any family registers
    // a case; the last --suite given wins (scripts/bench puts its default
    // first, the user's arguments after it).
    std::string suite = "full";
    for (std::string s = dlb::bench::take_flag(config, "suite"); !s.empty(); s = dlb::bench::take_flag(config, "suite"))
      suite = s;
    dlb::bench::select_suite(suite);
    if (const std::string t = dlb::bench::take_flag(config, "gpu_min_time"); !t.empty())
      dlb::bench::set_gpu_min_time(dlb::bench::parse_seconds("--gpu_min_time", t));
    const dlb::GpuInfo gpu = dlb::gpu_info();  // throws for a GPU that cannot be used
    config.gpu = gpu.count > 0;
    if (list_families) return dlb::bench::list_families(config, gpu);
    add_context(gpu);
    if (check_only) dlb::bench::start_check_only(config);
    for (auto registrar : dlb::bench::families()) registrar(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 2;
  }
  if (!config.flags.empty()) {
    std::fprintf(stderr, "bench: unknown argument '%s' (see --help: dlbench's flags, then Google Benchmark's)\n",
                 config.flags.front().c_str());
    return 2;
  }
  try {
    // What can be known to fail before anything runs (command_line.h).
    dlb::bench::require_gpu_for_suite(config.gpu);
    dlb::bench::require_trace_case();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 2;
  }
  if (!config.gpu)
    std::fprintf(stderr, "bench: %s: GPU cases are not registered (gpu: none)\n", dlb::bench::no_gpu_reason());
  dlb::bench::note_full_suite();

  if (check_only) {
    benchmark::RunSpecifiedBenchmarks(dlb::bench::check_only_reporter());
    benchmark::Shutdown();
    return dlb::bench::finish_check_only(config);
  }
  dlb::bench::TallyingReporter reporter(display_aggregates_only);
  // A JSON --benchmark_out is written after every case (json_out.h).
  dlb::bench::IncrementalJsonReporter json_file;
  benchmark::RunSpecifiedBenchmarks(&reporter, json_out ? &json_file : nullptr);
  benchmark::Shutdown();
  std::fprintf(stderr, "bench: %s\n", reporter.summary().c_str());
  if (!dlb::bench::input_errors().empty()) {
    for (const auto& message : dlb::bench::input_errors()) std::fprintf(stderr, "bench: %s\n", message.c_str());
    return 2;
  }
  for (const auto& finish : config.at_end)
    if (const int status = finish(); status != 0) return status;
  return 0;
}
