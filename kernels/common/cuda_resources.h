// RAII for CUDA resources: device and pinned buffers, streams, events, and
// CUDA graphs, the cuBLAS / cuDNN handles. Destructors never throw; a failure to free is
// reported on stderr (it means an earlier error already broke the context).
// Include only from code built with CUDA.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <span>
#include <utility>

#include "kernels/common/buffer.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/device_bytes.h"

namespace dlb {

namespace detail {
inline void report_release_failure(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    std::fprintf(stderr, "dlbench: %s failed: %s\n", what, cudaGetErrorString(status));
}
}  // namespace detail

// Counted in the process's DeviceByteCount (device_bytes.h): this process's
// own device memory, which other processes on the GPU cannot disturb.
struct DeviceMemory {
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    DLB_CUDA_CHECK(cudaMalloc(&p, bytes));
    DeviceByteCount::process().allocated(p, bytes);
    return p;
  }
  static void deallocate(void* p) noexcept {
    DeviceByteCount::process().freed(p);
    detail::report_release_failure(cudaFree(p), "cudaFree");
  }
};

// Page-locked host memory; `Flags` as for cudaHostAlloc.
template <unsigned Flags>
struct PinnedMemory {
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    DLB_CUDA_CHECK(cudaHostAlloc(&p, bytes, Flags));
    return p;
  }
  static void deallocate(void* p) noexcept { detail::report_release_failure(cudaFreeHost(p), "cudaFreeHost"); }
};

template <class T>
using DeviceBuffer = Buffer<T, DeviceMemory>;
template <class T>
using PinnedBuffer = Buffer<T, PinnedMemory<cudaHostAllocDefault>>;
// Write-combined pinned memory: fast for the GPU to read over PCIe, very slow
// for the CPU to read. Host-to-device staging only.
template <class T>
using WriteCombinedBuffer = Buffer<T, PinnedMemory<cudaHostAllocWriteCombined>>;

// A new device buffer holding a copy of `host`, complete when it returns:
// cudaMemcpy from pageable memory may return before its DMA lands, in the
// legacy default stream's order, which non-blocking streams do not follow.
template <class T>
DeviceBuffer<T> to_device(std::span<const T> host) {
  DeviceBuffer<T> d(host.size());
  if (!host.empty()) {
    DLB_CUDA_CHECK(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    DLB_CUDA_CHECK(cudaDeviceSynchronize());
  }
  return d;
}

// A non-blocking stream (no implicit synchronization with the legacy default stream).
class Stream {
 public:
  Stream() { DLB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(Stream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  Stream& operator=(Stream&&) = delete;
  Stream(const Stream&) = delete;
  ~Stream() {
    if (stream_ != nullptr) detail::report_release_failure(cudaStreamDestroy(stream_), "cudaStreamDestroy");
  }
  cudaStream_t get() const { return stream_; }
  void synchronize() const { DLB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  explicit Event(unsigned flags = cudaEventDefault) { DLB_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags)); }
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  Event(const Event&) = delete;
  ~Event() {
    if (event_ != nullptr) detail::report_release_failure(cudaEventDestroy(event_), "cudaEventDestroy");
  }
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const { DLB_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  void synchronize() const { DLB_CUDA_CHECK(cudaEventSynchronize(event_)); }
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_ms_since(const Event& start) const {
    float ms = 0.0f;
    DLB_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// A CUDA graph captured once from what `record` enqueues on `stream`, and
// its executable instance; launch() replays it on a stream.
class CudaGraph {
 public:
  CudaGraph(cudaStream_t stream, const std::function<void()>& record) {
    DLB_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      record();
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(stream, &broken);
      if (broken != nullptr) cudaGraphDestroy(broken);
      throw;
    }
    DLB_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    try {
      DLB_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    } catch (...) {
      cudaGraphDestroy(graph_);
      throw;
    }
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() {
    detail::report_release_failure(cudaGraphExecDestroy(exec_), "cudaGraphExecDestroy");
    detail::report_release_failure(cudaGraphDestroy(graph_), "cudaGraphDestroy");
  }
  void launch(cudaStream_t stream) const { DLB_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// A cuBLAS handle bound to one stream.
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream) {
    DLB_CUBLAS_CHECK(cublasCreate(&handle_));
    try {
      DLB_CUBLAS_CHECK(cublasSetStream(handle_, stream));
    } catch (...) {
      cublasDestroy(handle_);  // the destructor of a half-built object never runs
      throw;
    }
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  ~CublasHandle() {
    if (cublasDestroy(handle_) != CUBLAS_STATUS_SUCCESS) std::fprintf(stderr, "dlbench: cublasDestroy failed\n");
  }
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

#if DLB_HAVE_CUDNN
// A cuDNN handle bound to one stream.
class CudnnHandle {
 public:
  explicit CudnnHandle(cudaStream_t stream) {
    DLB_CUDNN_CHECK(cudnnCreate(&handle_));
    try {
      DLB_CUDNN_CHECK(cudnnSetStream(handle_, stream));
    } catch (...) {
      cudnnDestroy(handle_);  // the destructor of a half-built object never runs
      throw;
    }
  }
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  ~CudnnHandle() {
    if (cudnnDestroy(handle_) != CUDNN_STATUS_SUCCESS) std::fprintf(stderr, "dlbench: cudnnDestroy failed\n");
  }
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};
#endif

// Grid size for `n` work items in blocks of `block` threads.
constexpr unsigned blocks_for(std::size_t n, unsigned block) {
  return static_cast<unsigned>((n + block - 1) / block);
}

// Streaming multiprocessors of the current device, asked once per process
// (dlbench uses device 0 only).
inline int sm_count() {
  static const int count = [] {
    int device = 0, sms = 0;
    DLB_CUDA_CHECK(cudaGetDevice(&device));
    DLB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return count;
}

}  // namespace dlb
