// daxpy on the CPU: a plain loop and its OpenMP + SIMD version. Both use one
// fused multiply-add per element (std::fma becomes vfmadd with -march=native).
#include <cmath>

#include "kernels/daxpy/daxpy.h"

#include <chrono>

namespace dlb {

// False, unless the build is the regression-tracking test build
// (-DDLB_PLANTED_SLOWDOWN=ON): then daxpy_loop spins for another fifth of the
// time its loop took, a known 20% regression for scripts/compare.py to find
// (the result is unchanged). The flag is data defined in daxpy_planted.cpp,
// the only file the option compiles differently, so that both builds have
// the same machine code at the same addresses: code placement alone moves
// the smallest cases by 15% on this machine, and would show up as other
// "regressions".
extern const bool kPlantedSlowdown;

void daxpy_loop(const DaxpyArgs& args) {
  const auto start = kPlantedSlowdown ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  const double a = args.a;
  const double* x = args.x;
  double* y = args.y;
  for (std::int64_t i = 0; i < args.n; ++i) y[i] = std::fma(a, x[i], y[i]);
  if (kPlantedSlowdown) {
    const auto took = std::chrono::steady_clock::now() - start;
    while (std::chrono::steady_clock::now() - start < took * 6 / 5) {
    }
  }
}

void daxpy_omp(const DaxpyArgs& args) {
  const double a = args.a;
  const double* __restrict x = args.x;
  double* __restrict y = args.y;
  const std::int64_t n = args.n;
  // Static schedule: equal contiguous chunks, one per thread, so each core
  // streams its own part of memory.
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

}  // namespace dlb
