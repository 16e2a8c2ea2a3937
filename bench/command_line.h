// bench's own command line around the families' flags (harness.h's
// DLB_BENCH_FLAG): --help (dlbench's flags, the suites and the environment,
// then Google Benchmark's flags), the switches --list_families and
// --check_only, and the checks made before anything runs.
#pragma once

#include <string_view>

#include "bench/harness.h"
#include "kernels/common/gpu.h"

namespace dlb::bench {

// benchmark::Initialize's help printer (it exits after it): every
// DLB_BENCH_FLAG, the suites, the environment variables, then Google
// Benchmark's flags.
void print_help();

// Removes the switch --<name> (a DLB_BENCH_FLAG whose value is "") from
// config.flags and returns whether it was there. Throws dlb::Error for
// --<name>=VALUE.
bool take_switch(Config& config, std::string_view name);

// Throws dlb::Error for one of dlbench's flags given without its value
// ("--conv needs a value: --conv=DESCRIPTOR[,DESCRIPTOR...], e.g. ...") or a
// switch given one; called before the families take their flags.
void reject_flags_without_value(const Config& config);

// Why GPU cases are not registered: "no CUDA device visible" or "built
// without CUDA".
const char* no_gpu_reason();

// --list_families: registers every family's cases (the full suite, the GPU
// variants whether or not a GPU is visible), prints each family (what it
// answers, its case names, its suites, its CPU and GPU variants) and returns
// the exit status; nothing is run. Throws dlb::Error for another of
// dlbench's flags beside it.
int list_families(Config& config, const GpuInfo& gpu);

// Check-only runs (check_only.h): before the families register. Throws
// dlb::Error for --trace beside it (a check-only run times nothing).
void start_check_only(const Config& config);
// The display reporter of a check-only run: the case lines are printed as
// the cases end, so it shows nothing.
benchmark::BenchmarkReporter* check_only_reporter();
// After the run: the tally on stdout; the exit status (CheckTally's, or
// else the first non-zero of config.at_end's).
int finish_check_only(const Config& config);

// After the families have registered, before anything runs; each throws
// dlb::Error:
//   the selected suite needs a GPU (Suite::needs_gpu) and there is none;
void require_gpu_for_suite(bool gpu);
//   --trace was given and the filter selects no case that writes a trace
//   (through Google Benchmark's own listing of what the filter selects).
void require_trace_case();

// Before a timing run of the whole full suite (no --suite, no filter): a
// one-line note on stderr with the number of cases.
void note_full_suite();

}  // namespace dlb::bench
