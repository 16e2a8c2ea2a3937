// The GPU training step's own kernels (train_gpu_kernels.h): the element
// functions of train_gpu_math.h, one thread per element.
#include <string>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/error.h"
#include "kernels/nn/train/train_gpu_kernels.h"

namespace dlb::nn::tg {
namespace {

constexpr unsigned kBlock = 256;

// One thread per element i < count: function(p, i) (the element
// functions of train_gpu_math.h, which the host twin runs over every i).
template <class Params, void (*function)(const Params&, std::int64_t)>
__global__ void each_kernel(Params p, std::int64_t count) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) function(p, i);
}

// One block per channel: each thread's partial sum, then the halving tree
// (train_gpu_math.h spells out both, for the host twin).
__global__ void __launch_bounds__(kBiasGradThreads) bias_grad_kernel(BiasGrad p) {
  __shared__ float part[kBiasGradThreads];
  const std::int64_t channel = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  part[t] = bias_grad_partial(p, channel, t);
  __syncthreads();
  for (int half = kBiasGradThreads / 2; half > 0; half /= 2) {
    tree_step(part, t, half);
    __syncthreads();
  }
  if (t == 0) p.db[channel] = part[0];
}

// Batch-norm's per-channel sums (forward: z, z^2; backward: dy, dy xhat),
// one block per (slice, channel): each thread's two partial sums over its
// values of the slice in double, the halving tree over both; thread 0
// finishes (one slice) or writes the slice's sums for bn_finish_kernel
// (train_gpu_math.h spells out the order for the host twin).
template <class Params, void (*partial)(const Params&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, double&,
                                        double&),
          void (*finish)(const Params&, std::int64_t, double, double)>
__global__ void __launch_bounds__(kBnThreads) bn_sums_kernel(Params p) {
  __shared__ double first[kBnThreads], second[kBnThreads];
  const std::int64_t slice = blockIdx.x, channel = blockIdx.y, m = p.batch * p.plane;
  const int t = static_cast<int>(threadIdx.x);
  partial(p, channel, bn_slice_begin(m, p.slices, slice), bn_slice_begin(m, p.slices, slice + 1), t, first[t],
          second[t]);
  __syncthreads();
  for (int half = kBnThreads / 2; half > 0; half /= 2) {
    tree_step(first, t, half);
    tree_step(second, t, half);
    __syncthreads();
  }
  if (t != 0) return;
  if (p.slices == 1) {
    finish(p, channel, first[0], second[0]);
  } else {
    p.parts[channel * p.slices + slice] = first[0];
    p.parts[(p.k + channel) * p.slices + slice] = second[0];
  }
}

// The slices' sums of each channel added in slice order, one thread per
// channel, then the finish.
constexpr unsigned kBnFinishThreads = 64;
template <class Params, void (*finish)(const Params&, std::int64_t, double, double)>
__global__ void __launch_bounds__(kBnFinishThreads) bn_finish_kernel(Params p) {
  const std::int64_t channel = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (channel >= p.k) return;
  double sum = 0.0, sum2 = 0.0;
  bn_combine(p, channel, sum, sum2);
  finish(p, channel, sum, sum2);
}

template <class Params, void (*partial)(const Params&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, double&,
                                        double&),
          void (*finish)(const Params&, std::int64_t, double, double)>
void bn_sums(const Params& p, CUstream_st* stream) {
  if (p.k <= 0) return;
  DLB_REQUIRE(p.slices >= 1 && p.slices <= 65535 && p.k <= 65535,
              "batch-norm sums: " + std::to_string(p.slices) + " slices of " + std::to_string(p.k) +
                  " channels do not fit a grid");
  DLB_REQUIRE(p.slices == 1 || p.parts != nullptr, "batch-norm sums: several slices and no buffer for their sums");
  const dim3 grid(static_cast<unsigned>(p.slices), static_cast<unsigned>(p.k));
  bn_sums_kernel<Params, partial, finish><<<grid, kBnThreads, 0, stream>>>(p);
  DLB_CUDA_CHECK_LAUNCH();
  if (p.slices == 1) return;
  bn_finish_kernel<Params, finish>
      <<<static_cast<unsigned>((p.k + kBnFinishThreads - 1) / kBnFinishThreads), kBnFinishThreads, 0, stream>>>(p);
  DLB_CUDA_CHECK_LAUNCH();
}

template <class Params, void (*function)(const Params&, std::int64_t)>
void each(const Params& p, std::int64_t count, CUstream_st* stream) {
  if (count <= 0) return;
  each_kernel<Params, function><<<blocks_for(static_cast<std::size_t>(count), kBlock), kBlock, 0, stream>>>(p, count);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch(const BiasAct& p, CUstream_st* stream) { each<BiasAct, bias_act>(p, p.count, stream); }
void launch(const MaxPool& p, CUstream_st* stream) { each<MaxPool, max_pool>(p, p.count(), stream); }
void launch(const MaxPoolBack& p, CUstream_st* stream) { each<MaxPoolBack, max_pool_back>(p, p.count(), stream); }
void launch(const ReluBack& p, CUstream_st* stream) { each<ReluBack, relu_back>(p, p.count, stream); }
void launch(const AvgPool& p, CUstream_st* stream) { each<AvgPool, avg_pool>(p, p.planes, stream); }
void launch(const AvgPoolBack& p, CUstream_st* stream) {
  each<AvgPoolBack, avg_pool_back>(p, p.planes * p.plane, stream);
}
void launch(const LogSoftmaxNll& p, CUstream_st* stream) { each<LogSoftmaxNll, log_softmax_nll>(p, p.rows, stream); }
void launch(const NllGrad& p, CUstream_st* stream) { each<NllGrad, nll_grad>(p, p.rows * p.classes, stream); }
void launch(const Sgd& p, CUstream_st* stream) { each<Sgd, sgd>(p, p.count, stream); }
void launch(const BnApply& p, CUstream_st* stream) { each<BnApply, bn_apply>(p, p.count, stream); }
void launch(const BnBackData& p, CUstream_st* stream) { each<BnBackData, bn_back_data>(p, p.count, stream); }
void launch(const AddGrad& p, CUstream_st* stream) { each<AddGrad, add_grad>(p, p.count, stream); }
void launch(const BnStats& p, CUstream_st* stream) { bn_sums<BnStats, bn_stats_partial, bn_stats_finish>(p, stream); }
void launch(const BnBackStats& p, CUstream_st* stream) {
  bn_sums<BnBackStats, bn_back_stats_partial, bn_back_stats_finish>(p, stream);
}
void launch(const BiasGrad& p, CUstream_st* stream) {
  if (p.k <= 0) return;
  bias_grad_kernel<<<static_cast<unsigned>(p.k), kBiasGradThreads, 0, stream>>>(p);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace dlb::nn::tg
