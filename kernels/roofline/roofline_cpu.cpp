// CPU ceilings: STREAM copy and triad with streaming stores (AVX-512 or
// AVX2), and the FMA peak.
#include <immintrin.h>
#include <omp.h>

#include <cmath>
#include <cstdint>

#include "kernels/roofline/roofline.h"

namespace dlb {
// Streaming stores on AVX-512 and on AVX2: without them the destination's
// lines are read for ownership before they are written, bytes the kernels
// do not count. Before AVX2 had its path, the Zen 3 VM (AVX2, no AVX-512)
// ran the plain loops: cpu_triad moved 32 bytes per element and counted
// 24, and daxpy (which writes what it has just read, no extra read) read
// 1.28-1.40 of it, bracketed, where the AVX-512 machines read 0.99-1.12.
#if defined(__AVX512F__) || defined(__AVX2__)
namespace {

// Streaming stores need an aligned destination (64 bytes for AVX-512, 32
// for AVX2); the buffers are 64-byte aligned.
bool aligned64(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 63) == 0; }

// The widest vectors the build targets, as the kernels below use them: D of
// kDoubles doubles, F of kFloats floats (fmadd only where the build has FMA).
#if defined(__AVX512F__)
struct Vec {
  static constexpr int kDoubles = 8, kFloats = 16;
  using D = __m512d;
  using F = __m512;
  static D load(const double* p) { return _mm512_loadu_pd(p); }
  static void stream(double* p, D v) { _mm512_stream_pd(p, v); }
  static D set1(double x) { return _mm512_set1_pd(x); }
  static D fmadd(D a, D b, D c) { return _mm512_fmadd_pd(a, b, c); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F zero() { return _mm512_setzero_ps(); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* p, F v) { _mm512_store_ps(p, v); }
};
#else
struct Vec {
  static constexpr int kDoubles = 4, kFloats = 8;
  using D = __m256d;
  using F = __m256;
  static D load(const double* p) { return _mm256_loadu_pd(p); }
  static void stream(double* p, D v) { _mm256_stream_pd(p, v); }
  static D set1(double x) { return _mm256_set1_pd(x); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F zero() { return _mm256_setzero_ps(); }
  static void store(float* p, F v) { _mm256_store_ps(p, v); }
#if defined(__FMA__)
  static D fmadd(D a, D b, D c) { return _mm256_fmadd_pd(a, b, c); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
#endif
};
#endif

}  // namespace
#endif

const char* stream_store_kind() {
#if defined(__AVX512F__)
  return "AVX-512 streaming stores";
#elif defined(__AVX2__)
  return "AVX2 streaming stores";
#else
  return "plain stores";
#endif
}

void stream_copy(const double* a, double* c, std::int64_t n) {
#if defined(__AVX512F__) || defined(__AVX2__)
  if (aligned64(c)) {
    const std::int64_t vec_end = n - n % Vec::kDoubles;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < vec_end; i += Vec::kDoubles) Vec::stream(c + i, Vec::load(a + i));
    for (std::int64_t i = vec_end; i < n; ++i) c[i] = a[i];
    _mm_sfence();
    return;
  }
#endif
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) c[i] = a[i];
}

void stream_triad(double* a, const double* b, const double* c, double s, std::int64_t n) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
  if (aligned64(a)) {
    const std::int64_t vec_end = n - n % Vec::kDoubles;
    const Vec::D vs = Vec::set1(s);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < vec_end; i += Vec::kDoubles)
      Vec::stream(a + i, Vec::fmadd(vs, Vec::load(c + i), Vec::load(b + i)));
    for (std::int64_t i = vec_end; i < n; ++i) a[i] = std::fma(s, c[i], b[i]);
    _mm_sfence();
    return;
  }
#endif
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) a[i] = std::fma(s, c[i], b[i]);
}

int cpu_fma_lanes() {
#if defined(__AVX512F__)
  return 16;
#elif defined(__AVX2__) && defined(__FMA__)
  return 8;
#else
  return 1;
#endif
}

double cpu_fma_peak(std::int64_t iterations, int* threads_used) {
  // a and b through volatile: the compiler must not fold the recurrence.
  volatile float a_in = 0.5f, b_in = 0.5f;
  const float a = a_in, b = b_in;
  double total = 0.0;
  int threads = 1;
#pragma omp parallel reduction(+ : total)
  {
#pragma omp single
    threads = omp_get_num_threads();
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
    const Vec::F va = Vec::set1(a), vb = Vec::set1(b);
    Vec::F acc[kFmaChains];
    for (auto& v : acc) v = Vec::zero();
    for (std::int64_t it = 0; it < iterations; ++it)
      for (auto& v : acc) v = Vec::fmadd(v, va, vb);
    // Lanes summed through memory: GCC 12's _mm512_reduce_add_ps trips a
    // false -Wuninitialized.
    alignas(sizeof(Vec::F)) float lanes[Vec::kFloats];
    for (auto& v : acc) {
      Vec::store(lanes, v);
      for (float x : lanes) total += x;
    }
#else
    float acc[kFmaChains] = {};
    for (std::int64_t it = 0; it < iterations; ++it)
      for (auto& v : acc) v = std::fma(v, a, b);
    for (float v : acc) total += v;
#endif
  }
  *threads_used = threads;
  return total;
}

}  // namespace dlb
