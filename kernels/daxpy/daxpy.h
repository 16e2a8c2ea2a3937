// daxpy: y = a*x + y, fp64, x and y of length n. Memory-bound: per element
// 2 loads and 1 store (24 bytes), 2 flops.
//
// Variants (the table in daxpy.cpp):
//   cpu_loop    plain loop, one thread (whatever the compiler vectorizes)
//   cpu_omp     OpenMP across all cores, explicitly vectorized (omp simd)
//   cpu_eigen   Eigen: y += a * x on mapped vectors
//   gpu_naive   one element per thread
//   gpu_vec     16-byte loads (double2), grid-stride loop
//   gpu_cublas  cublasDaxpy
#pragma once

#include <cstdint>

#include "kernels/common/variant.h"

namespace dlb {

struct DaxpyArgs {
  std::int64_t n = 0;
  double a = 0.0;
  const double* x = nullptr;  // [n]
  double* y = nullptr;        // [n], updated in place
};

using DaxpyVariant = Variant<DaxpyArgs>;
VariantTable<DaxpyArgs> daxpy_variants();

void daxpy_loop(const DaxpyArgs& args);
void daxpy_omp(const DaxpyArgs& args);
void daxpy_eigen(const DaxpyArgs& args);
void launch_daxpy_naive(const DaxpyArgs& args, CUstream_st* stream);
void launch_daxpy_vec(const DaxpyArgs& args, CUstream_st* stream);
Run prepare_daxpy_cublas(const DaxpyArgs& args, const Exec& exec);

}  // namespace dlb
