// A softmax or log-softmax problem set up for one variant: a seeded input
// (with special rows when asked), the double-precision reference, and the
// prepared call. The benchmark validates and then times it; the tests
// validate it over many shapes and inputs.
//
// Validation, before any timing: y is poisoned with NaN, the variant runs
// once, and
//   - every row is compared with the reference by its own max-norm relative
//     error, max_j |y_ij - ref_ij| / max_j |ref_ij| (ref::compare_rows):
//     softmax rows of different spread live on different scales, and one
//     global max would let the errors of a flat row vanish. NaN and +-inf
//     must match the reference exactly;
//   - every row whose reference is not NaN must sum to 1 (log-softmax: its
//     exp) within the variant's tolerance.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/softmax/softmax.h"
#include "reference/compare.h"

namespace dlb {

// What goes into x. Every value is seeded; no zeros.
enum class SoftmaxInput {
  random,  // uniform [-1, 1), one in 1000 scaled by 64
  // random, with rows 0-3 large_magnitude, masked, one_unmasked, all_equal
  // when there are at least 16 rows (what the benchmark validates)
  mixed,
  // The rest: the even rows take the pattern, the odd rows stay random.
  large_magnitude,  // +-1e4 (random sign) plus uniform [-4, 4)
  masked,           // every third element (j % 3 == 1) -inf
  one_unmasked,     // -inf except element cols / 2
  all_equal,        // one random value repeated
  all_masked,       // only -inf: the output row is NaN (0/0, see softmax.h)
  nan,              // element cols / 3 NaN: the output row is NaN
};
const char* softmax_input_name(SoftmaxInput input);

class SoftmaxCase {
 public:
  // x_offset, y_offset: elements by which x and y start past a 64-byte
  // boundary (unaligned rows). rows, cols >= 1.
  SoftmaxCase(const SoftmaxVariant& variant, SoftmaxKind kind, std::int64_t rows, std::int64_t cols,
              SoftmaxInput input = SoftmaxInput::random, std::size_t x_offset = 0, std::size_t y_offset = 0);

  ref::Comparison validate();
  void run() { run_(); }
  const ExecContext& context() const { return ctx_; }
  // Minimum traffic of one call: read x once, write y once.
  double bytes_per_call() const {
    return 2.0 * static_cast<double>(sizeof(float)) * static_cast<double>(rows_) * static_cast<double>(cols_);
  }
  // The output of the last validate(), on the host, and the reference.
  std::span<const float> output() const { return y_.host(); }
  std::span<const double> expected() const;

 private:
  const SoftmaxVariant& variant_;
  SoftmaxKind kind_;
  std::int64_t rows_, cols_;
  ExecContext ctx_;
  Operand<float> x_, y_;
  struct Problem;  // the seeded input and its reference (last_problem.h)
  std::shared_ptr<const Problem> problem_;
  Run run_;
};

}  // namespace dlb
