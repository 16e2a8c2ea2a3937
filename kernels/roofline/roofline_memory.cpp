#include "kernels/roofline/roofline_memory.h"

#include <algorithm>
#include <cmath>

namespace dlb {

std::int64_t memory_part_elements(MemoryPattern p, std::size_t element_bytes, double bytes) {
  const auto n = static_cast<std::int64_t>(std::floor(bytes / memory_bytes_per_element(p, element_bytes)));
  return n - n % 2;
}

double median_seconds(std::span<const double> seconds) {
  if (seconds.empty()) return -1;
  std::vector<double> sorted(seconds.begin(), seconds.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted[sorted.size() / 2];
}

int best_memory_part(std::span<const MemoryTiming> parts) {
  int best = -1;
  double best_rate = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const double t = median_seconds(parts[i].seconds);
    if (t <= 0) continue;
    const double rate = parts[i].bytes / t;
    if (best < 0 || rate > best_rate) {
      best = static_cast<int>(i);
      best_rate = rate;
    }
  }
  return best;
}

}  // namespace dlb
