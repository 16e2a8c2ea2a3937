// daxpy on the CPU: a plain loop and its OpenMP + SIMD version. Both use one
// fused multiply-add per element (std::fma becomes vfmadd with -march=native).
#include <cmath>

#include "kernels/daxpy/daxpy.h"

#if DLB_PLANTED_SLOWDOWN
#include <chrono>
#endif

namespace dlb {

void daxpy_loop(const DaxpyArgs& args) {
#if DLB_PLANTED_SLOWDOWN
  // Test builds only (cmake -DDLB_PLANTED_SLOWDOWN=ON): spin for another
  // fifth of the time the loop took, a known 20% regression for
  // scripts/compare.py to find. The result is unchanged.
  const auto start = std::chrono::steady_clock::now();
#endif
  const double a = args.a;
  const double* x = args.x;
  double* y = args.y;
  for (std::int64_t i = 0; i < args.n; ++i) y[i] = std::fma(a, x[i], y[i]);
#if DLB_PLANTED_SLOWDOWN
  const auto took = std::chrono::steady_clock::now() - start;
  while (std::chrono::steady_clock::now() - start < took * 6 / 5) {
  }
#endif
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
