// Helpers the two GPU int8 variants share (gemm_cuda.cu): preparing B and the
// output stage. Device pointers, enqueued on `stream`. Include only from code
// built with CUDA.
#pragma once

#include <cstdint>

struct CUstream_st;

namespace dlb {

// bt [n,k] = B^T for B [k,n] (both row-major, s8).
void launch_transpose_s8(const std::int8_t* b, std::int64_t k, std::int64_t n, std::int8_t* bt, CUstream_st* stream);
// sums[j] = sum_p B[p,j] for B [k,n] s8: the zero-point compensation.
void launch_column_sums_s8(const std::int8_t* b, std::int64_t k, std::int64_t n, std::int32_t* sums,
                           CUstream_st* stream);
// The output stage of every int8 GEMM (see gemm.h), over the raw int32 sums
// acc [m,n] of s8 A times B: C[i,j] = fp32(acc[i,j] - zero_point * sums[j]) * scale[j].
void launch_s8_output_stage(const std::int32_t* acc, std::int64_t m, std::int64_t n, std::int32_t zero_point,
                            const std::int32_t* sums, const float* scale, float* c, CUstream_st* stream);

}  // namespace dlb
