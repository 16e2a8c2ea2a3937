// A daxpy problem set up for one variant: seeded operands where the variant
// wants them, the reference result, and the prepared call. The benchmark
// validates and then times it; the tests validate it over many shapes.
#pragma once

#include <cstdint>

#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/daxpy/daxpy.h"
#include "reference/compare.h"

namespace dlb {

class DaxpyCase {
 public:
  // x_offset, y_offset: elements by which x and y start past a 64-byte
  // boundary (unaligned and differently aligned pointers).
  DaxpyCase(const DaxpyVariant& variant, std::int64_t n, std::size_t x_offset = 0,
            std::size_t y_offset = 0);

  // y := the seeded y0, one call, compare with the reference.
  ref::Comparison validate();
  void run() { run_(); }
  const ExecContext& context() const { return ctx_; }
  // Minimum traffic of one call: read x and y, write y.
  std::int64_t bytes_per_call() const { return 3 * static_cast<std::int64_t>(sizeof(double)) * n_; }

 private:
  const DaxpyVariant& variant_;
  std::int64_t n_;
  ExecContext ctx_;
  Operand<double> x_, y_;
  HostBuffer<double> y0_, expected_;
  Run run_;
};

}  // namespace dlb
