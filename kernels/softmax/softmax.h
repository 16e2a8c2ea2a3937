// Row-wise softmax and log-softmax of a [rows, cols] fp32 matrix, out of
// place: y_ij = exp(x_ij - m_i) / s_i with m_i = max_j x_ij and
// s_i = sum_j exp(x_ij - m_i); log-softmax y_ij = (x_ij - m_i) - log(s_i).
// Memory-bound: the minimum is one read of x and one write of y.
//
// softmax variants (the tables in softmax.cpp):
//   cpu_naive    five passes, each materializing its result (row max; x - max; exp; row sum;
//                divide): reads 5MN + 2M, writes 3MN + 2M elements. All cores, vectorized
//   cpu_fused    one read of each row (online max and sum, the exps kept in a per-thread buffer),
//                then the output pass; all cores (one long row split across them), AVX-512 with a
//                polynomial exp, streaming stores and next-row prefetch for large outputs
//   cpu_eigen    the natural Eigen expression (rowwise max, exp, rowwise sum), one thread
//   cpu_onednn   oneDNN's softmax primitive (softmax_v2, softmax_accurate)
//   gpu_naive    the same five passes as five kernels, temporaries in device memory
//   gpu_fused    one kernel, the row in registers: a warp per row for cols <= 1024, a block per
//                row up to 32768, vectorized loads; longer rows re-read from global memory
//   gpu_online   one kernel, a block per row: online max and sum in one read, then the output
//   gpu_cudnn    cudnnSoftmaxForward, CUDNN_SOFTMAX_ACCURATE, mode INSTANCE on [rows, cols, 1, 1]
// log_softmax variants: cpu_fused, cpu_onednn (softmax_log), gpu_fused, gpu_online, gpu_cudnn
// (CUDNN_SOFTMAX_LOG): the same kernels, the output step chosen by a template parameter.
//
// Special values follow IEEE arithmetic through the formula above, as the
// double-precision reference does (reference/softmax.h):
//   -inf entries (masked) give 0 (log-softmax: -inf) and do not disturb the row;
//   a NaN anywhere in a row makes the whole output row NaN; other rows are unaffected;
//   a row of only -inf is 0/0 (its max is -inf and x - max is NaN): the output row is NaN;
//   a +inf entry makes the row NaN (inf - inf).
#pragma once

#include <cstdint>

#include "kernels/common/variant.h"

namespace dlb {

enum class SoftmaxKind { softmax, log_softmax };

struct SoftmaxArgs {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  const float* x = nullptr;  // [rows, cols] row-major
  float* y = nullptr;        // [rows, cols] row-major, does not overlap x
};

using SoftmaxVariant = Variant<SoftmaxArgs>;
// "softmax" or "log_softmax": the <op> part of the benchmark names.
const char* softmax_op_name(SoftmaxKind kind);
VariantTable<SoftmaxArgs> softmax_variants(SoftmaxKind kind);

// cpu_fused writes y with streaming (non-temporal) stores from this size of
// y up: past the caches they save the read-for-ownership of every line of y;
// below it they would push a result the next op wants out of the cache.
inline constexpr std::int64_t kSoftmaxStreamingBytes = std::int64_t{16} << 20;

Run prepare_softmax_naive(const SoftmaxArgs& args, const Exec& exec);
template <SoftmaxKind K>
void softmax_fused(const SoftmaxArgs& args);
void softmax_eigen(const SoftmaxArgs& args);
template <SoftmaxKind K>
Run prepare_softmax_onednn(const SoftmaxArgs& args, const Exec& exec);

// The vectorized exp of cpu_naive and cpu_fused, over an array (for its
// accuracy test), for x[i] <= 88.7 (softmax's arguments x - max are <= 0):
// y[i] = exp(x[i]) within 3 ulp where that is a normal float, 0 below (as
// with flush-to-zero, -inf included); NaN stays NaN.
void softmax_exp(const float* x, float* y, std::int64_t n);
// The exp of cpu_fused's passes, whose arguments (x - max, a running max
// minus a later one) are <= 0: as softmax_exp for x[i] <= 0 and NaN,
// undefined above 0 (fewer instructions on AVX2; softmax_exp elsewhere).
void softmax_exp_nonpositive(const float* x, float* y, std::int64_t n);

Run prepare_softmax_naive_gpu(const SoftmaxArgs& args, const Exec& exec);
template <SoftmaxKind K>
void launch_softmax_fused(const SoftmaxArgs& args, CUstream_st* stream);
template <SoftmaxKind K>
void launch_softmax_online(const SoftmaxArgs& args, CUstream_st* stream);
template <SoftmaxKind K>
Run prepare_softmax_cudnn(const SoftmaxArgs& args, const Exec& exec);

}  // namespace dlb
