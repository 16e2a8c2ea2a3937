// The GPU training step's own kernels (train_gpu_kernels.h): the element
// functions of train_gpu_math.h, one thread per element.
#include "kernels/common/cuda_resources.h"
#include "kernels/nn/train_gpu_kernels.h"

namespace dlb::nn::tg {
namespace {

constexpr unsigned kBlock = 256;

// One thread per element i < count: f(p, i).
#define DLB_TG_EACH_KERNEL(name, Params, function)                                \
  __global__ void name(Params p, std::int64_t count) {                            \
    const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; \
    if (i < count) function(p, i);                                                \
  }
DLB_TG_EACH_KERNEL(bias_act_kernel, BiasAct, bias_act)
DLB_TG_EACH_KERNEL(max_pool_kernel, MaxPool, max_pool)
DLB_TG_EACH_KERNEL(max_pool_back_kernel, MaxPoolBack, max_pool_back)
DLB_TG_EACH_KERNEL(relu_back_kernel, ReluBack, relu_back)
DLB_TG_EACH_KERNEL(avg_pool_kernel, AvgPool, avg_pool)
DLB_TG_EACH_KERNEL(avg_pool_back_kernel, AvgPoolBack, avg_pool_back)
DLB_TG_EACH_KERNEL(log_softmax_nll_kernel, LogSoftmaxNll, log_softmax_nll)
DLB_TG_EACH_KERNEL(nll_grad_kernel, NllGrad, nll_grad)
DLB_TG_EACH_KERNEL(sgd_kernel, Sgd, sgd)
DLB_TG_EACH_KERNEL(bn_apply_kernel, BnApply, bn_apply)
DLB_TG_EACH_KERNEL(bn_back_data_kernel, BnBackData, bn_back_data)
DLB_TG_EACH_KERNEL(add_grad_kernel, AddGrad, add_grad)
#undef DLB_TG_EACH_KERNEL

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
// one block per channel: each thread's two partial sums in double, the
// halving tree over both, thread 0 finishing (train_gpu_math.h).
template <class Params, void (*partial)(const Params&, std::int64_t, std::int64_t, double&, double&),
          void (*finish)(const Params&, std::int64_t, double, double)>
__global__ void __launch_bounds__(kBnThreads) bn_sums_kernel(Params p) {
  __shared__ double first[kBnThreads], second[kBnThreads];
  const std::int64_t channel = blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
  partial(p, channel, t, first[t], second[t]);
  __syncthreads();
  for (int half = kBnThreads / 2; half > 0; half /= 2) {
    tree_step(first, t, half);
    tree_step(second, t, half);
    __syncthreads();
  }
  if (t == 0) finish(p, channel, first[0], second[0]);
}

template <class Kernel, class Params>
void each(Kernel kernel, const Params& p, std::int64_t count, CUstream_st* stream) {
  if (count <= 0) return;
  kernel<<<blocks_for(static_cast<std::size_t>(count), kBlock), kBlock, 0, stream>>>(p, count);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch(const BiasAct& p, CUstream_st* stream) { each(bias_act_kernel, p, p.count, stream); }
void launch(const MaxPool& p, CUstream_st* stream) { each(max_pool_kernel, p, p.count(), stream); }
void launch(const MaxPoolBack& p, CUstream_st* stream) { each(max_pool_back_kernel, p, p.count(), stream); }
void launch(const ReluBack& p, CUstream_st* stream) { each(relu_back_kernel, p, p.count, stream); }
void launch(const AvgPool& p, CUstream_st* stream) { each(avg_pool_kernel, p, p.planes, stream); }
void launch(const AvgPoolBack& p, CUstream_st* stream) { each(avg_pool_back_kernel, p, p.planes * p.plane, stream); }
void launch(const LogSoftmaxNll& p, CUstream_st* stream) { each(log_softmax_nll_kernel, p, p.rows, stream); }
void launch(const NllGrad& p, CUstream_st* stream) { each(nll_grad_kernel, p, p.rows * p.classes, stream); }
void launch(const Sgd& p, CUstream_st* stream) { each(sgd_kernel, p, p.count, stream); }
void launch(const BnApply& p, CUstream_st* stream) { each(bn_apply_kernel, p, p.count, stream); }
void launch(const BnBackData& p, CUstream_st* stream) { each(bn_back_data_kernel, p, p.count, stream); }
void launch(const AddGrad& p, CUstream_st* stream) { each(add_grad_kernel, p, p.count, stream); }
void launch(const BnStats& p, CUstream_st* stream) {
  if (p.k <= 0) return;
  bn_sums_kernel<BnStats, bn_stats_partial, bn_stats_finish><<<static_cast<unsigned>(p.k), kBnThreads, 0, stream>>>(p);
  DLB_CUDA_CHECK_LAUNCH();
}
void launch(const BnBackStats& p, CUstream_st* stream) {
  if (p.k <= 0) return;
  bn_sums_kernel<BnBackStats, bn_back_stats_partial, bn_back_stats_finish>
      <<<static_cast<unsigned>(p.k), kBnThreads, 0, stream>>>(p);
  DLB_CUDA_CHECK_LAUNCH();
}
void launch(const BiasGrad& p, CUstream_st* stream) {
  if (p.k <= 0) return;
  bias_grad_kernel<<<static_cast<unsigned>(p.k), kBiasGradThreads, 0, stream>>>(p);
  DLB_CUDA_CHECK_LAUNCH();
}

}  // namespace dlb::nn::tg
