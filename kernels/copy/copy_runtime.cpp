// The copy family's CUDA runtime calls: the copies themselves, the host
// memory kinds that need more than a Buffer policy, and registration.
#include <unistd.h>

#include <new>
#include <utility>

#include "kernels/copy/copy.h"

namespace dlb {
namespace {

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

// ------------------------------------------------------------ host memory

void* PageAlignedMemory::allocate(std::size_t bytes) {
  const std::size_t page = page_size();
  const std::size_t whole_pages = (bytes + page - 1) / page * page;
  return ::operator new(whole_pages, std::align_val_t(page));
}

void PageAlignedMemory::deallocate(void* p) noexcept { ::operator delete(p, std::align_val_t(page_size())); }

void* RegisteredMemory::allocate(std::size_t bytes) {
  void* p = PageAlignedMemory::allocate(bytes);
  try {
    DLB_CUDA_CHECK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
  } catch (...) {
    PageAlignedMemory::deallocate(p);
    throw;
  }
  return p;
}

void RegisteredMemory::deallocate(void* p) noexcept {
  detail::report_release_failure(cudaHostUnregister(p), "cudaHostUnregister");
  PageAlignedMemory::deallocate(p);
}

bool is_page_locked(const void* p) {
  cudaPointerAttributes attributes{};
  DLB_CUDA_CHECK(cudaPointerGetAttributes(&attributes, p));
  return attributes.type == cudaMemoryTypeHost;
}

bool host_register_supported() {
  int device = 0, supported = 0;
  DLB_CUDA_CHECK(cudaGetDevice(&device));
  DLB_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterSupported, device));
  return supported != 0;
}

HostRegistration::HostRegistration(void* data, std::size_t bytes) {
  DLB_CUDA_CHECK(cudaHostRegister(data, bytes, cudaHostRegisterDefault));
  data_ = data;
}

HostRegistration::~HostRegistration() {
  if (data_ != nullptr) detail::report_release_failure(cudaHostUnregister(data_), "cudaHostUnregister");
}

void HostRegistration::unregister() {
  void* data = std::exchange(data_, nullptr);
  if (data != nullptr) DLB_CUDA_CHECK(cudaHostUnregister(data));
}

void register_and_unregister(void* data, std::size_t bytes) { HostRegistration(data, bytes).unregister(); }

// ------------------------------------------------------------ the copies

void copy_sync(const CopyArgs& args, CUstream_st* /*legacy_default_stream: where cudaMemcpy runs*/) {
  DLB_CUDA_CHECK(cudaMemcpy(args.dst, args.src, args.bytes, memcpy_kind(args.direction)));
}

void copy_async(const CopyArgs& args, CUstream_st* stream) {
  DLB_CUDA_CHECK(cudaMemcpyAsync(args.dst, args.src, args.bytes, memcpy_kind(args.direction), stream));
}

}  // namespace dlb
