#include "kernels/gemm/gemm.h"

#include "kernels/common/cpu_info.h"
#if DLB_HAVE_ONEDNN
#include "kernels/common/onednn.h"
#endif

namespace dlb {

// Tolerances are on max|C - ref| / max|ref| (reference/compare.h), ref being
// the double-precision product of the inputs the variant was given (the
// bf16/fp16-rounded or quantized ones for those precisions). How far that is
// from the fp32 problem is the separate err_vs_f32 figure.
//
// fp32 (1e-5): fp32 accumulation over k <= ~10^4 terms stays well inside.
// bf16 (1e-5): bf16 products are exact in fp32 and AMX / AVX512-BF16
//   accumulate in fp32, so the error is the fp32 accumulation alone.
// tf32 (1e-3): cuBLAS rounds fp32 inputs to 10 mantissa bits (docs/architecture.md).
// fp16 (1e-3): fp16 products are exact in fp32, but tensor cores add them to
//   the fp32 accumulator with truncation, not round to nearest (Fasi et al.,
//   "Numerical behavior of NVIDIA tensor cores", 2021): a one-sided error of
//   half an ulp per addition on average, k * 2^-24 ~ 5.5e-4 at k = 9216.
//   Not yet run on a GPU.
// s8 (0, exact): the integer sum is exact and the output stage is one fp32
//   conversion and one fp32 multiply, which the reference reproduces.
// cpu_onednn_s8 (1e-6): exact integers, but oneDNN's AMX kernel applies the
//   zero-point compensation after converting to fp32 where a sum exceeds
//   2^24, so an element may differ by an fp32 rounding or two (measured
//   <= 1.6e-7 relative); below 2^24 it is bit-exact (tested). Registered
//   only where oneDNN's int8 is exact (onednn_int8_exact: VNNI or AMX; on
//   AVX2 its 16-bit pair sums saturate), bf16 where oneDNN has bf16.
// The last field of a row is its precision (f32 where left out).
constexpr GemmPrecision tf32 = GemmPrecision::tf32, bf16 = GemmPrecision::bf16, f16 = GemmPrecision::f16,
                        s8 = GemmPrecision::s8;

static const GemmVariant kGemmVariants[] = {
    {"cpu_naive_f32", Device::cpu, plain<gemm_naive_f32>, 1e-5},
#if DLB_HAVE_EIGEN
    {"cpu_eigen_f32", Device::cpu, plain<gemm_eigen_f32>, 1e-5},
#endif
#if DLB_HAVE_ONEDNN
    {"cpu_onednn_f32", Device::cpu, prepare_gemm_onednn_f32, 1e-5},
    {"cpu_onednn_bf16", Device::cpu, prepare_gemm_onednn_bf16, 1e-5, onednn_has_bf16, nullptr, 0, nullptr, bf16},
#endif
    {"cpu_ref_s8", Device::cpu, plain<gemm_ref_s8>, 0.0, nullptr, nullptr, 0, nullptr, s8},
    {"cpu_vnni_s8", Device::cpu, prepare_gemm_vnni_s8, 0.0, cpu_has_avx512_vnni, nullptr, 0, nullptr, s8},
#if DLB_HAVE_ONEDNN
    {"cpu_onednn_s8", Device::cpu, prepare_gemm_onednn_s8, 1e-6, onednn_int8_exact, nullptr, 0, nullptr, s8},
#endif
#if DLB_HAVE_CUDA
    {"gpu_cublas_f32", Device::gpu, prepare_gemm_cublas_f32, 1e-5},
    {"gpu_cublas_tf32", Device::gpu, prepare_gemm_cublas_tf32, 1e-3, nullptr, nullptr, 0, nullptr, tf32},
    {"gpu_cublas_f16", Device::gpu, prepare_gemm_cublas_f16, 1e-3, nullptr, nullptr, 0, nullptr, f16},
    {"gpu_cublaslt_s8", Device::gpu, prepare_gemm_cublaslt_s8, 0.0, nullptr, nullptr, 0, nullptr, s8},
    {"gpu_dp4a_s8", Device::gpu, prepare_gemm_dp4a_s8, 0.0, nullptr, nullptr, 0, nullptr, s8},
#endif
};

VariantTable<GemmArgs> gemm_variants() { return kGemmVariants; }

}  // namespace dlb
