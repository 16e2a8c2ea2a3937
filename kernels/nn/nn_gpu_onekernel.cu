// gpu_onekernel (see nn.h, nn_onekernel.h): the whole pass as one persistent
// cooperative launch. The grid is as many blocks as fit on the device at
// once (cudaOccupancyMaxActiveBlocksPerMultiprocessor x SMs), no more than
// the largest layer has work for; it walks the program's layers in order,
// each layer's work items (one output element per warp, onekernel_math.h)
// strided over every warp of the grid, and waits at grid.sync() before each
// layer that reads an output written since the last barrier (ok::Layer::
// barrier): the barrier orders the writes of one layer before the reads of
// the next (the activations are read with plain loads, never through the
// non-coherent read-only path, because other blocks wrote them in this same
// launch). No shared memory is used. Weights and activations stay in
// device memory (the arena, about 0.6 MB for resnet20 at batch 1, and the
// 1.1 MB of weights stay in L2), so nothing crosses to the host between
// layers: one launch per pass, whatever the depth.
#include <cooperative_groups.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/nn/nn_onekernel.h"

namespace dlb::nn {
namespace {

namespace cg = cooperative_groups;

constexpr int kBlock = 256;
constexpr int kWarpsPerBlock = kBlock / ok::kLanes;

struct Pass {
  const ok::Layer* layers = nullptr;  // device, the whole program
  int first = 0, last = 0;            // the layers this launch runs, [first, last)
  ok::Buffers buffers;
};

__global__ void __launch_bounds__(kBlock) onekernel_pass(Pass pass) {
  cg::grid_group grid = cg::this_grid();
  const int lane = static_cast<int>(threadIdx.x) & (ok::kLanes - 1);
  const long long warp = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) / ok::kLanes;
  const long long warps = static_cast<long long>(gridDim.x) * blockDim.x / ok::kLanes;
  for (int i = pass.first; i < pass.last; ++i) {
    const ok::Layer d = pass.layers[i];
    // The launch's first layer needs none: the kernel boundary orders it.
    if (i > pass.first && d.barrier != 0) grid.sync();
    // The item is the same for the 32 lanes of a warp: the shuffles below
    // run with every lane present.
    for (long long item = warp; item < d.items; item += warps) {
      if (d.kind == ok::Kind::log_softmax) {
        if (lane == 0) ok::log_softmax_row(d, pass.buffers, item);
        continue;
      }
      float v = ok::partial(d, pass.buffers, item, lane);
      for (int offset = ok::kLanes / 2; offset > 0; offset /= 2)
        v = ok::combine(d, v, __shfl_xor_sync(0xffffffffu, v, offset));
      if (lane == 0) ok::store(d, pass.buffers, item, v);
    }
  }
}

struct Prepared {
  OneKernelProgram program;
  DeviceBuffer<ok::Layer> layers;
  DeviceBuffer<float> params, arena;
  int blocks = 0;
};

void launch(const Prepared& dev, int first, int last, const ok::Buffers& buffers, cudaStream_t stream) {
  Pass pass{dev.layers.data(), first, last, buffers};
  void* args[] = {&pass};
  DLB_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&onekernel_pass), dim3(dev.blocks),
                                             dim3(kBlock), args, 0, stream));
}

}  // namespace

Run prepare_net_gpu_onekernel(const NetArgs& args, const Exec& exec) {
  DLB_REQUIRE(exec.stream != nullptr, "gpu_onekernel runs on a CUDA stream");
  auto dev = std::make_shared<Prepared>();
  dev->program = build_onekernel_program(*args.net, args.batch);
  const auto& program = dev->program;
  int device = 0, cooperative = 0, sms = 0, per_sm = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&device));
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  DLB_REQUIRE(cooperative != 0, "gpu_onekernel: the device does not support cooperative launches");
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  DLB_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, onekernel_pass, kBlock, 0));
  DLB_REQUIRE(per_sm >= 1, "gpu_onekernel: no block of the kernel fits on a multiprocessor");
  long long most_items = 1;
  for (const auto& d : program.layers) most_items = std::max<long long>(most_items, d.items);
  const long long useful = (most_items + kWarpsPerBlock - 1) / kWarpsPerBlock;
  dev->blocks = static_cast<int>(std::min<long long>(static_cast<long long>(per_sm) * sms, useful));
  dev->layers = to_device<ok::Layer>(std::span<const ok::Layer>(program.layers));
  dev->params = to_device<float>(std::span<const float>(program.params));
  dev->arena = DeviceBuffer<float>(static_cast<std::size_t>(std::max<std::int64_t>(program.arena_floats, 1)));
  const ok::Buffers buffers{dev->params.data(), args.x, dev->arena.data(), args.y};
  const int count = static_cast<int>(program.layers.size());
  std::vector<Run> calls;  // per-layer timing: each layer as a launch of its own
  for (int i = 0; i < count; ++i)
    calls.push_back([dev, i, buffers, stream = exec.stream] { launch(*dev, i, i + 1, buffers, stream); });
  if (args.report != nullptr) {
    args.report->implementation = "one cooperative launch per pass, " + std::to_string(dev->blocks) +
                                  " blocks of " + std::to_string(kBlock) + ", a warp per output, grid.sync per layer";
    args.report->layer_calls = calls;
  }
  return [dev, buffers, count, stream = exec.stream] { launch(*dev, 0, count, buffers, stream); };
}

}  // namespace dlb::nn
