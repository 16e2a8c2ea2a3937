// What the CPU network backends share: the activation buffers of a prepared
// network (one per layer, allocated once; the last layer writes the caller's
// y), the pools, and the conv's shape. Internal to kernels/nn.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/conv/conv.h"
#include "kernels/nn/nn.h"

namespace dlb::nn {

class CpuActivations {
 public:
  explicit CpuActivations(const NetArgs& args);
  // Layer i's input, residual (nullptr: none) and output, [batch, ...] NCHW.
  const float* input(std::size_t i) const;
  const float* residual(std::size_t i) const;
  float* output(std::size_t i);

 private:
  const NetArgs args_;
  std::vector<HostBuffer<float>> buffers_;  // per layer but the last
};

// The conv family's problem for a conv layer at this batch size.
ConvShape conv_shape(const Layer& l, std::int64_t batch);

// Window x window max pool, stride = window, no padding (floor): NCHW.
void max_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y);
// Mean over each h x w plane: [batch, c, h, w] -> [batch, c].
void global_avg_pool_nchw(const Layer& l, std::int64_t batch, const float* x, float* y);

}  // namespace dlb::nn
