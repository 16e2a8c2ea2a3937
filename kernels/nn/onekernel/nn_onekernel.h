// gpu_onekernel (see nn.h): a whole forward pass in one persistent
// cooperative launch that walks a program of per-layer descriptors, each
// layer cut into tiles a block computes from shared memory
// (onekernel_math.h), with a grid-wide barrier between dependent layers. This header
// builds the program (shared by the GPU row, nn_gpu_onekernel.cu, and its
// host twin, nn_onekernel_host.cpp). Internal to kernels/nn.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/nn/infer/nn.h"
#include "kernels/nn/onekernel/onekernel_math.h"

namespace dlb::nn {

// Every conv's and fc's weights and bias in one buffer, every activation but
// the network's output in one arena: a region per layer output, never
// reused (resnet20 at batch 1: 0.6 MB, L2-resident), each region and
// parameter block starting at a multiple of kOneKernelAlign floats.
struct OneKernelProgram {
  std::vector<ok::Layer> layers;  // network order; the last writes y (ok::kOutput)
  std::vector<float> params;
  std::int64_t arena_floats = 0;
  std::int64_t smem_floats = 0;  // the most shared memory a layer's tile uses (the launch's dynamic shared memory)
};
inline constexpr std::int64_t kOneKernelAlign = 32;  // 128 bytes

// Throws dlb::Error for a layer kind or a join the program cannot express,
// or a conv no tiling fits (shared memory, threads).
OneKernelProgram build_onekernel_program(const Network& net, std::int64_t batch);

// The kernel's own time. It stamps %globaltimer (ns, one clock for every
// SM, unlike clock64's per-SM cycles) into a device buffer of 64-bit
// values: slot 0 at the launch's start (block 0, thread 0), slot k right
// after the k-th grid-wide barrier (block 0, thread 0, once the barrier has
// let it through: every block has finished the phase before), and the last
// slot at the launch's end (thread 0 of every block after its block's last
// work, atomicMax: the last block's end; the timer only grows, so the slot
// needs no reset between passes). The slots are ok::walk's, the walk the
// kernel and the host twin share. A phase is the layers between two stamps:
// one layer, or several that read no output of each other (resnet20's
// downsample conv beside its block's first conv).
struct OneKernelPhase {
  int first = 0, last = 0;  // layers [first, last) of the program
};
// The phases of a whole pass, in order: ok::walk's barriers + 1 of them.
std::vector<OneKernelPhase> onekernel_phases(const OneKernelProgram& program);
// A phase's counter: "layer_us.<i>" for layer i alone, "layer_us.<i>-<j>"
// for layers i to j (the indices of the layer profile's cases, layer:<i>).
std::string onekernel_phase_counter(const OneKernelPhase& phase);
// The counters of passes' stamps (each phases.size() + 1 values, ns): per
// phase its median time in us, "stamped_us" (the median of the first stamp
// to the last) and "barriers". Throws dlb::Error for a pass whose stamps
// are missing or out of order (a slot the kernel did not write holds an
// older pass's value, or zero).
std::vector<std::pair<std::string, double>> onekernel_stamp_counters(
    const std::vector<OneKernelPhase>& phases, std::span<const std::vector<std::uint64_t>> passes);

// The host twin: the program run on the CPU, layer by layer, every tile's
// steps by all ok::kThreads threads in turn, as a block runs them between
// its __syncthreads(). Reports one call per layer (each runs that layer's
// descriptor alone). Its pass walks
// the layers by ok::walk and stamps the host's steady clock where the kernel
// stamps its timer; measured_counters reports the last pass's stamps as the
// kernel's are reported.
Run prepare_onekernel_on_host(const NetArgs& args);
// The same, each step's threads run from the last to the first: a step
// whose threads read what another thread of the same step writes would
// compute other bits in the two orders (a test's check of the premise that
// lets the twin stand for any schedule of a block).
Run prepare_onekernel_on_host_threads_reversed(const NetArgs& args);

}  // namespace dlb::nn
