// The roofline ceilings set up for measuring: same shape as the operator
// cases (validate, run, context, per-call counts) so the same harness times
// them. Each ceiling's output is checked too: a ceiling that skipped work
// would flatter everything measured against it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/common/gpu.h"
#include "kernels/common/operand.h"
#include "reference/compare.h"
#if DLB_HAVE_CUDA
#include "kernels/common/cuda_resources.h"
#endif

namespace dlb {

// STREAM copy (c = a) or triad (a = b + s*c), fp64, all cores.
class StreamCase {
 public:
  enum class Kind { copy, triad };
  StreamCase(Kind kind, std::int64_t n);
  ref::Comparison validate();
  void run();
  const ExecContext& context() const { return ctx_; }
  // Each array read or written once: copy 16n bytes, triad 24n.
  double bytes_per_call() const;

 private:
  Kind kind_;
  std::int64_t n_;
  ExecContext ctx_{Device::cpu};
  HostBuffer<double> a_, b_, c_;
};

// Peak fp32 FMA rate on the CPU (all cores) or the GPU (all SMs).
class FmaPeakCase {
 public:
  FmaPeakCase(Device device, std::int64_t iterations);
  ref::Comparison validate();
  void run();
  const ExecContext& context() const { return ctx_; }
  double flops_per_call() const;
  std::string label() const;  // ISA and threads (CPU) or grid (GPU)
  // GPU: one more call timed by CUDA events, and the SM clock it ran at
  // (the cycles block 0 counted over the call's time), in Hz.
  double measured_sm_clock_hz();

 private:
  Device device_;
  std::int64_t iterations_;
  ExecContext ctx_;
  double cpu_total_ = 0.0;
  int cpu_threads_ = 0;
  unsigned gpu_blocks_ = 0;
  Operand<float> gpu_out_;
  Operand<long long> gpu_cycles_;
};

// A large fp32 GEMM through the vendor library: oneDNN (CPU) or cuBLAS (GPU).
class SgemmCase {
 public:
  SgemmCase(Device device, std::int64_t m, std::int64_t n, std::int64_t k);
  // Spot check: a few spread rows of C against the double reference.
  ref::Comparison validate();
  void run() { run_(); }
  const ExecContext& context() const { return ctx_; }
  double flops_per_call() const { return 2.0 * static_cast<double>(m_) * static_cast<double>(n_) * static_cast<double>(k_); }

 private:
  std::int64_t m_, n_, k_;
  ExecContext ctx_;
  Operand<float> a_, b_, c_;
  Run run_;
};

// STREAM's triad on the GPU: a = b + s*c over n doubles (an own kernel),
// 24 bytes per element moved, as daxpy moves.
class GpuTriadCase {
 public:
  explicit GpuTriadCase(std::int64_t n);
  ref::Comparison validate();
  void run();
  const ExecContext& context() const { return ctx_; }
  double bytes_per_call() const { return 3.0 * 8.0 * static_cast<double>(n_); }

 private:
  std::int64_t n_;
  ExecContext ctx_{Device::gpu};
  Operand<double> a_, b_, c_;
};

// The GPU memory ceiling: the fastest of kGpuMemoryParts (roofline_memory.h),
// each moving `bytes` per call over fp64 arrays. validate() checks every
// part (bit-exact) and then times each, round by round (2 untimed rounds,
// then kMemoryRounds), each call as the benchmark times a GPU case: an L2
// read-through before it, the stream held while it is enqueued, two events
// around it (time_held_call); run() is the fastest part, which the case
// then times as every case is timed.
class GpuMemoryCase {
 public:
  explicit GpuMemoryCase(double bytes);
  ref::Comparison validate();
  void run();
  const ExecContext& context() const { return ctx_; }
  double bytes_per_call() const { return bytes_[static_cast<std::size_t>(chosen_)]; }
  // The chosen part's name, and every part's bytes per second in the choice.
  std::string_view chosen() const;
  const std::vector<double>& part_rates() const { return rates_; }

 private:
  void run_part(std::size_t part);
  std::int64_t n_max_;
  ExecContext ctx_{Device::gpu};
  Operand<double> a_, b_, c_;
  std::vector<std::int64_t> n_;  // per part
  std::vector<double> bytes_;    // per part, as counted
  std::vector<double> rates_;    // per part, bytes per second in the choice
  int chosen_ = 0;
#if DLB_HAVE_CUDA
  DeviceBuffer<unsigned char> flush_;
  DeviceBuffer<int> sink_;
#endif
};

// cudaMemcpyAsync device to device of n floats: 8 bytes per element moved.
class GpuCopyCase {
 public:
  explicit GpuCopyCase(std::int64_t n);
  ref::Comparison validate();
  void run();
  const ExecContext& context() const { return ctx_; }
  double bytes_per_call() const { return 2.0 * 4.0 * static_cast<double>(n_); }  // read + write

 private:
  std::int64_t n_;
  ExecContext ctx_{Device::gpu};
  Operand<float> src_, dst_;
};

}  // namespace dlb
