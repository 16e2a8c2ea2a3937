// References for the copy family. A plain copy needs none: its reference is
// the seeded bytes that went in, compared byte for byte. The chunk
// pipeline's kernel needs one:
//
// out[i] = a * x[i] + b in double precision. The product of two floats is
// exact in double (24 + 24 significant bits < 53), so this is the exact
// result up to one double rounding. The GPU's fmaf rounds the exact result
// once to float: at most 2^-24 relative to the element, below 6e-8 of the
// largest |out| (see the tolerance in bench/cases/copy_case.cpp).
#pragma once

#include <span>

namespace dlb::ref {

void scale_shift(float a, float b, std::span<const float> x, std::span<double> out);

}  // namespace dlb::ref
