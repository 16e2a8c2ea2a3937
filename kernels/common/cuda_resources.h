// RAII for CUDA resources: device and pinned buffers, streams, events, and
// CUDA graphs, the cuBLAS / cuDNN handles (their one owner: owned_handle.h).
// Destructors never throw; a failure to free is reported on stderr (it means
// an earlier error already broke the context).
// Include only from code built with CUDA.
#pragma once

#include <cstddef>
#include <functional>
#include <span>

#include "kernels/common/buffer.h"
#include "kernels/common/cuda_check.h"
#include "kernels/common/device_bytes.h"
#include "kernels/common/owned_handle.h"

namespace dlb {

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
class Stream : public OwnedHandle<cudaStream_t, cudaStreamDestroy, "cudaStreamDestroy"> {
 public:
  Stream() { DLB_CUDA_CHECK(cudaStreamCreateWithFlags(out(), cudaStreamNonBlocking)); }
  void synchronize() const { DLB_CUDA_CHECK(cudaStreamSynchronize(get())); }
};

class Event : public OwnedHandle<cudaEvent_t, cudaEventDestroy, "cudaEventDestroy"> {
 public:
  explicit Event(unsigned flags = cudaEventDefault) { DLB_CUDA_CHECK(cudaEventCreateWithFlags(out(), flags)); }
  void record(cudaStream_t stream) const { DLB_CUDA_CHECK(cudaEventRecord(get(), stream)); }
  void synchronize() const { DLB_CUDA_CHECK(cudaEventSynchronize(get())); }
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_ms_since(const Event& start) const {
    float ms = 0.0f;
    DLB_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), get()));
    return ms;
  }
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
class CublasHandle : public OwnedHandle<cublasHandle_t, cublasDestroy, "cublasDestroy"> {
 public:
  explicit CublasHandle(cudaStream_t stream) {
    DLB_CUBLAS_CHECK(cublasCreate(out()));
    DLB_CUBLAS_CHECK(cublasSetStream(get(), stream));
  }
};

#if DLB_HAVE_CUDNN
// A cuDNN handle bound to one stream.
class CudnnHandle : public OwnedHandle<cudnnHandle_t, cudnnDestroy, "cudnnDestroy"> {
 public:
  explicit CudnnHandle(cudaStream_t stream) {
    DLB_CUDNN_CHECK(cudnnCreate(out()));
    DLB_CUDNN_CHECK(cudnnSetStream(get(), stream));
  }
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
