// Seeded test data. Values are a pure function of (seed, index), so a run is
// reproducible whatever the thread count, and any prefix of a longer array is
// the shorter array. Never zeros: uniform in [lo, hi) with a few outliers.
#pragma once

#include <cstdint>
#include <span>

namespace dlb {

struct FillSpec {
  double lo = -1.0;
  double hi = 1.0;
  double outlier_fraction = 1e-3;  // share of elements multiplied by outlier_scale
  double outlier_scale = 64.0;
};

void fill_random(std::span<float> out, std::uint64_t seed, const FillSpec& spec = {});
void fill_random(std::span<double> out, std::uint64_t seed, const FillSpec& spec = {});
// Integers uniform in [lo, hi] (inclusive), no outliers.
void fill_random_int(std::span<std::int8_t> out, std::uint64_t seed, int lo, int hi);
void fill_random_int(std::span<std::uint8_t> out, std::uint64_t seed, int lo, int hi);

// Quiet NaN everywhere, so that an output element a kernel never writes fails
// validation instead of passing with a stale value.
void poison_nan(std::span<float> out);
void poison_nan(std::span<double> out);

// For integer outputs: a sentinel (INT32_MIN) that no correct result of the
// integer GEMMs here can take (|result| < 2^31 - 1 by construction).
void poison_sentinel(std::span<std::int32_t> out);

// The value fill_random would put at `index`, in [0, 1): exposed for tests.
double unit_random(std::uint64_t seed, std::uint64_t index);

}  // namespace dlb
