// bench --check_only's path (bench/harness.cpp, bench/check_only.h) on
// planted cases: a right result ends the body at its validation, untimed; a
// wrong one, an error, an unsupported problem, bad input and a case that is
// never validated each get their line; a case is reported once however often
// Google Benchmark calls it; the exit status follows the worst verdict.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/check_only.h"
#include "bench/harness.h"
#include "kernels/common/error.h"

namespace dlb::bench {
namespace {

using V = CheckOutcome::Verdict;

ref::Comparison comparison(bool ok, double max_rel_err) {
  ref::Comparison c;
  c.ok = ok;
  c.max_rel_err = max_rel_err;
  c.tolerance = 1e-5;
  c.checked = 10;
  c.mismatches = ok ? 0 : 3;
  if (!ok) c.first = "[2] 1.5 vs 1";
  return c;
}

class Silent final : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

TEST(CheckOnly, EveryCaseEndsAtItsValidationWithOneOutcome) {
  // Three repetitions, as scripts/bench asks for: still one outcome a case.
  std::string program = "test_check_only", repetitions = "--benchmark_repetitions=3";
  char* argv[] = {program.data(), repetitions.data(), nullptr};
  int argc = 2;
  benchmark::Initialize(&argc, argv);

  std::vector<CheckOutcome> outcomes;
  set_check_only([&](const CheckOutcome& o) { outcomes.push_back(o); });
  ASSERT_TRUE(check_only());
  int timed = 0;
  const auto validated = [&timed](bool ok) {
    return [&timed, ok](benchmark::State& state) {
      if (!check(state, comparison(ok, ok ? 1e-7 : 0.5))) return;
      for (auto _ : state) ++timed;
    };
  };
  add_case("planted/right/n:1", Device::cpu, validated(true));
  add_case("planted/wrong/n:1", Device::cpu, validated(false));
  add_case("planted/unsupported/n:1", Device::cpu,
           [](benchmark::State&) { throw Unsupported("takes 3x3 filters only"); });
  add_case("planted/error/n:1", Device::cpu, [](benchmark::State&) { throw Error("cannot allocate 1 TiB"); });
  add_case("planted/bad_input/n:1", Device::cpu,
           [](benchmark::State& state) { report_input_error(state, "weights.safetensors cannot be read"); });
  add_case("planted/unchecked/n:1", Device::cpu, [&timed](benchmark::State& state) {
    for (auto _ : state) ++timed;
  });
  Silent silent;
  benchmark::RunSpecifiedBenchmarks(&silent);

  ASSERT_EQ(outcomes.size(), 6u);
  EXPECT_EQ(outcomes[0].name, "planted/right/n:1");
  EXPECT_EQ(outcomes[0].verdict, V::pass);
  EXPECT_EQ(check_line(outcomes[0]),
            "pass         planted/right/n:1: ok: max_rel_err 1e-07 (tolerance 1e-05), 0 of 10 elements off");
  EXPECT_EQ(outcomes[1].verdict, V::fail);
  EXPECT_EQ(check_line(outcomes[1]),
            "FAIL         planted/wrong/n:1: WRONG RESULT: max_rel_err 0.5 (tolerance 1e-05), 3 of 10 elements off: "
            "[2] 1.5 vs 1");
  EXPECT_EQ(check_line(outcomes[2]), "unsupported  planted/unsupported/n:1: takes 3x3 filters only");
  EXPECT_EQ(check_line(outcomes[3]), "FAIL         planted/error/n:1: error: cannot allocate 1 TiB");
  EXPECT_EQ(check_line(outcomes[4]), "bad input    planted/bad_input/n:1: weights.safetensors cannot be read");
  EXPECT_EQ(outcomes[5].verdict, V::fail);
  EXPECT_NE(check_line(outcomes[5]).find("never validated"), std::string::npos) << check_line(outcomes[5]);
  // Only the case that never validates reaches its timed loop (its first
  // call, one iteration); the right one never does.
  EXPECT_EQ(timed, 1);

  CheckTally tally;
  for (const auto& o : outcomes) tally.add(o);
  EXPECT_EQ(tally.summary(), "check_only: 6 cases: 1 pass, 3 FAIL, 1 unsupported, 1 bad input");
  EXPECT_EQ(tally.exit_status(), 1);
}

TEST(CheckOnly, ExitStatusIsZeroForPassesAndUnsupportedTwoForBadInput) {
  CheckTally fine;
  fine.add({"a/cpu/n:1", V::pass, ""});
  fine.add({"a/cpu/n:2", V::unsupported, "no"});
  EXPECT_EQ(fine.exit_status(), 0);
  EXPECT_EQ(fine.summary(), "check_only: 2 cases: 1 pass, 0 FAIL, 1 unsupported, 0 bad input");
  CheckTally bad = fine;
  bad.add({"a/cpu/n:3", V::bad_input, "missing"});
  EXPECT_EQ(bad.exit_status(), 2);
  bad.add({"a/cpu/n:4", V::fail, "wrong"});
  EXPECT_EQ(bad.exit_status(), 1);
}

TEST(CheckOnly, ALineIsOneLine) {
  EXPECT_EQ(check_line({"a/cpu/n:1", V::fail, "error: two\nlines"}), "FAIL         a/cpu/n:1: error: two lines");
}

}  // namespace
}  // namespace dlb::bench
