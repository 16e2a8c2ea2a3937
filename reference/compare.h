// Comparing an output with the reference: the one check every benchmark runs
// before timing and every test asserts.
//
// The figure is the relative max-norm error
//     max_rel_err = max_i |out_i - ref_i| / max_i |ref_i|
// over the elements whose reference is finite. Normwise, so an element whose
// reference is near zero does not dominate; a max norm, so one bad element
// among millions is not averaged away (an L2 norm would be). Elementwise on
// top: where the reference is NaN or +-inf the output must be the same, and a
// NaN in the output where the reference is finite is a failure whatever the
// tolerance (that is how an element the kernel never wrote shows: outputs are
// poisoned with NaN before the checked run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace dlb::ref {

struct Comparison {
  bool ok = false;
  double max_rel_err = 0.0;
  double tolerance = 0.0;
  std::size_t checked = 0;     // elements compared
  std::size_t mismatches = 0;  // elements over tolerance, or with a NaN/inf mismatch
  std::string first;           // the first mismatches (at most 10), with indices
  bool truncated = false;      // more mismatches than `first` lists
  // One line for a log or SkipWithError.
  std::string summary() const;
};

// tolerance: largest accepted max_rel_err; 0 demands bitwise-equal values.
Comparison compare(std::span<const float> out, std::span<const double> ref, double tolerance);
Comparison compare(std::span<const double> out, std::span<const double> ref, double tolerance);
// Row by row: out and ref are rows of `row_length` elements and each row's
// errors are relative to that row's own max |ref|; max_rel_err is the
// largest over the rows. For outputs whose rows live on different scales
// (softmax of rows of different spread), where one global max would let a
// small row's errors vanish. Element rules and listing as for compare().
Comparison compare_rows(std::span<const float> out, std::span<const double> ref, std::size_t row_length,
                        double tolerance);
// Tensors whose rounding errors scale with something other than their
// own values: a gradient's with the magnitudes of the terms it sums (the
// same backward pass on |W|, |x|, ...: reference/nn/train/train.h's
// TrainGradients::magnitudes), which may be far larger than the gradient
// where the sum cancels, as the error bound nn::gradient_tolerance derives
// is. The same rule as compare() with that scale: each tensor's error is
// max_i |out_i - ref_i| / max_i scale_i (absolute where the scale is all
// zero), held to `tolerance`, element rules as for compare(); max_rel_err
// is the largest over the tensors. `first` names each tensor over the bound
// ("conv1.weight: error 2e-3 of the largest magnitude 5.6 (bound 6.2e-4)"),
// or, all within it, the worst one.
struct ScaledTensor {
  std::string name;
  std::span<const float> out;
  std::span<const double> ref;
  std::span<const double> scale;  // as long as ref
  double tolerance = -1;          // where >= 0, this tensor's own bound in place of compare_scaled's
};
Comparison compare_scaled(std::span<const ScaledTensor> tensors, double tolerance);
// Integer results and raw bytes are compared exactly.
Comparison compare(std::span<const std::int32_t> out, std::span<const std::int32_t> ref);
Comparison compare(std::span<const std::uint8_t> out, std::span<const std::uint8_t> ref);

}  // namespace dlb::ref
