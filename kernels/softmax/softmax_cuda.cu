// softmax on the GPU: gpu_naive (five kernels), gpu_fused (the row in
// registers) and gpu_online (online max and sum). x, y: [rows, cols]
// row-major fp32 in device memory; everything is enqueued on the caller's
// stream. cols < 2^30 (int indices with room for one stride past the end)
// and, for the kernels with a block per row, rows <= INT_MAX (the grid's x
// limit): the launchers throw Unsupported past that.
#include <cfloat>
#include <climits>
#include <cstdint>
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/error.h"
#include "kernels/softmax/softmax.h"

namespace dlb {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------- pieces

// Running max of a row (or of the part a thread saw) and the sum of
// exp(x - max). The running max starts at the lowest finite float, not
// -inf: a thread that saw only -inf entries, or nothing, keeps max -FLT_MAX
// and sum 0, and combining it gives 0 * exp(0) = 0, where -inf would give
// exp(-inf + inf) = NaN. A row of only -inf ends with sum 0: 0/0 in the output.
struct MaxSum {
  float max;
  float sum;
};
constexpr float kLowest = -FLT_MAX;

__device__ MaxSum online_add(MaxSum a, float x) {
  const float max = fmaxf(a.max, x);  // fmaxf skips a NaN x; exp(x - max) is then NaN
  return {max, a.sum * expf(a.max - max) + expf(x - max)};
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Combine {
  __device__ MaxSum operator()(MaxSum a, MaxSum b) const {
    const float max = fmaxf(a.max, b.max);
    return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
  }
};

__device__ float shfl_xor(float v, int offset) { return __shfl_xor_sync(kFullMask, v, offset); }
__device__ MaxSum shfl_xor(MaxSum v, int offset) { return {shfl_xor(v.max, offset), shfl_xor(v.sum, offset)}; }

// Over the 32 lanes of a warp (all active); every lane gets the result.
template <class T, class Op>
__device__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v = op(v, shfl_xor(v, offset));
  return v;
}

// Over the whole block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `identity` fills the unused slots of the last step.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T per_warp[kWarp];
  v = warp_reduce(v, op);
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  __syncthreads();  // a previous call's readers are done with per_warp
  if (lane == 0) per_warp[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / kWarp ? per_warp[lane] : identity;
  return warp_reduce(v, op);
}

// Over the threads that share a row: a warp, or the whole block.
template <int kThreadsPerRow, class T, class Op>
__device__ T row_reduce(T v, Op op, T identity) {
  if constexpr (kThreadsPerRow == kWarp) {
    return warp_reduce(v, op);
  } else {
    return block_reduce(v, op, identity);
  }
}

// One output element from x and the row's max and sum: softmax
// exp(x - max) * (1 / sum), log-softmax (x - max) - log(sum).
template <SoftmaxKind K>
struct RowOutput {
  __device__ RowOutput(float row_max, float row_sum)
      : max(row_max), scale(K == SoftmaxKind::softmax ? 1.0f / row_sum : logf(row_sum)) {}
  __device__ float operator()(float x) const {
    if constexpr (K == SoftmaxKind::softmax) {
      return expf(x - max) * scale;
    } else {
      return (x - max) - scale;
    }
  }
  float max, scale;
};

// N consecutive floats moved by one load or store: p must be aligned to
// N * 4 bytes (float4: ld.global.v4.f32).
template <int N>
struct alignas(sizeof(float) * N) Floats {
  float v[N];
};
template <int N>
__device__ Floats<N> load(const float* p) {
  return *reinterpret_cast<const Floats<N>*>(p);
}
template <int N>
__device__ void store(float* p, const Floats<N>& f) {
  *reinterpret_cast<Floats<N>*>(p) = f;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Float4 loads and stores are possible when every row starts 16-byte aligned.
bool rows_vectorizable(const SoftmaxArgs& args) {
  return args.cols % 4 == 0 && aligned16(args.x) && aligned16(args.y);
}

void check_gpu_shape(const SoftmaxArgs& args, bool row_per_block) {
  if (args.cols >= (std::int64_t{1} << 30)) throw Unsupported("softmax on the GPU: cols must be < 2^30");
  if (row_per_block && args.rows > INT_MAX) throw Unsupported("softmax on the GPU: rows must fit the grid (INT_MAX)");
}

// ---------------------------------------------------------------- gpu_naive

constexpr unsigned kNaiveBlock = 256;

// row_max[r] = max_j x[r, j]. A block per row; grid: rows.
__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ row_max, int cols) {
  const float* row = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
  m = block_reduce(m, Max{}, -INFINITY);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

// shifted[i] = x[i] - row_max[i / cols] over the n = rows * cols elements; grid-stride.
__global__ void subtract_row_max_kernel(const float* __restrict__ x, const float* __restrict__ row_max,
                                        float* __restrict__ shifted, std::int64_t n, int cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    shifted[i] = x[i] - row_max[i / cols];
}

// out[i] = exp(in[i]) over n elements; grid-stride.
__global__ void exp_kernel(const float* __restrict__ in, float* __restrict__ out, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = expf(in[i]);
}

// row_sum[r] = sum_j e[r, j]. A block per row; grid: rows.
__global__ void row_sum_kernel(const float* __restrict__ e, float* __restrict__ row_sum, int cols) {
  const float* row = e + static_cast<std::int64_t>(blockIdx.x) * cols;
  float s = 0.0f;
  for (int j = threadIdx.x; j < cols; j += blockDim.x) s += row[j];
  s = block_reduce(s, Sum{}, 0.0f);
  if (threadIdx.x == 0) row_sum[blockIdx.x] = s;
}

// y[i] = e[i] / row_sum[i / cols] over n elements; grid-stride.
__global__ void divide_by_row_sum_kernel(const float* __restrict__ e, const float* __restrict__ row_sum,
                                         float* __restrict__ y, std::int64_t n, int cols) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = e[i] / row_sum[i / cols];
}

// Enough resident blocks of kNaiveBlock threads to fill every SM, no more than the work needs.
unsigned grid_stride_blocks(std::int64_t n) {
  const unsigned needed = blocks_for(static_cast<std::size_t>(n), kNaiveBlock);
  const unsigned fill = static_cast<unsigned>(sm_count()) * (2048 / kNaiveBlock);
  return needed < fill ? needed : fill;
}

struct NaiveGpuTemporaries {
  NaiveGpuTemporaries(std::int64_t rows, std::int64_t cols)
      : row_max(static_cast<std::size_t>(rows)),
        shifted(static_cast<std::size_t>(rows * cols)),
        exps(static_cast<std::size_t>(rows * cols)),
        row_sum(static_cast<std::size_t>(rows)) {}
  DeviceBuffer<float> row_max, shifted, exps, row_sum;
};

void launch_softmax_naive(const SoftmaxArgs& args, NaiveGpuTemporaries& t, cudaStream_t stream) {
  const auto rows = static_cast<unsigned>(args.rows);
  const auto cols = static_cast<int>(args.cols);
  const std::int64_t n = args.rows * args.cols;
  const unsigned grid = grid_stride_blocks(n);
  row_max_kernel<<<rows, kNaiveBlock, 0, stream>>>(args.x, t.row_max.data(), cols);
  DLB_CUDA_CHECK_LAUNCH();
  subtract_row_max_kernel<<<grid, kNaiveBlock, 0, stream>>>(args.x, t.row_max.data(), t.shifted.data(), n, cols);
  DLB_CUDA_CHECK_LAUNCH();
  exp_kernel<<<grid, kNaiveBlock, 0, stream>>>(t.shifted.data(), t.exps.data(), n);
  DLB_CUDA_CHECK_LAUNCH();
  row_sum_kernel<<<rows, kNaiveBlock, 0, stream>>>(t.exps.data(), t.row_sum.data(), cols);
  DLB_CUDA_CHECK_LAUNCH();
  divide_by_row_sum_kernel<<<grid, kNaiveBlock, 0, stream>>>(t.exps.data(), t.row_sum.data(), args.y, n, cols);
  DLB_CUDA_CHECK_LAUNCH();
}

// ---------------------------------------------------------------- gpu_fused

constexpr int kMaxPerThread = 32;      // row elements a thread holds in registers
constexpr int kWarpRowBlock = 128;     // warp per row: 4 rows per block
constexpr int kBlockRowThreads = 1024;  // block per row
constexpr int kLongRowBlock = 1024;

template <int kThreadsPerRow>
__host__ __device__ constexpr int fused_block_threads() {
  return kThreadsPerRow == kWarp ? kWarpRowBlock : kThreadsPerRow;
}

// The row in registers. kThreadsPerRow threads (a warp, or the whole block)
// share a row; thread t holds the elements (i * kThreadsPerRow + t) * kVec + v,
// i < kPerThread / kVec, v < kVec (kVec consecutive floats per load), so
// each load instruction of a warp covers 32 * kVec consecutive floats. Holds
// rows of up to kThreadsPerRow * kPerThread elements. Positions past cols
// read as -inf: they add exp(-inf - max) = 0 to the sum (with a finite max;
// a max of +-inf makes the row NaN anyway) and are not written.
// Block: fused_block_threads<kThreadsPerRow>() threads, 4 rows (warp per row)
// or 1; grid: ceil(rows / rows per block).
template <SoftmaxKind K, int kThreadsPerRow, int kPerThread, int kVec>
__global__ void __launch_bounds__(fused_block_threads<kThreadsPerRow>())
    softmax_fused_kernel(const float* __restrict__ x, float* __restrict__ y, std::int64_t rows, int cols) {
  constexpr int kRowsPerBlock = fused_block_threads<kThreadsPerRow>() / kThreadsPerRow;
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + static_cast<int>(threadIdx.x) / kThreadsPerRow;
  // A whole warp leaves together (its lanes share the row); with a block
  // per row the grid has exactly `rows` blocks and nobody leaves.
  if (row >= rows) return;
  const int t = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const float* x_row = x + row * cols;
  float* y_row = y + row * cols;

  float v[kPerThread];
#pragma unroll
  for (int i = 0; i < kPerThread / kVec; ++i) {
    const int j = (i * kThreadsPerRow + t) * kVec;
    if (j < cols) {  // cols % kVec == 0: the whole vector is in the row
      const Floats<kVec> f = load<kVec>(x_row + j);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[i * kVec + k] = f.v[k];
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[i * kVec + k] = -INFINITY;
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) m = fmaxf(m, v[k]);
  m = row_reduce<kThreadsPerRow>(m, Max{}, -INFINITY);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) s += expf(v[k] - m);
  s = row_reduce<kThreadsPerRow>(s, Sum{}, 0.0f);

  const RowOutput<K> out(m, s);
#pragma unroll
  for (int i = 0; i < kPerThread / kVec; ++i) {
    const int j = (i * kThreadsPerRow + t) * kVec;
    if (j < cols) {
      Floats<kVec> f;
#pragma unroll
      for (int k = 0; k < kVec; ++k) f.v[k] = out(v[i * kVec + k]);
      store<kVec>(y_row + j, f);
    }
  }
}

// Rows too long for registers: a block per row, three sweeps over the row in
// global memory (max, sum, output); the second and third mostly hit L2.
// Thread t takes the vectors at t * kVec, stride blockDim.x * kVec.
// Block: kLongRowBlock threads; grid: rows.
template <SoftmaxKind K, int kVec>
__global__ void __launch_bounds__(kLongRowBlock)
    softmax_fused_long_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* x_row = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float* y_row = y + static_cast<std::int64_t>(blockIdx.x) * cols;
  const int first = static_cast<int>(threadIdx.x) * kVec, step = static_cast<int>(blockDim.x) * kVec;
  float m = -INFINITY;
  for (int j = first; j < cols; j += step) {
    const Floats<kVec> f = load<kVec>(x_row + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) m = fmaxf(m, f.v[k]);
  }
  m = block_reduce(m, Max{}, -INFINITY);
  float s = 0.0f;
  for (int j = first; j < cols; j += step) {
    const Floats<kVec> f = load<kVec>(x_row + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) s += expf(f.v[k] - m);
  }
  s = block_reduce(s, Sum{}, 0.0f);
  const RowOutput<K> out(m, s);
  for (int j = first; j < cols; j += step) {
    Floats<kVec> f = load<kVec>(x_row + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) f.v[k] = out(f.v[k]);
    store<kVec>(y_row + j, f);
  }
}

template <SoftmaxKind K, int kThreadsPerRow, int kPerThread, int kVec>
void launch_fused_kernel(const SoftmaxArgs& args, cudaStream_t stream) {
  constexpr int kBlock = fused_block_threads<kThreadsPerRow>();
  const unsigned grid = blocks_for(static_cast<std::size_t>(args.rows), kBlock / kThreadsPerRow);
  softmax_fused_kernel<K, kThreadsPerRow, kPerThread, kVec>
      <<<grid, kBlock, 0, stream>>>(args.x, args.y, args.rows, static_cast<int>(args.cols));
  DLB_CUDA_CHECK_LAUNCH();
}

// kPerThread: the smallest power of two from 1 to kMaxPerThread with
// kThreadsPerRow * kPerThread >= cols (the caller checked that 32 is enough).
template <SoftmaxKind K, int kThreadsPerRow, int kPerThread = 1>
void launch_fused_in_registers(const SoftmaxArgs& args, bool vectorized, cudaStream_t stream) {
  if constexpr (kPerThread < kMaxPerThread) {
    if (static_cast<std::int64_t>(kThreadsPerRow) * kPerThread < args.cols) {
      launch_fused_in_registers<K, kThreadsPerRow, 2 * kPerThread>(args, vectorized, stream);
      return;
    }
  }
  if constexpr (kPerThread % 4 == 0) {
    if (vectorized) {
      launch_fused_kernel<K, kThreadsPerRow, kPerThread, 4>(args, stream);
      return;
    }
  }
  launch_fused_kernel<K, kThreadsPerRow, kPerThread, 1>(args, stream);
}

// ---------------------------------------------------------------- gpu_online

constexpr int kOnlineVectorsPerThread = 4;  // aim: each thread folds at least this many vectors

// A block per row: each thread folds its elements into a running (max, sum)
// in one read, the block combines them, and a second sweep writes the
// output. Thread t takes the vectors at t * kVec, stride blockDim.x * kVec.
// Block: a multiple of 32 threads, at most 1024; grid: rows.
template <SoftmaxKind K, int kVec>
__global__ void __launch_bounds__(1024)
    softmax_online_kernel(const float* __restrict__ x, float* __restrict__ y, int cols) {
  const float* x_row = x + static_cast<std::int64_t>(blockIdx.x) * cols;
  float* y_row = y + static_cast<std::int64_t>(blockIdx.x) * cols;
  const int first = static_cast<int>(threadIdx.x) * kVec, step = static_cast<int>(blockDim.x) * kVec;
  MaxSum running{kLowest, 0.0f};
  for (int j = first; j < cols; j += step) {
    const Floats<kVec> f = load<kVec>(x_row + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) running = online_add(running, f.v[k]);
  }
  running = block_reduce(running, Combine{}, MaxSum{kLowest, 0.0f});
  const RowOutput<K> out(running.max, running.sum);
  for (int j = first; j < cols; j += step) {
    Floats<kVec> f = load<kVec>(x_row + j);
#pragma unroll
    for (int k = 0; k < kVec; ++k) f.v[k] = out(f.v[k]);
    store<kVec>(y_row + j, f);
  }
}

template <SoftmaxKind K, int kVec>
void launch_online_kernel(const SoftmaxArgs& args, cudaStream_t stream) {
  const std::int64_t vectors = args.cols / kVec;
  const std::int64_t wanted = (vectors + kOnlineVectorsPerThread - 1) / kOnlineVectorsPerThread;
  const std::int64_t warps = (wanted + kWarp - 1) / kWarp;
  const auto threads = static_cast<unsigned>(kWarp * (warps < 1 ? 1 : warps > 32 ? 32 : warps));
  softmax_online_kernel<K, kVec>
      <<<static_cast<unsigned>(args.rows), threads, 0, stream>>>(args.x, args.y, static_cast<int>(args.cols));
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace

// ---------------------------------------------------------------- entry points

Run prepare_softmax_naive_gpu(const SoftmaxArgs& args, const Exec& exec) {
  check_gpu_shape(args, true);
  auto temporaries = std::make_shared<NaiveGpuTemporaries>(args.rows, args.cols);
  return [args, temporaries, stream = exec.stream] { launch_softmax_naive(args, *temporaries, stream); };
}

template <SoftmaxKind K>
void launch_softmax_fused(const SoftmaxArgs& args, CUstream_st* stream) {
  const bool vectorized = rows_vectorizable(args);
  if (args.cols <= kWarp * kMaxPerThread) {
    check_gpu_shape(args, false);
    launch_fused_in_registers<K, kWarp>(args, vectorized, stream);
  } else if (args.cols <= kBlockRowThreads * kMaxPerThread) {
    check_gpu_shape(args, true);
    launch_fused_in_registers<K, kBlockRowThreads>(args, vectorized, stream);
  } else {
    check_gpu_shape(args, true);
    const auto rows = static_cast<unsigned>(args.rows);
    const auto cols = static_cast<int>(args.cols);
    if (vectorized) {
      softmax_fused_long_rows_kernel<K, 4><<<rows, kLongRowBlock, 0, stream>>>(args.x, args.y, cols);
    } else {
      softmax_fused_long_rows_kernel<K, 1><<<rows, kLongRowBlock, 0, stream>>>(args.x, args.y, cols);
    }
    DLB_CUDA_CHECK_LAUNCH();
  }
}

template <SoftmaxKind K>
void launch_softmax_online(const SoftmaxArgs& args, CUstream_st* stream) {
  check_gpu_shape(args, true);
  if (rows_vectorizable(args)) {
    launch_online_kernel<K, 4>(args, stream);
  } else {
    launch_online_kernel<K, 1>(args, stream);
  }
}

template void launch_softmax_fused<SoftmaxKind::softmax>(const SoftmaxArgs&, CUstream_st*);
template void launch_softmax_fused<SoftmaxKind::log_softmax>(const SoftmaxArgs&, CUstream_st*);
template void launch_softmax_online<SoftmaxKind::softmax>(const SoftmaxArgs&, CUstream_st*);
template void launch_softmax_online<SoftmaxKind::log_softmax>(const SoftmaxArgs&, CUstream_st*);

}  // namespace dlb
