// The benchmark binary's malloc: glibc's own (its __libc_* entry points),
// with every allocation's size and count added to two relaxed atomics, and
// the live bytes (each chunk's malloc_usable_size, added when it is
// allocated, taken off when it is freed or moved by realloc) with their
// peak, an atomic maximum updated by the allocation that raises it. The
// executable defines malloc and its family, so every allocation of the
// process goes through here (oneDNN, Eigen, OpenMP, the CUDA libraries'
// host memory), as glibc's manual describes for replacing malloc; the
// chunks stay glibc's, so free, malloc_usable_size and malloc_trim work on
// them unchanged. Not in sanitizer builds: AddressSanitizer replaces malloc
// itself. cudaMalloc is not counted (device memory: peak_bytes on the GPU).
#include "bench/alloc_counter.h"

#include <malloc.h>

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
std::atomic<std::int64_t> g_live{0}, g_peak{0};
}  // namespace

#if DLB_COUNT_ALLOCATIONS
bool alloc_counting() { return true; }
#else
bool alloc_counting() { return false; }
#endif

AllocCounts alloc_counts() {
  return {g_bytes.load(std::memory_order_relaxed), g_calls.load(std::memory_order_relaxed)};
}

std::int64_t alloc_live_bytes() { return g_live.load(std::memory_order_relaxed); }
std::int64_t alloc_peak_bytes() { return g_peak.load(std::memory_order_relaxed); }
std::int64_t alloc_peak_restart() {
  const std::int64_t live = g_live.load(std::memory_order_relaxed);
  g_peak.store(live, std::memory_order_relaxed);
  return live;
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
// The chunk's usable size (0 for none), what the live bytes count.
inline std::int64_t usable(void* p) { return p == nullptr ? 0 : static_cast<std::int64_t>(malloc_usable_size(p)); }

// Moves the live bytes by `delta`; a rise past the peak raises it.
inline void live(std::int64_t delta) {
  const std::int64_t now = dlb::bench::g_live.fetch_add(delta, std::memory_order_relaxed) + delta;
  if (delta <= 0) return;
  std::int64_t peak = dlb::bench::g_peak.load(std::memory_order_relaxed);
  while (now > peak && !dlb::bench::g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// One allocation of `bytes` requested that returned `p`.
inline void* count(std::size_t bytes, void* p) {
  dlb::bench::g_bytes.fetch_add(bytes, std::memory_order_relaxed);
  dlb::bench::g_calls.fetch_add(1, std::memory_order_relaxed);
  live(usable(p));
  return p;
}
}  // namespace

extern "C" {
void* malloc(std::size_t n) { return count(n, __libc_malloc(n)); }
void free(void* p) {
  live(-usable(p));
  __libc_free(p);
}
void* calloc(std::size_t count_, std::size_t size) { return count(count_ * size, __libc_calloc(count_, size)); }
// The old chunk leaves the live bytes (realloc frees it, or keeps it as the
// new one, which count adds back at its new size); a failed realloc leaves
// it as it was.
void* realloc(void* p, std::size_t n) {
  const std::int64_t old = usable(p);
  void* q = __libc_realloc(p, n);
  if (q == nullptr && n != 0) return nullptr;
  live(-old);
  return count(n, q);
}
void* memalign(std::size_t alignment, std::size_t n) { return count(n, __libc_memalign(alignment, n)); }
void* aligned_alloc(std::size_t alignment, std::size_t n) { return count(n, __libc_memalign(alignment, n)); }
int posix_memalign(void** out, std::size_t alignment, std::size_t n) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, n);
  if (p == nullptr && n != 0) return ENOMEM;
  *out = count(n, p);
  return 0;
}
void* valloc(std::size_t n) { return count(n, __libc_valloc(n)); }
void* pvalloc(std::size_t n) { return count(n, __libc_pvalloc(n)); }
}
#endif
