// The training step's matrix arithmetic as plain fp32 loops (NCHW, one
// thread): a conv's and an fc layer's forward, weight gradient and input
// gradient, with no bias, ReLU or batch-norm (their callers add those).
// Every output is one fp32 sum, term after term (a conv's input gradient is
// scattered, each element still summed in one order): at most as many
// roundings as terms, the lengths gradient_chain_length (train.h) counts:
// c r r forward, k r r backward data, batch oh ow weights; an fc layer's
// in_size, k and batch. The GPU step's host twin (train_plan.cpp) runs the
// library calls as these, and the recipe's naive step
// (examples/train_backend.cpp) is built on them.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/nn/model/network.h"

namespace dlb::nn::plain {

// y [batch, k, oh, ow] = conv(x [batch, c, h, w], w [k, c, r, r]).
void conv_forward(const Layer& l, std::int64_t batch, const float* x, const float* w, float* y);
// dw [k, c, r, r] = the sum over the batch and the outputs of dy x.
void conv_backward_weights(const Layer& l, std::int64_t batch, const float* x, const float* dy, float* dw);
// dx [batch, c, h, w] = every output the input element fed, dy times its
// weight; added to what dx holds where accumulate (the sum made in
// `scratch` first, then added: one more rounding where gradients meet).
void conv_backward_data(const Layer& l, std::int64_t batch, const float* w, const float* dy, float* dx,
                        bool accumulate, std::vector<float>& scratch);
// y [batch, k] = x [batch, in_size] w^T, w [k, in_size].
void fc_forward(const Layer& l, std::int64_t batch, const float* x, const float* w, float* y);
// dw = dy^T x.
void fc_backward_weights(const Layer& l, std::int64_t batch, const float* x, const float* dy, float* dw);
// dx = dy w, added to what dx holds where accumulate.
void fc_backward_data(const Layer& l, std::int64_t batch, const float* w, const float* dy, float* dx,
                      bool accumulate);

}  // namespace dlb::nn::plain
