#include "bench/machine_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>

#include <omp.h>

#include "kernels/common/buffer.h"
#include "kernels/roofline/roofline.h"

namespace dlb::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "some avg10=0.00 avg60=0.00 avg300=0.00 total=123" -> the field `key`.
double pressure_field(const std::string& line, const std::string& key) {
  const auto at = line.find(key + "=");
  if (at == std::string::npos) return -1.0;
  return std::strtod(line.c_str() + at + key.size() + 1, nullptr);
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

MachineSample sample_machine() {
  MachineSample s;
  s.at = std::chrono::steady_clock::now();
  const std::string pressure = first_line("/proc/pressure/cpu");
  if (pressure.rfind("some ", 0) == 0) s.pressure_us = pressure_field(pressure, "total");
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice
  std::istringstream stat(first_line("/proc/stat"));
  std::string tag;
  stat >> tag;
  if (tag == "cpu") {
    double total = 0.0, v = 0.0;
    int column = 0;
    while (stat >> v) {
      if (column == 7) s.steal_ticks = v;
      if (column < 8) total += v;  // guest time is already counted in user
      ++column;
    }
    if (column >= 8) s.all_ticks = total;
  }
  return s;
}

Disturbance disturbance_between(const MachineSample& before, const MachineSample& after) {
  const double wall_us = std::chrono::duration<double, std::micro>(after.at - before.at).count();
  Disturbance d{kNaN, kNaN};
  if (before.pressure_us >= 0.0 && after.pressure_us >= 0.0 && wall_us > 0.0)
    // At most the whole window: the clock is read before the PSI file, so
    // the stall counted can run a little past the window (100.2% was seen).
    d.contention = std::min(1.0, (after.pressure_us - before.pressure_us) / wall_us);
  const double ticks = after.all_ticks - before.all_ticks;
  if (before.steal_ticks >= 0.0 && after.steal_ticks >= 0.0 && ticks > 0.0)
    d.steal = (after.steal_ticks - before.steal_ticks) / ticks;
  else if (before.steal_ticks >= 0.0 && after.steal_ticks >= 0.0)
    d.steal = 0.0;  // shorter than a tick: nothing to see at this resolution
  return d;
}

std::string ceiling_name(Ceiling ceiling) {
  return ceiling == Ceiling::cpu_copy ? "roofline/cpu_copy" : "roofline/cpu_triad";
}

namespace {

// The bracket's arrays: a and c for copy, a, b and c for triad.
struct BracketArrays {
  std::int64_t n;
  HostBuffer<double> a, b, c;
  explicit BracketArrays(std::int64_t count)
      : n(count), a(static_cast<std::size_t>(count)), b(static_cast<std::size_t>(count)),
        c(static_cast<std::size_t>(count)) {
    std::fill(a.data(), a.data() + n, 1.0);
    std::fill(b.data(), b.data() + n, 2.0);
    std::fill(c.data(), c.data() + n, 3.0);
  }
};

// The L3 this CPU sees, from sysfs ("32768K"); 0 where unknown. Not
// sysconf(_SC_LEVEL3_CACHE_SIZE): on an EPYC guest glibc reports the whole
// socket's L3 (384 MiB for twelve 32 MiB core complexes), of which a
// process reaches its own complex's.
std::int64_t l3_bytes() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  std::int64_t value = 0;
  char unit = 0;
  if (!(in >> value)) return 0;
  in >> unit;
  return unit == 'K' ? value << 10 : unit == 'M' ? value << 20 : value;
}

BracketArrays& bracket_arrays() {
  // Four times the L3 (STREAM's rule), within 2^24 doubles (128 MiB, four
  // times the 32 MiB L3 of the EPYC VMs this was tuned on) and 2^26.
  static BracketArrays arrays(
      std::clamp<std::int64_t>(4 * l3_bytes() / 8, std::int64_t{1} << 24, std::int64_t{1} << 26));
  return arrays;
}

constexpr int kBracketPasses = 3;
constexpr double kTriadScalar = 3.0;

}  // namespace

double measure_ceiling(Ceiling ceiling, int threads) {
  auto& arr = bracket_arrays();
  // The kernels' parallel regions follow this thread's setting; put back after.
  const int all = omp_get_max_threads();
  if (threads > 0) omp_set_num_threads(threads);
  const double bytes = (ceiling == Ceiling::cpu_copy ? 16.0 : 24.0) * static_cast<double>(arr.n);
  double best = std::numeric_limits<double>::infinity();
  for (int pass = 0; pass < kBracketPasses; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    if (ceiling == Ceiling::cpu_copy) {
      stream_copy(arr.a.data(), arr.c.data(), arr.n);
    } else {
      stream_triad(arr.a.data(), arr.b.data(), arr.c.data(), kTriadScalar, arr.n);
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  omp_set_num_threads(all);
  return bytes / best;
}

std::string machine_load_now() {
  std::string out;
  double one = 0, five = 0, fifteen = 0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &one, &five, &fifteen) == 3) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "loadavg %.2f %.2f %.2f", one, five, fifteen);
      out = buf;
    }
    std::fclose(f);
  }
  const std::string pressure = first_line("/proc/pressure/cpu");
  if (pressure.rfind("some ", 0) == 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "cpu pressure avg10 %.2f%% avg60 %.2f%%", pressure_field(pressure, "avg10"),
                  pressure_field(pressure, "avg60"));
    out.append(out.empty() ? "" : "; ").append(buf);
  }
  return out.empty() ? "unknown" : out;
}

}  // namespace dlb::bench
