// What the process can see of GPUs, without CUDA headers: callable from every
// build.
#pragma once

#include <string>

#include "kernels/common/variant.h"

namespace dlb {

// Devices the process can use: 0 without CUDA in the build, without a
// device, or without a driver; throws dlb::Error when the devices cannot be
// used: a driver too old for the runtime, the toolkit's stub libcuda loaded
// instead of a driver, a listed device 0 on which no context can be made.
int gpu_count();

struct GpuInfo {
  int count = 0;
  std::string name = "none";   // device 0
  std::string compute_capability;
  std::string cuda_runtime;    // "13.0", or "none"
  std::string cuda_driver;     // highest CUDA version the driver supports, or "none"
  std::string cudnn;           // "9.19.0", or "none"
  std::string cublas;
  long long memory_bytes = 0;
  int l2_bytes = 0;
};

// Versions are filled whenever the build has the libraries, even without a GPU.
GpuInfo gpu_info();

// Owns what a case runs on: for Device::gpu a non-blocking CUDA stream on
// device 0, for Device::cpu nothing.
class ExecContext {
 public:
  explicit ExecContext(Device device);
  ExecContext(const ExecContext&) = delete;
  ExecContext& operator=(const ExecContext&) = delete;
  ~ExecContext();
  const Exec& exec() const { return exec_; }
  // Waits for everything enqueued on the stream (no-op on the CPU); throws
  // dlb::Error with the CUDA error string if the work failed.
  void synchronize() const;

 private:
  Exec exec_;
};

}  // namespace dlb
