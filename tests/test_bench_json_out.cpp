// bench's JSON file reporter (bench/json_out.h): after every reported run
// group the file is valid JSON holding the runs so far, and at the end it is
// byte for byte what Google Benchmark's own JSONReporter writes for the same
// runs. Driven by Google Benchmark itself on benchmarks registered here.
#include <gtest/gtest.h>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/json_out.h"

namespace dlb::bench {
namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The context's "date" is the wall clock to the second; two reporters asked
// a moment apart may straddle a second.
std::string without_date(const std::string& json) {
  return std::regex_replace(json, std::regex("\"date\": \"[^\"]*\""), "\"date\": \"-\"");
}

// Passes every call to Google Benchmark's JSONReporter (into a string) and to
// the incremental one (into a file), and after each of the latter's reports
// reads the file back.
class Tee final : public benchmark::BenchmarkReporter {
 public:
  explicit Tee(const std::filesystem::path& path) : path_(path), file_(path, std::ios::binary | std::ios::trunc) {
    plain_.SetOutputStream(&plain_out_);
    plain_.SetErrorStream(&plain_out_);
    incremental_.SetOutputStream(&file_);
    incremental_.SetErrorStream(&file_);
  }
  bool ReportContext(const Context& context) override {
    plain_.ReportContext(context);
    const bool go_on = incremental_.ReportContext(context);
    snapshots_.push_back(read_file(path_));
    return go_on;
  }
  void ReportRuns(const std::vector<Run>& runs) override {
    plain_.ReportRuns(runs);
    incremental_.ReportRuns(runs);
    reported_ += static_cast<int>(runs.size());
    counts_.push_back(reported_);
    snapshots_.push_back(read_file(path_));
  }
  void Finalize() override {
    plain_.Finalize();
    incremental_.Finalize();
    file_.close();
  }
  std::string plain() const { return plain_out_.str(); }
  // The file after the context, then after each run group; the runs reported by then.
  const std::vector<std::string>& snapshots() const { return snapshots_; }
  const std::vector<int>& counts() const { return counts_; }

 private:
  std::filesystem::path path_;
  std::ofstream file_;
  std::ostringstream plain_out_;
  benchmark::JSONReporter plain_;
  IncrementalJsonReporter incremental_;
  int reported_ = 0;
  std::vector<int> counts_;
  std::vector<std::string> snapshots_;
};

void quick(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(state.iterations());
  state.counters["items"] = benchmark::Counter(1.0, benchmark::Counter::kIsRate);
  state.SetLabel("a \"quoted\" label");
}

void skipped(benchmark::State& state) { state.SkipWithError("planted error"); }

TEST(IncrementalJsonReporter, EveryReportLeavesValidJsonAndTheEndIsGoogleBenchmarks) {
  benchmark::RegisterBenchmark("json_out_test/quick", quick)->Iterations(3);
  benchmark::RegisterBenchmark("json_out_test/repeated", quick)->Iterations(2)->Repetitions(3);
  benchmark::RegisterBenchmark("json_out_test/skipped", skipped);
  benchmark::RegisterBenchmark("json_out_test/manual", [](benchmark::State& state) {
    for (auto _ : state) state.SetIterationTime(1e-6);
  })->UseManualTime()->Iterations(4);

  const auto path = std::filesystem::temp_directory_path() / ("dlb_json_out_" + std::to_string(::getpid()) + ".json");
  Tee tee(path);
  EXPECT_EQ(benchmark::RunSpecifiedBenchmarks(&tee, "^json_out_test/"), 4u);
  const std::string file = read_file(path);
  std::filesystem::remove(path);

  // The end: exactly Google Benchmark's file.
  EXPECT_EQ(without_date(file), without_date(tee.plain()));
  // After the context: valid, no runs yet; after each group: valid, every run so far.
  ASSERT_EQ(tee.snapshots().size(), tee.counts().size() + 1);
  for (std::size_t i = 0; i < tee.snapshots().size(); ++i) {
    SCOPED_TRACE("snapshot " + std::to_string(i));
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(tee.snapshots()[i])) << tee.snapshots()[i];
    EXPECT_TRUE(j.contains("context"));
    EXPECT_EQ(j["benchmarks"].size(), i == 0 ? 0u : static_cast<std::size_t>(tee.counts()[i - 1]));
  }
  // The groups: 1 run; 3 repetitions and their mean, median, stddev (and cv
  // from 1.7); the skipped case; 1 run.
  const auto last = nlohmann::json::parse(file);
  std::vector<std::string> names;
  for (const auto& b : last["benchmarks"]) names.push_back(b["run_name"]);
  EXPECT_EQ(names.front(), "json_out_test/quick/iterations:3");
  EXPECT_EQ(names.back(), "json_out_test/manual/iterations:4/manual_time");
  EXPECT_EQ(last["benchmarks"][0]["label"], "a \"quoted\" label");
  bool error_reported = false;
  for (const auto& b : last["benchmarks"]) error_reported |= b.value("error_message", "") == "planted error";
  EXPECT_TRUE(error_reported);
}

TEST(IncrementalJsonReporter, TheClosingIsJsonReportersFinalize) {
  IncrementalJsonReporter r;
  EXPECT_EQ(r.closing(), "\n  ]\n}\n");  // Google Benchmark 1.7's
}

TEST(JsonOutRequested, ReadsTheFlagsAsGoogleBenchmarkDoes) {
  ::unsetenv("BENCHMARK_OUT");
  ::unsetenv("BENCHMARK_OUT_FORMAT");
  const auto requested = [](std::vector<const char*> args) {
    args.insert(args.begin(), "bench");
    return json_out_requested(static_cast<int>(args.size()), args.data());
  };
  EXPECT_FALSE(requested({}));
  EXPECT_TRUE(requested({"--benchmark_out=f.json"}));  // json is the default format
  EXPECT_TRUE(requested({"--benchmark_out=f.json", "--benchmark_out_format=json"}));
  EXPECT_FALSE(requested({"--benchmark_out=f.csv", "--benchmark_out_format=csv"}));
  EXPECT_FALSE(requested({"--benchmark_out=f", "--benchmark_out_format=console"}));
  EXPECT_FALSE(requested({"--benchmark_out_format=json"}));  // no file
  EXPECT_FALSE(requested({"--benchmark_out="}));
  // The last one counts.
  EXPECT_TRUE(requested({"--benchmark_out_format=csv", "--benchmark_out=f", "--benchmark_out_format=json"}));
  EXPECT_FALSE(requested({"--benchmark_out=f", "--benchmark_out="}));
  // Not flags Google Benchmark takes.
  EXPECT_FALSE(requested({"--benchmark_out", "f.json"}));
  EXPECT_FALSE(requested({"-benchmark_out=f.json"}));
  // The environment where a flag is absent.
  ::setenv("BENCHMARK_OUT", "env.json", 1);
  EXPECT_TRUE(requested({}));
  ::setenv("BENCHMARK_OUT_FORMAT", "csv", 1);
  EXPECT_FALSE(requested({}));
  EXPECT_TRUE(requested({"--benchmark_out_format=json"}));
  ::unsetenv("BENCHMARK_OUT");
  ::unsetenv("BENCHMARK_OUT_FORMAT");
}

}  // namespace
}  // namespace dlb::bench
