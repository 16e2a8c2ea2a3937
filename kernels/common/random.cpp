#include "kernels/common/random.h"

#include <cstddef>
#include <limits>

namespace dlb {
namespace {

// SplitMix64 finalizer: a strong 64-bit mix, cheap enough for 2^28 elements.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t bits(std::uint64_t seed, std::uint64_t index) {
  return mix(mix(seed + 0x9e3779b97f4a7c15ULL) ^ (index * 0xd1b54a32d192ed03ULL));
}

template <class T>
void fill_float(std::span<T> out, std::uint64_t seed, const FillSpec& spec) {
  const auto n = static_cast<std::int64_t>(out.size());
  // Outlier decision uses a second, independent stream (seed + 1).
  const double fraction = spec.outlier_fraction < 1.0 ? spec.outlier_fraction : 1.0;
  const std::uint64_t outlier_threshold =
      fraction >= 1.0 ? std::numeric_limits<std::uint64_t>::max()
                      : static_cast<std::uint64_t>(fraction * 0x1.0p64);
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::uint64_t>(i);
    double v = spec.lo + (spec.hi - spec.lo) * unit_random(seed, u);
    if (fraction > 0 && bits(seed + 1, u) < outlier_threshold) v *= spec.outlier_scale;
    out[static_cast<std::size_t>(i)] = static_cast<T>(v);
  }
}

template <class T>
void fill_int(std::span<T> out, std::uint64_t seed, int lo, int hi) {
  const auto range = static_cast<std::uint64_t>(hi - lo + 1);
  const auto n = static_cast<std::int64_t>(out.size());
  // Parallel like fill_float (gigabyte byte buffers for the copy cases);
  // every element is a function of its index alone, so the result is the same.
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::uint64_t>(i);
    out[static_cast<std::size_t>(i)] = static_cast<T>(lo + static_cast<int>(bits(seed, u) % range));
  }
}

template <class T>
void fill_nan(std::span<T> out) {
  for (auto& v : out) v = std::numeric_limits<T>::quiet_NaN();
}

}  // namespace

double unit_random(std::uint64_t seed, std::uint64_t index) {
  return static_cast<double>(bits(seed, index) >> 11) * 0x1.0p-53;  // 53 random bits
}

void fill_random(std::span<float> out, std::uint64_t seed, const FillSpec& spec) {
  fill_float(out, seed, spec);
}
void fill_random(std::span<double> out, std::uint64_t seed, const FillSpec& spec) {
  fill_float(out, seed, spec);
}
void fill_random_int(std::span<std::int8_t> out, std::uint64_t seed, int lo, int hi) {
  fill_int(out, seed, lo, hi);
}
void fill_random_int(std::span<std::uint8_t> out, std::uint64_t seed, int lo, int hi) {
  fill_int(out, seed, lo, hi);
}
void poison_nan(std::span<float> out) { fill_nan(out); }
void poison_nan(std::span<double> out) { fill_nan(out); }
void poison_sentinel(std::span<std::int32_t> out) {
  for (auto& v : out) v = std::numeric_limits<std::int32_t>::min();
}

}  // namespace dlb
