// gemm: C[m,n] = A[m,k] * B[k,n], row-major, C in fp32 for every variant;
// fp32 and the reduced precisions side by side, with the accuracy they cost.
// A plays the activations (quantized per tensor), B the weights (quantized
// per output channel, packed in prepare where a variant wants a layout of its
// own, as a framework does once per model). What each timed call includes:
//
//   cpu_naive_f32    i-k-j loops, one thread (the textbook loop, for scale)
//   cpu_eigen_f32    Eigen: C = A * B on row-major maps (its own blocking, OpenMP)
//   cpu_onednn_f32   oneDNN matmul primitive; B reordered to its layout in prepare
//   cpu_onednn_bf16  oneDNN matmul, bf16 A and B, fp32 accumulation and C (AMX
//                    where present; the label names oneDNN's implementation)
//   cpu_ref_s8       u8 x s8 plain loops (i-k-j), int32 accumulation, one thread,
//                    then the dequantizing output stage
//   cpu_vnni_s8      own AVX-512 VNNI kernel (vpdpbusd): B packed in prepare,
//                    A read in place; 6x64 register tiles (24x16, 12x32 for n <= 16,
//                    32), cache-blocked, OpenMP;
//                    zero-point compensation and output stage fused in the kernel.
//                    Registered only where the CPU has AVX-512 VNNI (run time)
//   cpu_onednn_s8    oneDNN matmul u8 x s8 -> s32 with the source zero point and
//                    the per-column output scale fused (fp32 C); AMX where present
//   gpu_cublas_f32   cublasSgemm, strict fp32 (CUBLAS_PEDANTIC_MATH: no TF32)
//   gpu_cublas_tf32  cublasGemmEx, fp32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32
//   gpu_cublas_f16   cublasGemmEx, fp16 A and B, fp32 accumulation and C (tensor cores)
//   gpu_cublaslt_s8  cuBLASLt int8 tensor cores (s8 x s8 -> s32), then an output
//                    stage kernel; needs n and k multiples of 4 (skipped otherwise)
//   gpu_dp4a_s8      own kernel: __dp4a, 64x64 tiles in shared memory, any m, n, k,
//                    output stage fused
//
// A row's precision field (its name ends in the same word) is what the
// variant computes in. What the variant is given, prepared outside the timed call:
//   f32, tf32  A and B as fp32 (tf32 rounds inside cuBLAS)
//   bf16, f16  A and B rounded to nearest even (kernels/gemm/quant.h)
//   s8         A as u8 per tensor (scale_a, zero point za); B as s8 symmetric
//              per column (scale_b[j]); c_scale[j] = scale_a * scale_b[j].
//              Every s8 variant computes the exact integer product
//                  acc[i,j] = sum_p (A_q[i,p] - za) * B_q[p,j]
//              and the output stage C[i,j] = fp32(acc[i,j]) * c_scale[j]
//              (one conversion, one fp32 multiply, both round to nearest even),
//              which the reference reproduces bit for bit.
//
// Integer ranges: a u8 x s8 product is at most 255 * 128 = 32640 in magnitude,
// so k <= kGemmS8MaxK keeps every int32 sum (the raw sum, the zero-point
// compensation za * colsum_j and their difference) exact. vpdpbusd adds its
// four products to the 32-bit accumulator without intermediate saturation and
// wraps on overflow (vpdpbusds would saturate); with k bounded nothing
// overflows, so the wrapping form is exact. The GPU paths take A as s8
// (A_q - 128, zero point za - 128): the same integers, since CUDA's int8 units
// multiply signed by signed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/common/precision.h"
#include "kernels/common/variant.h"

namespace dlb {

using GemmPrecision = Precision;

// Largest k for which the int8 GEMMs' int32 accumulators cannot overflow.
inline constexpr std::int64_t kGemmS8MaxK = (std::int64_t{1} << 31) / (255 * 128);

struct GemmArgs {
  std::int64_t m = 0, n = 0, k = 0;
  // Inputs in the variant's precision; the pointers of other precisions are null.
  const float* a = nullptr;            // f32, tf32: A [m,k]
  const float* b = nullptr;            // f32, tf32: B [k,n]
  const std::uint16_t* a16 = nullptr;  // bf16, f16: A [m,k], raw 16-bit patterns
  const std::uint16_t* b16 = nullptr;  // bf16, f16: B [k,n]
  const std::uint8_t* a_u8 = nullptr;  // s8, CPU: quantized A [m,k], zero point a_zero_point
  const std::int8_t* a_s8 = nullptr;   // s8, GPU: the same minus 128, zero point a_zero_point - 128
  std::int32_t a_zero_point = 0;       // s8: za of a_u8
  const std::int8_t* b_s8 = nullptr;   // s8: quantized B [k,n], symmetric
  const float* c_scale = nullptr;      // s8: [n], scale_a * scale_b[j]
  float* c = nullptr;                  // C [m,n], fp32
  // Out, optional: prepare writes the library's implementation here (oneDNN's
  // impl_info_str, e.g. "brg:avx512_core_amx"), for the benchmark label.
  std::string* implementation = nullptr;
};

}  // namespace dlb

template <>
struct dlb::VariantPrecision<dlb::GemmArgs> {
  using type = dlb::GemmPrecision;
};

namespace dlb {

using GemmVariant = Variant<GemmArgs>;
VariantTable<GemmArgs> gemm_variants();

// CPU
void gemm_naive_f32(const GemmArgs& args);
void gemm_eigen_f32(const GemmArgs& args);
void gemm_ref_s8(const GemmArgs& args);
Run prepare_gemm_vnni_s8(const GemmArgs& args, const Exec& exec);
Run prepare_gemm_onednn_f32(const GemmArgs& args, const Exec& exec);
Run prepare_gemm_onednn_bf16(const GemmArgs& args, const Exec& exec);
Run prepare_gemm_onednn_s8(const GemmArgs& args, const Exec& exec);
// GPU
Run prepare_gemm_cublas_f32(const GemmArgs& args, const Exec& exec);
Run prepare_gemm_cublas_tf32(const GemmArgs& args, const Exec& exec);
Run prepare_gemm_cublas_f16(const GemmArgs& args, const Exec& exec);
Run prepare_gemm_cublaslt_s8(const GemmArgs& args, const Exec& exec);
Run prepare_gemm_dp4a_s8(const GemmArgs& args, const Exec& exec);

}  // namespace dlb
