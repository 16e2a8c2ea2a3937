// A GEMM problem set up for one variant: seeded fp32 A [m,k] and B [k,n],
// turned into what the variant takes (kernels/gemm/gemm.h): kept as fp32,
// rounded to bf16 or fp16, or quantized (A u8 per tensor, B s8 per output
// channel); the prepared call; and its validation. The benchmark validates
// and times it, the tests validate it over many shapes.
//
// Validation compares rows of C with the double-precision reference of the
// inputs the variant was given (for s8: the exact integer product through the
// output stage): every row up to kFullCheckMacs multiply-adds, 16 spread rows
// (first and last included) above, where the O(mnk) reference would take
// longer than the benchmark. All of C is poisoned with NaN first and must
// come back NaN-free, checked rows or not.
// err_vs_f32 is the same comparison of the same rows against the product of
// the original fp32 A and B: what the precision costs a user.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "kernels/gemm/gemm.h"
#include "reference/compare.h"

namespace dlb {

class GemmCase {
 public:
  static constexpr std::int64_t kFullCheckMacs = std::int64_t{1} << 27;
  static constexpr std::int64_t kSpotRows = 16;

  GemmCase(const GemmVariant& variant, std::int64_t m, std::int64_t n, std::int64_t k);

  ref::Comparison validate();
  void run() { run_(); }
  const ExecContext& context() const { return ctx_; }
  GemmPrecision precision() const { return precision_; }
  double flops_per_call() const { return 2.0 * static_cast<double>(m_) * static_cast<double>(n_) * static_cast<double>(k_); }
  // After validate(): max|C - C_f32| / max|C_f32| over the checked rows,
  // C_f32 the exact product of the original fp32 A and B (reference/compare.h).
  double err_vs_f32() const { return err_vs_f32_; }
  // After validate(), s8 only: the largest |integer sum| over the checked rows
  // (below 2^24 every int32 sum is exact in fp32).
  std::int64_t max_abs_sum() const { return max_abs_sum_; }
  // The library's implementation, where the variant names one (oneDNN).
  const std::string& implementation() const { return implementation_; }

 private:
  std::vector<std::int64_t> checked_rows() const;
  std::vector<double> expected_rows(const std::vector<std::int64_t>& rows);

  const GemmVariant& variant_;
  GemmPrecision precision_;
  std::int64_t m_, n_, k_;
  ExecContext ctx_;
  Operand<float> a_, b_;                 // the original fp32 A and B (on the device for f32, tf32)
  Operand<std::uint16_t> a16_, b16_;     // bf16, f16
  HostBuffer<float> a16_values_, b16_values_;  // bf16, f16: the rounded values, for the reference
  Operand<std::uint8_t> a_u8_;           // s8: quantized A (host; the variant's on the CPU)
  Operand<std::int8_t> a_s8_, b_s8_;     // s8: A - 128 (GPU only), quantized B
  Operand<float> c_scale_;               // s8: [n]
  std::int32_t a_zero_point_ = 0;
  Operand<float> c_;
  std::string implementation_;
  Run run_;
  double err_vs_f32_ = 0.0;
  std::int64_t max_abs_sum_ = 0;
};

}  // namespace dlb
