// Reference daxpy: y = a*x + y in fp64, one fused multiply-add per element.
//
// std::fma rounds a*x + y once, so the result is the exactly rounded value
// and there is only one right answer. Every daxpy variant computes each
// element with one FMA too (hardware FMA on the CPU with -march=native, DFMA
// on the GPU, cuBLAS) and no reduction reorders anything, so validation
// demands bit-equal results (tolerance 0).
#pragma once

#include <span>

namespace dlb::ref {

void daxpy(double a, std::span<const double> x, std::span<double> y);

}  // namespace dlb::ref
