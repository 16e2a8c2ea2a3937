// Own int8 GEMM on the GPU with __dp4a (4 signed byte products summed into
// an int32 per instruction), and the helpers both GPU int8 variants share.
// Device pointers; A is the s8 encoding (A_q - 128, zero point za - 128, see
// gemm.h), B s8 [k,n] row-major, C fp32 [m,n] row-major.
#include <cstdint>
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_s8_gpu.h"

namespace dlb {
namespace {

constexpr unsigned kBlock = 256;        // threads of the elementwise kernels
constexpr int kTile = 64;               // C tile per block of the GEMM: 64 x 64
constexpr int kThreadsPerSide = 16;     // 16 x 16 threads per block
constexpr int kPerThread = kTile / kThreadsPerSide;  // each thread: 4 x 4 outputs
constexpr int kTileGroups = 8;          // groups of 4 values of k per shared tile (32 values)
constexpr std::int64_t kMaxGridY = 65535;

// The output stage, exactly as the reference: one int32 -> fp32 conversion
// and one fp32 multiply, both round to nearest even (no contraction: _rn).
__device__ float output_stage(std::int32_t acc, std::int32_t zero_point, std::int32_t column_sum, float scale) {
  return __fmul_rn(__int2float_rn(acc - zero_point * column_sum), scale);
}

// B [k,n] s8 -> groups [ceil(k/4)][n] of int32 words: word (g, j) holds
// B[4g + t, j] in byte t (t < 4), zero past k. Grid-stride over the words.
__global__ void pack_b_groups_kernel(const std::int8_t* __restrict__ b, std::int64_t k, std::int64_t n,
                                     std::int32_t* __restrict__ groups) {
  const std::int64_t words = (k + 3) / 4 * n;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t w = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    const std::int64_t g = w / n, j = w % n;
    std::uint32_t word = 0;
    for (int t = 0; t < 4; ++t) {
      const std::int64_t p = 4 * g + t;
      if (p < k) word |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(b[p * n + j])) << (8 * t);
    }
    groups[w] = static_cast<std::int32_t>(word);
  }
}

// bt [n,k] = B^T, one element per thread, grid-stride (prepare only).
__global__ void transpose_s8_kernel(const std::int8_t* __restrict__ b, std::int64_t k, std::int64_t n,
                                    std::int8_t* __restrict__ bt) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < k * n; e += stride) {
    const std::int64_t p = e / n, j = e % n;  // e = p*n + j
    bt[j * k + p] = b[e];
  }
}

// One thread per column (reads coalesced across the threads of a warp).
__global__ void column_sums_kernel(const std::int8_t* __restrict__ b, std::int64_t k, std::int64_t n,
                                   std::int32_t* __restrict__ sums) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= n) return;
  std::int32_t sum = 0;
  for (std::int64_t p = 0; p < k; ++p) sum += b[p * n + j];
  sums[j] = sum;
}

__global__ void output_stage_kernel(const std::int32_t* __restrict__ acc, std::int64_t m, std::int64_t n,
                                    std::int32_t zero_point, const std::int32_t* __restrict__ sums,
                                    const float* __restrict__ scale, float* __restrict__ c) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < m * n; e += stride) {
    const std::int64_t j = e % n;
    c[e] = output_stage(acc[e], zero_point, sums[j], scale[j]);
  }
}

// 4 bytes A[row, 4g .. 4g+3] as one word (byte t = A[row, 4g+t]), zero past
// k and past m. A whole aligned word when the row allows it (k % 4 == 0 and
// A 4-byte aligned: `words_aligned`), bytes otherwise.
__device__ std::int32_t load_a_group(const std::int8_t* __restrict__ a, std::int64_t m, std::int64_t k,
                                     bool words_aligned, std::int64_t row, std::int64_t g) {
  if (row >= m) return 0;
  const std::int8_t* p = a + row * k + 4 * g;
  const std::int64_t left = k - 4 * g;
  if (words_aligned && left >= 4) return *reinterpret_cast<const std::int32_t*>(p);
  std::uint32_t word = 0;
  for (int t = 0; t < 4; ++t)
    if (t < left) word |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(p[t])) << (8 * t);
  return static_cast<std::int32_t>(word);
}

// C [m,n] = output stage of (A [m,k] s8) * B, B as words [ceil(k/4)][n].
// Block (bx, by): C[64 by .. +64, 64 bx .. +64], 16 x 16 threads; thread
// (tx, ty) owns rows ty + 16r and columns tx + 16c (r, c < 4), so a warp
// (16 tx x 2 ty) reads 16 consecutive B words (no bank conflict) and 2 A words
// (broadcast) per step, and stores 16 consecutive floats per row.
// Shared, per step of 32 values of k: A words [8][64 (+1 against store
// bank conflicts)], B words [8][64].
__global__ void __launch_bounds__(kThreadsPerSide* kThreadsPerSide)
    gemm_dp4a_kernel(const std::int8_t* __restrict__ a, bool words_aligned, const std::int32_t* __restrict__ b_groups,
                     std::int64_t m, std::int64_t n, std::int64_t k, std::int32_t zero_point,
                     const std::int32_t* __restrict__ sums, const float* __restrict__ scale, float* __restrict__ c) {
  __shared__ std::int32_t a_tile[kTileGroups][kTile + 1];
  __shared__ std::int32_t b_tile[kTileGroups][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * kThreadsPerSide + tx;
  constexpr int kThreads = kThreadsPerSide * kThreadsPerSide;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const std::int64_t groups = (k + 3) / 4;

  std::int32_t acc[kPerThread][kPerThread] = {};
  for (std::int64_t g0 = 0; g0 < groups; g0 += kTileGroups) {
    // A: word w is (row w / 8, group w % 8): 8 threads read a row's 32 bytes.
    for (int w = tid; w < kTile * kTileGroups; w += kThreads) {
      const int r = w / kTileGroups, q = w % kTileGroups;
      a_tile[q][r] = g0 + q < groups ? load_a_group(a, m, k, words_aligned, row0 + r, g0 + q) : 0;
    }
    // B: word w is (group w / 64, column w % 64): coalesced along n.
    for (int w = tid; w < kTile * kTileGroups; w += kThreads) {
      const int q = w / kTile, j = w % kTile;
      const std::int64_t g = g0 + q, col = col0 + j;
      b_tile[q][j] = g < groups && col < n ? b_groups[g * n + col] : 0;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kTileGroups; ++q) {
      std::int32_t a_words[kPerThread], b_words[kPerThread];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r) a_words[r] = a_tile[q][ty + kThreadsPerSide * r];
#pragma unroll
      for (int s = 0; s < kPerThread; ++s) b_words[s] = b_tile[q][tx + kThreadsPerSide * s];
#pragma unroll
      for (int r = 0; r < kPerThread; ++r)
#pragma unroll
        for (int s = 0; s < kPerThread; ++s) acc[r][s] = __dp4a(a_words[r], b_words[s], acc[r][s]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    const std::int64_t row = row0 + ty + kThreadsPerSide * r;
    if (row >= m) continue;
#pragma unroll
    for (int s = 0; s < kPerThread; ++s) {
      const std::int64_t col = col0 + tx + kThreadsPerSide * s;
      if (col < n) c[row * n + col] = output_stage(acc[r][s], zero_point, sums[col], scale[col]);
    }
  }
}

// Blocks for a grid-stride loop over `items`: as many as needed, at most
// enough to fill every SM.
unsigned grid_stride_blocks(std::int64_t items) {
  const unsigned needed = blocks_for(static_cast<std::size_t>(items > 0 ? items : 1), kBlock);
  const unsigned fill = static_cast<unsigned>(sm_count()) * (2048 / kBlock);
  return needed < fill ? needed : fill;
}

}  // namespace

void launch_transpose_s8(const std::int8_t* b, std::int64_t k, std::int64_t n, std::int8_t* bt, CUstream_st* stream) {
  transpose_s8_kernel<<<grid_stride_blocks(k * n), kBlock, 0, stream>>>(b, k, n, bt);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_column_sums_s8(const std::int8_t* b, std::int64_t k, std::int64_t n, std::int32_t* sums,
                           CUstream_st* stream) {
  column_sums_kernel<<<blocks_for(static_cast<std::size_t>(n), kBlock), kBlock, 0, stream>>>(b, k, n, sums);
  DLB_CUDA_CHECK_LAUNCH();
}

void launch_s8_output_stage(const std::int32_t* acc, std::int64_t m, std::int64_t n, std::int32_t zero_point,
                            const std::int32_t* sums, const float* scale, float* c, CUstream_st* stream) {
  output_stage_kernel<<<grid_stride_blocks(m * n), kBlock, 0, stream>>>(acc, m, n, zero_point, sums, scale, c);
  DLB_CUDA_CHECK_LAUNCH();
}

Run prepare_gemm_dp4a_s8(const GemmArgs& args, const Exec& exec) {
  DLB_REQUIRE(args.k <= kGemmS8MaxK, "gemm dp4a: k too large for exact int32 sums");
  const auto row_tiles = static_cast<std::int64_t>(blocks_for(static_cast<std::size_t>(args.m), kTile));
  if (row_tiles > kMaxGridY) throw Unsupported("gemm dp4a: m = " + std::to_string(args.m) + " exceeds the grid");

  // B in groups of 4 values of k, and its column sums: weights prepared once.
  struct PreparedB {
    DeviceBuffer<std::int32_t> groups, sums;
  };
  const std::int64_t groups = (args.k + 3) / 4;
  auto b = std::make_shared<PreparedB>(PreparedB{DeviceBuffer<std::int32_t>(static_cast<std::size_t>(groups * args.n)),
                                                 DeviceBuffer<std::int32_t>(static_cast<std::size_t>(args.n))});
  pack_b_groups_kernel<<<grid_stride_blocks(groups * args.n), kBlock, 0, exec.stream>>>(args.b_s8, args.k, args.n,
                                                                                       b->groups.data());
  DLB_CUDA_CHECK_LAUNCH();
  launch_column_sums_s8(args.b_s8, args.k, args.n, b->sums.data(), exec.stream);
  DLB_CUDA_CHECK(cudaStreamSynchronize(exec.stream));

  const bool words_aligned = args.k % 4 == 0 && reinterpret_cast<std::uintptr_t>(args.a_s8) % 4 == 0;
  const std::int32_t zero_point = args.a_zero_point - 128;  // of the s8 encoding
  const dim3 grid(blocks_for(static_cast<std::size_t>(args.n), kTile), static_cast<unsigned>(row_tiles));
  const dim3 block(kThreadsPerSide, kThreadsPerSide);
  return [args, b, words_aligned, zero_point, grid, block, stream = exec.stream] {
    gemm_dp4a_kernel<<<grid, block, 0, stream>>>(args.a_s8, words_aligned, b->groups.data(), args.m, args.n, args.k,
                                                 zero_point, b->sums.data(), args.c_scale, args.c);
    DLB_CUDA_CHECK_LAUNCH();
  };
}

}  // namespace dlb
