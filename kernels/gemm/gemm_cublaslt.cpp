// int8 GEMM on the tensor cores through cuBLASLt: s8 x s8 -> s32 (IMMA
// kernels), then the output stage kernel (zero-point compensation and
// per-column scale, gemm_s8_gpu.h); both are the timed call.
//
// cuBLASLt's int8 kernels on the regular column-major order require (cuBLAS
// documentation, cublasLtMatmul): the "TN" form (first operand transposed,
// second not), dimensions m and k of the column-major problem multiples of
// 4, leading dimensions multiples of 4 and 4-byte aligned pointers. Row-major
// C[m,n] = A*B is column-major D [n x m] = op_T(Bt) * A^T with Bt = B^T
// stored [n,k] row-major (= column-major k x n, ld k; transposed once in
// prepare, like packing weights) and A [m,k] row-major (= column-major k x m,
// ld k). So n and k must be multiples of 4; other shapes are skipped with
// that reason.
#include <cstdint>
#include <memory>
#include <string>

#include <cublasLt.h>

#include "kernels/common/cuda_resources.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_s8_gpu.h"

namespace dlb {
namespace {

// cuBLASLt's handle and descriptors, destroyed with their owners.
using LtHandle = OwnedHandle<cublasLtHandle_t, cublasLtDestroy, "cublasLtDestroy">;
using LtMatmulDesc = OwnedHandle<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy">;
using LtLayout = OwnedHandle<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy">;
using LtPreference =
    OwnedHandle<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy">;

constexpr std::size_t kMaxWorkspace = std::size_t{32} << 20;

// Everything the timed call uses.
struct LtGemm {
  LtHandle handle;
  LtMatmulDesc desc;
  LtLayout bt_layout, a_layout, acc_layout;
  cublasLtMatmulAlgo_t algo{};
  DeviceBuffer<std::int8_t> bt;      // B^T [n,k]
  DeviceBuffer<std::int32_t> sums;   // column sums of B [n]
  DeviceBuffer<std::int32_t> acc;    // raw int32 sums [m,n]
  DeviceBuffer<unsigned char> workspace;
};

bool aligned4(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 4 == 0; }

// The alignment cuBLASLt may assume of p: the largest power of two dividing
// its address, at most 256 (the preference's default, which is what the
// heuristic assumes unless told).
std::uint32_t alignment_of(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

}  // namespace

Run prepare_gemm_cublaslt_s8(const GemmArgs& args, const Exec& exec) {
  const std::int64_t m = args.m, n = args.n, k = args.k;
  if (n % 4 != 0 || k % 4 != 0)
    throw Unsupported("cuBLASLt int8 (IMMA, TN layout) needs n and k multiples of 4, got n = " + std::to_string(n) +
                      ", k = " + std::to_string(k));
  if (!aligned4(args.a_s8) || !aligned4(args.c))
    throw Unsupported("cuBLASLt int8 needs 4-byte aligned A and C");
  DLB_REQUIRE(k <= kGemmS8MaxK, "gemm cuBLASLt: k too large for exact int32 sums");

  auto lt = std::make_shared<LtGemm>();
  lt->bt = DeviceBuffer<std::int8_t>(static_cast<std::size_t>(n * k));
  lt->sums = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(n));
  lt->acc = DeviceBuffer<std::int32_t>(static_cast<std::size_t>(m * n));
  launch_transpose_s8(args.b_s8, k, n, lt->bt.data(), exec.stream);
  launch_column_sums_s8(args.b_s8, k, n, lt->sums.data(), exec.stream);
  DLB_CUDA_CHECK(cudaStreamSynchronize(exec.stream));

  DLB_CUBLAS_CHECK(cublasLtCreate(lt->handle.out()));
  DLB_CUBLAS_CHECK(cublasLtMatmulDescCreate(lt->desc.out(), CUBLAS_COMPUTE_32I, CUDA_R_32I));
  const cublasOperation_t transpose = CUBLAS_OP_T;
  DLB_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(lt->desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose));
  // Column-major: D [n x m] (ld n) = op_T(Bt: k x n, ld k) * (A^T: k x m, ld k).
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(lt->bt_layout.out(), CUDA_R_8I, static_cast<std::uint64_t>(k),
                                              static_cast<std::uint64_t>(n), k));
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(lt->a_layout.out(), CUDA_R_8I, static_cast<std::uint64_t>(k),
                                              static_cast<std::uint64_t>(m), k));
  DLB_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(lt->acc_layout.out(), CUDA_R_32I, static_cast<std::uint64_t>(n),
                                              static_cast<std::uint64_t>(m), n));

  LtPreference preference;
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(preference.out()));
  const std::uint64_t max_workspace = kMaxWorkspace;
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &max_workspace, sizeof max_workspace));
  // The operands' real alignment (Bt and the accumulator are cudaMalloc'ed;
  // A comes from the caller), so that an algorithm is not chosen that
  // assumes more than a caller's A has.
  const std::uint32_t align_a = alignment_of(lt->bt.data()), align_b = alignment_of(args.a_s8),
                      align_cd = alignment_of(lt->acc.data());
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                        &align_a, sizeof align_a));
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                        &align_b, sizeof align_b));
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                        &align_cd, sizeof align_cd));
  DLB_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                        &align_cd, sizeof align_cd));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt->handle.get(), lt->desc.get(), lt->bt_layout.get(), lt->a_layout.get(),
                                     lt->acc_layout.get(), lt->acc_layout.get(), preference.get(), 1, &best, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0))
    throw Unsupported("cuBLASLt has no int8 algorithm for m = " + std::to_string(m) + ", n = " + std::to_string(n) +
                      ", k = " + std::to_string(k));
  DLB_CUBLAS_CHECK(status);
  lt->algo = best.algo;
  lt->workspace = DeviceBuffer<unsigned char>(best.workspaceSize);

  const std::int32_t zero_point = args.a_zero_point - 128;  // of the s8 encoding
  return [args, lt, zero_point, stream = exec.stream] {
    const std::int32_t alpha = 1, beta = 0;  // scale type int32 for CUBLAS_COMPUTE_32I
    DLB_CUBLAS_CHECK(cublasLtMatmul(lt->handle.get(), lt->desc.get(), &alpha, lt->bt.data(), lt->bt_layout.get(),
                                    args.a_s8, lt->a_layout.get(), &beta, lt->acc.data(), lt->acc_layout.get(),
                                    lt->acc.data(), lt->acc_layout.get(), &lt->algo, lt->workspace.data(),
                                    lt->workspace.bytes(), stream));
    launch_s8_output_stage(lt->acc.data(), args.m, args.n, zero_point, lt->sums.data(), args.c_scale, args.c, stream);
  };
}

}  // namespace dlb
