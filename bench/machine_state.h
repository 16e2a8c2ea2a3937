// What the machine was doing while a case ran, and the memory ceiling
// measured right around it: the two things that tell a figure from a shared,
// drifting VM apart from a figure of the code.
//
//   contention  the fraction of the time at least one runnable task waited
//               for a CPU (Linux pressure stall information, /proc/pressure/cpu,
//               microseconds): another process competing with the case's
//               threads. 0 when dlbench runs alone, whatever its threads do.
//   steal       the fraction of the vCPUs' time the hypervisor gave to other
//               guests (/proc/stat, in 10 ms ticks: coarse over short windows).
//   bracket     the STREAM ceiling (the same kernel as roofline/cpu_copy or
//               roofline/cpu_triad, on arrays four times the last-level
//               cache) measured immediately before and immediately after the
//               case's timed loop, so a case is divided by the bandwidth the
//               machine had in the same second, not minutes away.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace dlb::bench {

// Cumulative counters of the machine at one instant.
struct MachineSample {
  std::chrono::steady_clock::time_point at;
  double pressure_us = -1.0;  // PSI cpu "some" total; < 0 where the kernel has no PSI
  double steal_ticks = -1.0;  // /proc/stat steal, summed over CPUs; < 0 where unreadable
  double all_ticks = -1.0;    // every column of /proc/stat's cpu line
};
MachineSample sample_machine();

// Between two samples; a field is NaN where the machine does not report it.
struct Disturbance {
  double contention;
  double steal;
};
Disturbance disturbance_between(const MachineSample& before, const MachineSample& after);

// Past these a repetition is `noisy` (docs/methodology.md, "Noise and disturbance flags",
// has the runs they were set from: with nothing else on the machine, half
// the brackets moved by less than 3% between before and after, about a
// tenth by more than 10%, where the memory bandwidth switched level;
// contention and steal passed 5% in 1-4% of the repetitions).
inline constexpr double kNoisyContention = 0.05;
inline constexpr double kNoisySteal = 0.05;
inline constexpr double kNoisyCeilingDrift = 0.10;  // |after / before - 1| of the bracket
// A case is noisy when more than this share of its repetitions is (the
// median of the rest stands).
inline constexpr double kNoisyShare = 0.2;
// A roofline ceiling is noisy when its repetitions' rates spread by more
// than this (relative median absolute deviation): the machine moved while
// it was measured.
inline constexpr double kNoisyCeilingSpread = 0.05;

enum class Ceiling { cpu_copy, cpu_triad };
std::string ceiling_name(Ceiling ceiling);  // "roofline/cpu_copy"

// The ceiling's bytes per second now: the best of a few passes of its STREAM
// kernel over arrays four times the last-level cache (at least 128 MiB
// each), allocated and touched on first use and kept for the process, on
// `threads` OpenMP threads (0: all the process may use).
double measure_ceiling(Ceiling ceiling, int threads = 0);

// The machine when the run starts: load averages and the CPU pressure
// averages of the last 10 s / 60 s, as one line for the JSON context.
std::string machine_load_now();

}  // namespace dlb::bench
