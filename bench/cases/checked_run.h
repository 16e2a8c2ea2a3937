// The checked run every out-of-place case does before it is timed: poison
// the output, run once, wait, bring the output back, compare with the
// reference.
#pragma once

#include <span>

#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/common/random.h"
#include "reference/compare.h"

namespace dlb {

// `compare(std::span<const T> out)` judges the output.
template <class T, class Compare>
ref::Comparison checked_run(const Run& run, const ExecContext& ctx, Operand<T>& out, Compare&& compare) {
  poison_nan(out.host());
  out.upload();
  run();
  ctx.synchronize();
  out.download();
  return compare(std::span<const T>(out.host()));
}

template <class T>
ref::Comparison checked_run(const Run& run, const ExecContext& ctx, Operand<T>& out,
                            std::span<const double> expected, double tolerance) {
  return checked_run(run, ctx, out, [&](std::span<const T> got) { return ref::compare(got, expected, tolerance); });
}

}  // namespace dlb
