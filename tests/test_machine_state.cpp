// bench/machine_state: the disturbance figures from two samples, contention
// seen when more threads than CPUs are busy, and the ceiling bracket.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include <omp.h>

#include "bench/machine_state.h"

namespace dlb::bench {
namespace {

TEST(Disturbance, IsTheStallTimeAndStolenTicksOverTheWindow) {
  MachineSample a, b;
  a.at = std::chrono::steady_clock::time_point{};
  b.at = a.at + std::chrono::seconds(2);
  a.pressure_us = 1000.0;
  b.pressure_us = 1000.0 + 0.5e6;  // 0.5 s of stall in 2 s
  a.steal_ticks = 10.0;
  b.steal_ticks = 30.0;
  a.all_ticks = 1000.0;
  b.all_ticks = 1400.0;  // 2 CPUs x 2 s x 100 Hz
  const Disturbance d = disturbance_between(a, b);
  EXPECT_DOUBLE_EQ(d.contention, 0.25);
  EXPECT_DOUBLE_EQ(d.steal, 0.05);
}

TEST(Disturbance, ContentionIsAtMostTheWholeWindow) {
  MachineSample a, b;
  b.at = a.at + std::chrono::seconds(1);
  a.pressure_us = 0.0;
  b.pressure_us = 1.002e6;  // stall counted a little past the window's end
  EXPECT_DOUBLE_EQ(disturbance_between(a, b).contention, 1.0);
}

TEST(Disturbance, IsNaNWhereTheMachineDoesNotReport) {
  MachineSample a, b;  // pressure and ticks < 0: unreadable
  b.at = a.at + std::chrono::seconds(1);
  const Disturbance d = disturbance_between(a, b);
  EXPECT_TRUE(std::isnan(d.contention));
  EXPECT_TRUE(std::isnan(d.steal));
}

TEST(Disturbance, SeesThreadsWaitingForACpu) {
  const MachineSample before = sample_machine();
  if (before.pressure_us < 0.0) GTEST_SKIP() << "no /proc/pressure/cpu on this kernel";
  // Twice as many spinning threads as CPUs for 300 ms: some task waits for a
  // CPU the whole time, however busy the machine already is.
  const unsigned threads = 2 * std::max(1u, std::thread::hardware_concurrency());
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < threads; ++i)
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  for (auto& t : spinners) t.join();
  const Disturbance d = disturbance_between(before, sample_machine());
  EXPECT_GT(d.contention, kNoisyContention);
}

TEST(Ceiling, BracketMeasuresABandwidth) {
  for (Ceiling c : {Ceiling::cpu_copy, Ceiling::cpu_triad}) {
    const double rate = measure_ceiling(c);
    EXPECT_TRUE(std::isfinite(rate)) << ceiling_name(c);
    EXPECT_GT(rate, 1e8) << ceiling_name(c);  // any machine streams 100 MB/s
  }
  const int threads = omp_get_max_threads();
  EXPECT_GT(measure_ceiling(Ceiling::cpu_copy, 1), 1e8);
  EXPECT_EQ(omp_get_max_threads(), threads);  // one thread for the bracket only
  EXPECT_EQ(ceiling_name(Ceiling::cpu_copy), "roofline/cpu_copy");
  EXPECT_EQ(ceiling_name(Ceiling::cpu_triad), "roofline/cpu_triad");
}

}  // namespace
}  // namespace dlb::bench
