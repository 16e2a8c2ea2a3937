// The copy family's problems, set up and validated (no timing): shared by
// bench/copy.cpp and tests/test_copy.cpp. Built only with CUDA.
//
// Every case allocates its device memory first, so that a size the GPU
// cannot hold fails (dlb::Error with cudaMalloc's "out of memory") before
// any host memory is taken. At most one case is alive at a time in the
// benchmark (validated_case); the largest, at 1 GiB:
//   CopyCase h2d/d2h   1 GiB device; host: 1 GiB of the kind + the 1 GiB
//                      pattern, + a 1 GiB read-back while validating (h2d)
//   CopyCase d2d       2 GiB device; host: the pattern + the read-back
//   PipelineCase       1 GiB device; host: 2 GiB of the kind (in, out), + the
//                      2 GiB fp64 reference while validating
//   RegisterCostCase   host: 1 GiB; while validating 1 GiB device + 1 GiB read-back
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/common/buffer.h"
#include "kernels/common/gpu.h"
#include "kernels/copy/copy.h"
#include "reference/compare.h"

namespace dlb {

// One copy of `bytes` bytes as a CopyVariant does it. The source holds a
// seeded pattern whose bytes are never zero.
class CopyCase {
 public:
  CopyCase(const CopyVariant& variant, std::int64_t bytes);

  // Checks the host memory is the kind the name says; zeroes the
  // destination (no pattern byte is zero, so every byte the copy does not
  // write shows), one call, waits, reads the destination back and compares
  // it with the pattern byte for byte.
  ref::Comparison validate();
  void run() { run_(); }
  const ExecContext& context() const { return ctx_; }
  // The stream the call is ordered with: where its timing events belong.
  CUstream_st* stream() const { return stream_; }

 private:
  const CopyVariant& variant_;
  std::size_t bytes_;
  ExecContext ctx_;
  DeviceBuffer<std::uint8_t> device_;      // h2d, d2d: destination; d2h: source
  DeviceBuffer<std::uint8_t> device_src_;  // d2d only: the source
  HostBytes host_;                         // h2d: source; d2h: destination; d2d: none
  HostBuffer<std::uint8_t> pattern_;       // what the source holds (pageable)
  CopyArgs args_;
  CUstream_st* stream_;
  Run run_;
};

// cudaHostRegister + cudaHostUnregister of a pageable, page-aligned buffer
// whose pages have all been written (so registering does not fault them in).
class RegisterCostCase {
 public:
  explicit RegisterCostCase(std::int64_t bytes);

  // Registers the buffer, checks CUDA sees it page-locked, copies it to the
  // device and back through the registration and compares byte for byte,
  // unregisters, and checks it is pageable again.
  ref::Comparison validate();
  void run() { register_and_unregister(buffer_.get(), bytes_); }
  const ExecContext& context() const { return ctx_; }

 private:
  std::size_t bytes_;
  ExecContext ctx_;
  HostBytes buffer_;
};

// The chunk pipeline of copy.h over `bytes` bytes of floats, on `streams`
// worker streams (1: serialized), with host memory of `host`'s kind.
class PipelineCase {
 public:
  PipelineCase(const HostKind& host, int streams, int chunks, std::int64_t bytes);

  // Checks the host memory's kind; poisons the output and the device buffer
  // with NaN, runs the pipeline once and compares the output with the
  // reference (fp64).
  ref::Comparison validate();
  void run() { pipeline_.enqueue(ctx_.exec().stream); }
  const ExecContext& context() const { return ctx_; }

  // overlap_fraction = (t_serial - t_pipelined) / (t_serial - t_bound), where
  //   t_serial     this work on one stream (all stages of a chunk, then the next)
  //   t_pipelined  this case's schedule
  //   t_bound      max(t_h2d, t_kernel, t_d2h): each stage alone over all
  //                chunks on one stream; the pipeline cannot beat its slowest
  //                stage, since each stage has its own engine (the h2d copy
  //                engine, the SMs, the d2h copy engine)
  // each the median of a few event-timed runs, measured together on the
  // first call, after validation. 0: nothing overlapped (pageable memory);
  // 1: as fast as the slowest stage. With C chunks the pipeline's fill and
  // drain keep it about 1/C of the other stages short of 1.
  double overlap_fraction();

 private:
  // Called while constructing pipeline_ and serial_: in_, out_ and device_ exist.
  PipelineArgs pipeline_args(int chunks);
  double median_ms(const ChunkPipeline& pipeline, PipelineStages stages) const;

  const HostKind& host_;
  std::int64_t n_;  // floats
  ExecContext ctx_;
  DeviceBuffer<float> device_;
  HostBytes in_, out_;
  ChunkPipeline pipeline_;  // `streams` worker streams
  ChunkPipeline serial_;    // one worker stream: t_serial and the stages alone
  std::optional<double> overlap_fraction_;
};

}  // namespace dlb
