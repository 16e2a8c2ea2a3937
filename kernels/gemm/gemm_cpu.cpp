// The textbook GEMMs, one thread each, for scale: fp32 and u8 x s8 with int32
// accumulation. Loop order i-k-j, so the innermost loop runs along a row of B
// and a row of C (unit stride, which the compiler vectorizes).
#include <algorithm>
#include <vector>

#include "kernels/gemm/gemm.h"

namespace dlb {

void gemm_naive_f32(const GemmArgs& args) {
  const std::int64_t m = args.m, n = args.n, k = args.k;
  for (std::int64_t i = 0; i < m; ++i) {
    float* __restrict c_row = args.c + i * n;  // C[i, :]
    std::fill(c_row, c_row + n, 0.0f);
    for (std::int64_t p = 0; p < k; ++p) {
      const float a_ip = args.a[i * k + p];
      const float* __restrict b_row = args.b + p * n;  // B[p, :]
      for (std::int64_t j = 0; j < n; ++j) c_row[j] += a_ip * b_row[j];
    }
  }
}

void gemm_ref_s8(const GemmArgs& args) {
  const std::int64_t m = args.m, n = args.n, k = args.k;
  std::vector<std::int32_t> acc(static_cast<std::size_t>(n));  // one row of int32 sums
  for (std::int64_t i = 0; i < m; ++i) {
    std::fill(acc.begin(), acc.end(), 0);
    for (std::int64_t p = 0; p < k; ++p) {
      const std::int32_t a_ip = static_cast<std::int32_t>(args.a_u8[i * k + p]) - args.a_zero_point;
      const std::int8_t* __restrict b_row = args.b_s8 + p * n;
      for (std::int64_t j = 0; j < n; ++j) acc[j] += a_ip * b_row[j];
    }
    float* c_row = args.c + i * n;
    for (std::int64_t j = 0; j < n; ++j) c_row[j] = static_cast<float>(acc[j]) * args.c_scale[j];
  }
}

}  // namespace dlb
