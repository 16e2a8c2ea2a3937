// The benchmark binary's malloc: glibc's own (its __libc_* entry points),
// with every allocation's size and count added to two relaxed atomics. The
// executable defines malloc and its family, so every allocation of the
// process goes through here (oneDNN, Eigen, OpenMP, the CUDA libraries'
// host memory), as glibc's manual describes for replacing malloc; the
// chunks stay glibc's, so free, malloc_usable_size and malloc_trim work on
// them unchanged. Not in sanitizer builds: AddressSanitizer replaces malloc
// itself. cudaMalloc is not counted (device memory: peak_bytes on the GPU).
#include "bench/alloc_counter.h"

#include <atomic>
#include <cerrno>
#include <cstddef>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DLB_COUNT_ALLOCATIONS 0
#else
#define DLB_COUNT_ALLOCATIONS 1
#endif

namespace dlb::bench {
namespace {
std::atomic<std::uint64_t> g_bytes{0}, g_calls{0};
}  // namespace

#if DLB_COUNT_ALLOCATIONS
bool alloc_counting() { return true; }
#else
bool alloc_counting() { return false; }
#endif

AllocCounts alloc_counts() {
  return {g_bytes.load(std::memory_order_relaxed), g_calls.load(std::memory_order_relaxed)};
}

}  // namespace dlb::bench

#if DLB_COUNT_ALLOCATIONS
extern "C" {
void* __libc_malloc(std::size_t);
void __libc_free(void*);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* __libc_valloc(std::size_t);
void* __libc_pvalloc(std::size_t);
}

namespace {
inline void count(std::size_t bytes) {
  dlb::bench::g_bytes.fetch_add(bytes, std::memory_order_relaxed);
  dlb::bench::g_calls.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(std::size_t n) {
  count(n);
  return __libc_malloc(n);
}
void free(void* p) { __libc_free(p); }
void* calloc(std::size_t count_, std::size_t size) {
  count(count_ * size);
  return __libc_calloc(count_, size);
}
void* realloc(void* p, std::size_t n) {
  count(n);
  return __libc_realloc(p, n);
}
void* memalign(std::size_t alignment, std::size_t n) {
  count(n);
  return __libc_memalign(alignment, n);
}
void* aligned_alloc(std::size_t alignment, std::size_t n) {
  count(n);
  return __libc_memalign(alignment, n);
}
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, n);
  if (p == nullptr && n != 0) return ENOMEM;
  count(n);
  *out = p;
  return 0;
}
void* valloc(std::size_t n) {
  count(n);
  return __libc_valloc(n);
}
void* pvalloc(std::size_t n) {
  count(n);
  return __libc_pvalloc(n);
}
}
#endif
