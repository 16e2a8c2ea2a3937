// daxpy on the CPU: a plain loop and its OpenMP + SIMD version. Both use one
// fused multiply-add per element (std::fma becomes vfmadd with -march=native).
#include <cmath>

#include "kernels/daxpy/daxpy.h"

namespace dlb {

void daxpy_loop(const DaxpyArgs& args) {
  const double a = args.a;
  const double* x = args.x;
  double* y = args.y;
  for (std::int64_t i = 0; i < args.n; ++i) y[i] = std::fma(a, x[i], y[i]);
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
