// gpu_onekernel (see nn.h): a whole forward pass in one persistent
// cooperative launch that walks a program of per-layer descriptors
// (onekernel_math.h), with a grid-wide barrier between layers. This header
// builds the program (shared by the GPU row, nn_gpu_onekernel.cu, and its
// host twin, nn_onekernel_host.cpp). Internal to kernels/nn.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/nn/nn.h"
#include "kernels/nn/onekernel_math.h"

namespace dlb::nn {

// Every conv's and fc's weights and bias in one buffer, every activation but
// the network's output in one arena: a region per layer output, never
// reused (resnet20 at batch 1: 0.6 MB, L2-resident), each region and
// parameter block starting at a multiple of kOneKernelAlign floats.
struct OneKernelProgram {
  std::vector<ok::Layer> layers;  // network order; the last writes y (ok::kOutput)
  std::vector<float> params;
  std::int64_t arena_floats = 0;
};
inline constexpr std::int64_t kOneKernelAlign = 32;  // 128 bytes

// Throws dlb::Error for a layer kind or a join the program cannot express.
OneKernelProgram build_onekernel_program(const Network& net, std::int64_t batch);

// The host twin: the program run on the CPU, layer by layer, every work item
// by the element functions with the warp's butterfly emulated. Reports one
// call per layer (each runs that layer's descriptor alone).
Run prepare_onekernel_on_host(const NetArgs& args);

}  // namespace dlb::nn
