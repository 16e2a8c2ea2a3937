#include "reference/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/common/error.h"

namespace dlb::ref {
namespace {

constexpr std::size_t kMaxListed = 10;

void list_mismatch(Comparison& c, std::size_t i, double got, double want) {
  ++c.mismatches;
  if (c.mismatches > kMaxListed) {
    c.truncated = true;
    return;
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "%s[%zu] got %.9g want %.9g", c.first.empty() ? "" : "; ", i, got, want);
  c.first += buf;
}

// max |ref| over the finite elements of ref, or 1 if that is 0 (an all-zero
// reference: the error is then absolute).
double scale_of(std::span<const double> ref) {
  double ref_max = 0.0;
  for (double r : ref)
    if (std::isfinite(r)) ref_max = std::max(ref_max, std::abs(r));
  return ref_max > 0.0 ? ref_max : 1.0;
}

// Compares out with ref, errors relative to `scale`, into c (elements
// listed as `first + i`); err_max and pattern_ok accumulate.
template <class T>
void compare_block(Comparison& c, double& err_max, bool& pattern_ok, std::span<const T> out,
                   std::span<const double> ref, double scale, std::size_t first, double tolerance) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double got = static_cast<double>(out[i]);
    const double want = ref[i];
    if (!std::isfinite(want)) {
      // NaN must stay NaN, +-inf must be the same infinity.
      const bool same = std::isnan(want) ? std::isnan(got) : got == want;
      if (!same) {
        pattern_ok = false;
        list_mismatch(c, first + i, got, want);
      }
      continue;
    }
    const double err = std::abs(got - want) / scale;  // NaN if got is NaN or inf
    if (!(err <= tolerance)) list_mismatch(c, first + i, got, want);
    if (std::isnan(err) || err > err_max) err_max = std::isnan(err) ? INFINITY : err;
  }
}

// Blocks of `block` elements, each scaled by its own max |ref|.
template <class T>
Comparison compare_blocks(std::span<const T> out, std::span<const double> ref, std::size_t block, double tolerance) {
  DLB_REQUIRE(out.size() == ref.size(), "output and reference differ in length");
  DLB_REQUIRE(block > 0 && out.size() % block == 0, "the output is not a whole number of rows");
  Comparison c;
  c.tolerance = tolerance;
  c.checked = out.size();
  double err_max = 0.0;
  bool pattern_ok = true;
  for (std::size_t begin = 0; begin < out.size(); begin += block) {
    const auto ref_block = ref.subspan(begin, block);
    compare_block(c, err_max, pattern_ok, out.subspan(begin, block), ref_block, scale_of(ref_block), begin,
                  tolerance);
  }
  c.max_rel_err = err_max;
  c.ok = pattern_ok && c.mismatches == 0;
  return c;
}

template <class T>
Comparison compare_float(std::span<const T> out, std::span<const double> ref, double tolerance) {
  return compare_blocks(out, ref, out.empty() ? 1 : out.size(), tolerance);
}

template <class T>
Comparison compare_exact(std::span<const T> out, std::span<const T> ref) {
  DLB_REQUIRE(out.size() == ref.size(), "output and reference differ in length");
  Comparison c;
  c.checked = out.size();
  // The common case, equal, in one memcmp-like pass: gigabyte buffers
  // compare in a fraction of a second. Only a mismatch takes the loop below.
  if (std::equal(out.begin(), out.end(), ref.begin())) {
    c.ok = true;
    return c;
  }
  double ref_max = 0.0, err_max = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    ref_max = std::max(ref_max, std::abs(static_cast<double>(ref[i])));
    const double err = std::abs(static_cast<double>(out[i]) - static_cast<double>(ref[i]));
    err_max = std::max(err_max, err);
    if (out[i] != ref[i]) list_mismatch(c, i, out[i], ref[i]);
  }
  c.max_rel_err = err_max / (ref_max > 0.0 ? ref_max : 1.0);
  c.ok = c.mismatches == 0;
  return c;
}

}  // namespace

std::string Comparison::summary() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: max_rel_err %.3g (tolerance %.3g), %zu of %zu elements off",
                ok ? "ok" : "WRONG RESULT", max_rel_err, tolerance, mismatches, checked);
  std::string s = buf;
  if (!first.empty()) s += ": " + first + (truncated ? "; ..." : "");
  return s;
}

Comparison compare(std::span<const float> out, std::span<const double> ref, double tolerance) {
  return compare_float(out, ref, tolerance);
}

Comparison compare(std::span<const double> out, std::span<const double> ref, double tolerance) {
  return compare_float(out, ref, tolerance);
}

Comparison compare_rows(std::span<const float> out, std::span<const double> ref, std::size_t row_length,
                        double tolerance) {
  return compare_blocks(out, ref, row_length, tolerance);
}

Comparison compare_scaled(std::span<const ScaledTensor> tensors, double tolerance) {
  Comparison c;
  c.tolerance = tolerance;
  c.ok = true;
  std::string worst_line;
  for (std::size_t j = 0; j < tensors.size(); ++j) {
    const ScaledTensor& t = tensors[j];
    DLB_REQUIRE(t.out.size() == t.ref.size() && t.scale.size() == t.ref.size(),
                "compare_scaled: output, reference and scale of " + t.name + " differ in length");
    double scale = 0.0;
    for (double m : t.scale)
      if (std::isfinite(m)) scale = std::max(scale, std::abs(m));
    // The elements go through compare()'s rule; their listing is left out
    // (a tensor's line says more), only the count is kept.
    Comparison elements;
    double err = 0.0;
    bool pattern_ok = true;
    const double bound = t.tolerance >= 0 ? t.tolerance : tolerance;
    c.tolerance = std::max(c.tolerance, bound);
    compare_block(elements, err, pattern_ok, t.out, t.ref, scale > 0.0 ? scale : 1.0, 0, bound);
    c.checked += t.out.size();
    c.mismatches += elements.mismatches;
    char line[256];
    std::snprintf(line, sizeof line, "%s: error %.3g of the largest magnitude %.3g (bound %.3g)", t.name.c_str(), err,
                  scale, bound);
    if (!pattern_ok || elements.mismatches > 0) {
      c.ok = false;
      c.first += std::string(c.first.empty() ? "" : "; ") + line;
    }
    if (j == 0 || !(err <= c.max_rel_err)) {
      c.max_rel_err = err;
      worst_line = line;
    }
  }
  if (c.ok && !worst_line.empty()) c.first = "worst " + worst_line;
  return c;
}

Comparison compare(std::span<const std::int32_t> out, std::span<const std::int32_t> ref) {
  return compare_exact(out, ref);
}

Comparison compare(std::span<const std::uint8_t> out, std::span<const std::uint8_t> ref) {
  return compare_exact(out, ref);
}

}  // namespace dlb::ref
