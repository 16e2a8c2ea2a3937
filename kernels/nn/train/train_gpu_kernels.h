// The GPU training step's own kernels (train_gpu.h): each launcher runs one
// element function of train_gpu_math.h over its elements, one thread each
// (BiasGrad: one block per channel; BnStats, BnBackStats: one block per
// slice of a channel, and a second kernel combining the slices), and only enqueues
// on `stream`. Internal to kernels/nn; built with CUDA only.
#pragma once

#include "kernels/nn/train/train_gpu_math.h"

struct CUstream_st;

namespace dlb::nn::tg {

void launch(const BiasAct& p, CUstream_st* stream);
void launch(const MaxPool& p, CUstream_st* stream);
void launch(const MaxPoolBack& p, CUstream_st* stream);
void launch(const ReluBack& p, CUstream_st* stream);
void launch(const AvgPool& p, CUstream_st* stream);
void launch(const AvgPoolBack& p, CUstream_st* stream);
void launch(const LogSoftmaxNll& p, CUstream_st* stream);
void launch(const NllGrad& p, CUstream_st* stream);
void launch(const BiasGrad& p, CUstream_st* stream);
void launch(const Sgd& p, CUstream_st* stream);
void launch(const BnStats& p, CUstream_st* stream);
void launch(const BnApply& p, CUstream_st* stream);
void launch(const BnBackStats& p, CUstream_st* stream);
void launch(const BnBackData& p, CUstream_st* stream);
void launch(const AddGrad& p, CUstream_st* stream);

}  // namespace dlb::nn::tg
