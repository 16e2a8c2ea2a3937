// gpu_onekernel (see nn.h, nn_onekernel.h): the whole pass as one persistent
// cooperative launch. The grid is as many blocks of ok::kThreads as fit on
// the device at once (cudaOccupancyMaxActiveBlocksPerMultiprocessor x SMs,
// with the program's dynamic shared memory), at most two an SM and no more
// than the layer with the most tiles has work for; it walks the program's
// layers in order, each layer's tiles strided over the blocks, a block
// running a tile's steps (onekernel_math.h: a conv stages its input rows
// and weights in shared memory, then each thread sums several outputs from
// there, bias, residual and ReLU folded in) with a __syncthreads() after
// each step, and waits at grid.sync() before each layer that reads an output
// written since the last barrier (ok::Layer::barrier): the barrier orders
// the writes of one layer before the reads of the next (the activations are
// read with plain loads, never through the non-coherent read-only path,
// because other blocks wrote them in this same launch). A layer that shares
// its phase with the layer before (resnet20's downsample conv) takes its
// tiles from the last block backwards, so the blocks the first layer left
// idle start on it. Each block copies the launch's layer descriptors into
// its shared memory once, at the start, so that no layer begins with an L2
// round trip for its own descriptor. Weights and activations stay in device memory (the
// arena, about 0.8 MB for resnet20 at batch 1, and the 1.1 MB of weights
// stay in L2), so nothing crosses to the host between layers: one launch per
// pass, whatever the depth.
//
// Every pass stamps its own time (nn_onekernel.h): block 0's thread 0 reads
// %globaltimer at the start and after each barrier and stores it, one
// 64-bit store per barrier; at the end each block's thread 0, after a
// __syncthreads, atomicMax-es its time into the last slot. That is the
// whole cost in the timed pass (no extra grid barrier, no host work); the
// stamps are copied back only after the timed loop (measured_counters), from
// passes of their own, which also estimate the cost against passes that do
// not stamp.
#include <cooperative_groups.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/cuda_resources.h"
#include "kernels/nn/onekernel/nn_onekernel.h"

namespace dlb::nn {
namespace {

namespace cg = cooperative_groups;

constexpr int kBlock = ok::kThreads;
// Blocks an SM at most: at batch 1 the tilings aim at one wave of tiles on
// 132 SMs, and more blocks than tiles only make every grid.sync() wait for
// more of them; two let batch 16's waves of tiles overlap.
constexpr int kMostBlocksPerSm = 2;

struct Pass {
  const ok::Layer* layers = nullptr;  // device, the whole program
  int first = 0, last = 0;            // the layers this launch runs, [first, last)
  int tile_offset = 0;                // floats of shared memory before the tiles' (the layers' copy)
  ok::Buffers buffers;
  unsigned long long* stamps = nullptr;  // device, ok::walk's slots; nullptr: no stamps
};

// ns, one clock for the whole device (clock64 counts each SM's own cycles,
// at the SM's clock: the end stamp comes from any SM).
__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Shared memory: the launch's layers (copied once at the start, so that no
// layer waits on an L2 round trip for its own descriptor), then the tiles'
// (ok::Layer::smem floats).
__global__ void __launch_bounds__(kBlock, kMostBlocksPerSm) onekernel_pass(Pass pass) {
  extern __shared__ __align__(16) float smem[];
  cg::grid_group grid = cg::this_grid();
  const int t = static_cast<int>(threadIdx.x);
  const bool stamper = pass.stamps != nullptr && blockIdx.x == 0 && t == 0;
  if (stamper) pass.stamps[0] = globaltimer();
  const int count = pass.last - pass.first;
  {
    static_assert(sizeof(ok::Layer) % sizeof(unsigned) == 0);
    const auto* from = reinterpret_cast<const unsigned*>(pass.layers + pass.first);
    auto* to = reinterpret_cast<unsigned*>(smem);
    const int words = count * static_cast<int>(sizeof(ok::Layer) / sizeof(unsigned));
    for (int w = t; w < words; w += kBlock) to[w] = from[w];
    __syncthreads();
  }
  const ok::Layer* layers = reinterpret_cast<const ok::Layer*>(smem);
  float* tile_smem = smem + pass.tile_offset;
  const int barriers = ok::walk(
      layers, 0, count,
      [&](int slot) {
        grid.sync();
        if (stamper) pass.stamps[slot] = globaltimer();
      },
      [&](int i) {
        const ok::Layer& d = layers[i];
        const int steps = ok::steps(d);
        // The tile and step are the same for every thread of the block: the
        // __syncthreads() below run with every thread present.
        const long long first = d.barrier != 0 || i == 0 ? blockIdx.x : gridDim.x - 1 - blockIdx.x;
        for (long long tile = first; tile < d.tiles; tile += gridDim.x)
          for (int s = 0; s < steps; ++s) {
            ok::step(d, pass.buffers, tile, tile_smem, s, t);
            __syncthreads();
          }
      });
  if (pass.stamps != nullptr) {
    __syncthreads();  // the block's every thread is done
    if (t == 0) atomicMax(pass.stamps + barriers + 1, globaltimer());
  }
}

// Passes after the timed loop whose stamps make the counters (the median
// of each phase), and as many again without stamps for stamp_overhead_us.
constexpr int kStampPasses = 32;

struct Prepared {
  OneKernelProgram program;
  std::vector<OneKernelPhase> phases;
  DeviceBuffer<ok::Layer> layers;
  DeviceBuffer<float> params, arena;
  DeviceBuffer<unsigned long long> stamps;  // phases + 1 slots
  int blocks = 0;
  int tile_offset = 0;  // floats: the program's layers, rounded up to 16 bytes
  std::size_t smem_bytes = 0;
};

void launch(const Prepared& dev, int first, int last, const ok::Buffers& buffers, unsigned long long* stamps,
            cudaStream_t stream) {
  Pass pass{dev.layers.data(), first, last, dev.tile_offset, buffers, stamps};
  void* args[] = {&pass};
  DLB_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&onekernel_pass), dim3(dev.blocks),
                                             dim3(kBlock), args, dev.smem_bytes, stream));
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
  dev->tile_offset =
      static_cast<int>((program.layers.size() * sizeof(ok::Layer) + 15) / 16 * 16 / sizeof(float));
  dev->smem_bytes = (static_cast<std::size_t>(dev->tile_offset) + static_cast<std::size_t>(program.smem_floats)) *
                    sizeof(float);
  int most_smem = 0;
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&most_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  DLB_REQUIRE(dev->smem_bytes <= static_cast<std::size_t>(most_smem),
              "gpu_onekernel: the program needs " + std::to_string(dev->smem_bytes) +
                  " bytes of shared memory a block, more than the device's " + std::to_string(most_smem));
  // Over 48 KiB of dynamic shared memory (the layers' copy on top of a
  // tile's 48 KiB) needs the opt-in. The attribute is the kernel's, for the
  // whole process: set to the device's most, never to this program's need,
  // so that preparing a smaller program cannot fail the launches of a
  // larger one prepared before it.
  DLB_CUDA_CHECK(cudaFuncSetAttribute(onekernel_pass, cudaFuncAttributeMaxDynamicSharedMemorySize, most_smem));
  DLB_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, onekernel_pass, kBlock, dev->smem_bytes));
  DLB_REQUIRE(per_sm >= 1, "gpu_onekernel: no block of the kernel fits on a multiprocessor");
  long long most_tiles = 1;
  for (const auto& d : program.layers) most_tiles = std::max<long long>(most_tiles, d.tiles);
  dev->blocks = static_cast<int>(
      std::min<long long>(static_cast<long long>(std::min(per_sm, kMostBlocksPerSm)) * sms, most_tiles));
  dev->layers = to_device<ok::Layer>(std::span<const ok::Layer>(program.layers));
  dev->params = to_device<float>(std::span<const float>(program.params));
  dev->arena = DeviceBuffer<float>(static_cast<std::size_t>(std::max<std::int64_t>(program.arena_floats, 1)));
  dev->phases = onekernel_phases(program);
  // Zero: a slot no pass wrote reads as missing (onekernel_stamp_counters).
  const std::vector<unsigned long long> zeros(dev->phases.size() + 1, 0);
  dev->stamps = to_device<unsigned long long>(std::span<const unsigned long long>(zeros));
  const ok::Buffers buffers{dev->params.data(), args.x, dev->arena.data(), args.y};
  const int count = static_cast<int>(program.layers.size());
  std::vector<Run> calls;  // per-layer timing: each layer as a launch of its own, unstamped
  for (int i = 0; i < count; ++i)
    calls.push_back([dev, i, buffers, stream = exec.stream] { launch(*dev, i, i + 1, buffers, nullptr, stream); });
  if (args.report != nullptr) {
    args.report->implementation = "one cooperative launch per pass, " + std::to_string(dev->blocks) +
                                  " blocks of " + std::to_string(kBlock) +
                                  ", tiles in shared memory, several outputs a thread, grid.sync per layer";
    args.report->layer_calls = calls;
    args.report->measured_counters = [dev, buffers, count, stream = exec.stream] {
      // Each pass alone (synchronized), stamped and not in turn, timed by
      // events around the launch; the stamps copied back after each.
      std::vector<std::vector<std::uint64_t>> passes;
      std::vector<double> with_us, without_us;
      const Event start, stop;
      std::vector<unsigned long long> host(dev->phases.size() + 1);
      const auto timed = [&](unsigned long long* stamps) {
        start.record(stream);
        launch(*dev, 0, count, buffers, stamps, stream);
        stop.record(stream);
        stop.synchronize();
        return static_cast<double>(stop.elapsed_ms_since(start)) * 1e3;
      };
      for (int r = 0; r < kStampPasses; ++r) {
        without_us.push_back(timed(nullptr));
        with_us.push_back(timed(dev->stamps.data()));
        DLB_CUDA_CHECK(cudaMemcpyAsync(host.data(), dev->stamps.data(), host.size() * sizeof(host[0]),
                                       cudaMemcpyDeviceToHost, stream));
        DLB_CUDA_CHECK(cudaStreamSynchronize(stream));
        passes.emplace_back(host.begin(), host.end());
      }
      auto counters = onekernel_stamp_counters(dev->phases, passes);
      const auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      counters.emplace_back("stamp_overhead_us", median(with_us) - median(without_us));
      return counters;
    };
  }
  return [dev, buffers, count, stream = exec.stream] {
    launch(*dev, 0, count, buffers, dev->stamps.data(), stream);
  };
}

}  // namespace dlb::nn
