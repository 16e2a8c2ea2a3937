#include "kernels/common/gpu.h"

#include <cstdio>

#include "kernels/common/error.h"

#if DLB_HAVE_CUDA
#include "kernels/common/cuda_check.h"
#include <cublas_v2.h>
#include <cuda_runtime.h>
#if DLB_HAVE_CUDNN
#include <cudnn.h>
#endif
#endif

namespace dlb {

#if DLB_HAVE_CUDA
namespace {
std::string cuda_version_string(int v) {
  return v <= 0 ? "none" : std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}
}  // namespace

int gpu_count() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status == cudaSuccess) {
    if (n > 0) {
      // A device that is listed but on which no context can be made (busy in
      // exclusive mode, an ECC or Xid failure, no MIG instance for us) is a
      // broken GPU machine, not one without a GPU: say so here, once.
      const cudaError_t context = cudaFree(nullptr);
      if (context != cudaSuccess) {
        throw Error(std::string("CUDA device 0 is there but cannot be used: creating its context failed: ") +
                    cudaGetErrorName(context) + ": " + cudaGetErrorString(context));
      }
    }
    return n;
  }
  cudaGetLastError();  // clear the last error (an initialization error stays, harmlessly: no GPU case runs)
  // The toolkit's stub libcuda (lib64/stubs, for linking only) found before
  // a real driver: whatever the machine has, this process cannot see it.
  if (status == cudaErrorStubLibrary) {
    throw Error(std::string("CUDA devices cannot be used: the CUDA driver library loaded is the toolkit's stub "
                            "(") + cudaGetErrorName(status) + "); take the toolkit's lib64/stubs off the library path");
  }
  // No device, or no driver at all (driver version 0): this machine has no
  // GPU to use, and GPU cases and tests are left out. Anything else (a
  // driver too old for this CUDA runtime, a broken install) is a machine
  // with a GPU that cannot be used: an error, not a quiet "no GPU".
  int driver = 0;
  if (status == cudaErrorNoDevice || cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return 0;
  int runtime = 0;
  cudaRuntimeGetVersion(&runtime);
  throw Error(std::string("CUDA devices cannot be used: cudaGetDeviceCount failed: ") + cudaGetErrorName(status) +
              ": " + cudaGetErrorString(status) + " (driver supports CUDA " + cuda_version_string(driver) +
              ", runtime is " + cuda_version_string(runtime) + ")");
}

GpuInfo gpu_info() {
  GpuInfo info;
  int v = 0;
  info.cuda_runtime = cudaRuntimeGetVersion(&v) == cudaSuccess ? cuda_version_string(v) : "none";
  v = 0;
  info.cuda_driver = cudaDriverGetVersion(&v) == cudaSuccess ? cuda_version_string(v) : "none";
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    info.cublas = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  } else {
    info.cublas = "none";
  }
#if DLB_HAVE_CUDNN
  const auto c = cudnnGetVersion();  // 91900 for 9.19.0
  info.cudnn = std::to_string(c / 10000) + "." + std::to_string((c % 10000) / 100) + "." +
               std::to_string(c % 100);
#else
  info.cudnn = "none";
#endif
  info.count = gpu_count();
  if (info.count > 0) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) {
      info.name = prop.name;
      info.compute_capability = std::to_string(prop.major) + "." + std::to_string(prop.minor);
      info.memory_bytes = static_cast<long long>(prop.totalGlobalMem);
      info.l2_bytes = prop.l2CacheSize;
    }
  }
  return info;
}

ExecContext::ExecContext(Device device) {
  if (device == Device::gpu) {
    cudaStream_t s = nullptr;
    DLB_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    exec_.stream = s;
  }
}

ExecContext::~ExecContext() {
  if (exec_.stream != nullptr && cudaStreamDestroy(exec_.stream) != cudaSuccess)
    std::fprintf(stderr, "dlbench: cudaStreamDestroy failed\n");
}

void ExecContext::synchronize() const {
  if (exec_.stream != nullptr) DLB_CUDA_CHECK(cudaStreamSynchronize(exec_.stream));
}
#else
int gpu_count() { return 0; }

GpuInfo gpu_info() {
  GpuInfo info;
  info.cuda_runtime = info.cuda_driver = info.cudnn = info.cublas = "none";
  return info;
}

ExecContext::ExecContext(Device device) {
  DLB_REQUIRE(device == Device::cpu, "a GPU case in a build without CUDA");
}
ExecContext::~ExecContext() = default;
void ExecContext::synchronize() const {}
#endif

}  // namespace dlb
