// --benchmark_out=FILE in JSON, written as the run goes: a family that
// `timeout` cuts keeps every case it finished. Google Benchmark's own file
// reporter writes the file only at the end.
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <sstream>
#include <string>
#include <vector>

namespace dlb::bench {

// Google Benchmark's JSONReporter, writing into a buffer; after the context
// and after every reported run group, the new bytes go to the output stream
// (the file Google Benchmark opened for --benchmark_out) at the end of what
// is there, followed by JSONReporter's own closing (what its Finalize
// writes, taken from a JSONReporter at construction), and the stream is
// flushed. So at every moment between two reports the file is complete,
// valid JSON: the cases so far, in exactly Google Benchmark's format. The
// next report overwrites the closing; Finalize leaves exactly what Google
// Benchmark would have written. SIGTERM, SIGINT, SIGHUP and SIGQUIT are
// held back during each write, so a `timeout` or a Ctrl-C never leaves a
// half-written report (SIGKILL cannot be held back: `timeout -k` after its
// grace period could).
class IncrementalJsonReporter final : public benchmark::BenchmarkReporter {
 public:
  IncrementalJsonReporter();
  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;
  void Finalize() override;

  // What JSONReporter's Finalize writes ("\n  ]\n}\n" in 1.7).
  const std::string& closing() const { return closing_; }

 private:
  // Writes what the inner reporter added since the last write, then the
  // closing (unless `final`: the inner reporter's Finalize wrote it).
  void write_new_bytes(bool final);

  std::ostringstream buffer_;
  benchmark::JSONReporter inner_;
  std::string closing_;
  std::streamoff written_ = 0;  // bytes of the report in the file, before the closing
};

// Whether Google Benchmark will write --benchmark_out in JSON: a file is
// named and the format is json. Read from argv before benchmark::Initialize
// takes the flags, as Google Benchmark reads them: `--benchmark_out=FILE`
// and `--benchmark_out_format=FORMAT`, the last of each counting, the
// environment (BENCHMARK_OUT, BENCHMARK_OUT_FORMAT) where a flag is absent,
// format json by default. bench passes IncrementalJsonReporter as the file
// reporter only then: Google Benchmark refuses a file reporter without
// --benchmark_out, and other formats keep its own reporter.
bool json_out_requested(int argc, const char* const* argv);

}  // namespace dlb::bench
