// 16-lane fp32 vectors for the conv CPU kernels, as GCC vector extensions:
// one zmm register where the build targets AVX-512 (-march=native here),
// two ymm or four xmm registers elsewhere, so the same kernels compile and
// stay correct on any x86-64 build. Internal to kernels/conv.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace dlb::simd {

inline constexpr int kLanes = 16;
using vfloat = float __attribute__((vector_size(64)));

inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vfloat v) { std::memcpy(p, &v, sizeof v); }
// Every lane x. (Not `vfloat{} + x`: 0 + x is not x for x = -0, so GCC keeps the add.)
inline vfloat splat(float x) {
#if defined(__AVX512F__)
  return _mm512_set1_ps(x);
#else
  vfloat v;
  for (int i = 0; i < kLanes; ++i) v[i] = x;
  return v;
#endif
}

// a*b + c, rounded once on AVX-512 (spelled out there). Elsewhere GCC
// contracts it into an FMA by itself where the target has one, from -O2 up
// (GCC 12, -std=c++20: the AVX2 Release build's direct kernels are all
// vfmadd; at -O1, the sanitizer build, a multiply and an add), so the
// kernels' tolerances allow either rounding.
inline vfloat fmadd(vfloat a, vfloat b, vfloat c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

// acc[kk][v] += b[kk] * a[v] for KB scalars (broadcast) and V vectors: the
// rank-1 update at the heart of the direct and Winograd kernels, with the
// accumulators in registers (KB * V <= 24 leaves room for a and b).
template <int KB, int V>
inline void rank1_update(vfloat (&acc)[KB][V], const float* b, const vfloat (&a)[V]) {
#pragma GCC unroll 8
  for (int kk = 0; kk < KB; ++kk) {
    const vfloat bk = splat(b[kk]);
#pragma GCC unroll 3
    for (int v = 0; v < V; ++v) acc[kk][v] = fmadd(bk, a[v], acc[kk][v]);
  }
}

// v[l] = base[index[l] + delta] for the lanes l whose bit is set in mask, 0
// for the others (which are not read: their index may point anywhere).
inline vfloat masked_gather(const float* base, const std::int32_t* index, std::int32_t delta, std::uint16_t mask) {
#if defined(__AVX512F__)
  const __m512i at = _mm512_add_epi32(_mm512_loadu_si512(index), _mm512_set1_epi32(delta));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, at, base, 4);
#else
  vfloat v = {};
  for (int l = 0; l < kLanes; ++l)
    if ((mask >> l) & 1) v[l] = base[index[l] + delta];
  return v;
#endif
}

// out[2i] = even[i], out[2i + 1] = odd[i]: the first `count` (<= 32)
// elements of that interleaving are written, nothing past them.
inline void store_interleaved(float* out, vfloat even, vfloat odd, int count) {
#if defined(__AVX512F__)
  const __m512i low = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i high = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  const auto mask = [](int n) { return static_cast<__mmask16>(n >= 16 ? 0xffff : n <= 0 ? 0 : (1u << n) - 1); };
  _mm512_mask_storeu_ps(out, mask(count), _mm512_permutex2var_ps(even, low, odd));
  if (count > 16) _mm512_mask_storeu_ps(out + 16, mask(count - 16), _mm512_permutex2var_ps(even, high, odd));
#else
  for (int i = 0; i < count; ++i) out[i] = (i % 2 == 0) ? even[i / 2] : odd[i / 2];
#endif
}

// out[i] = v[first + i] for i < count (first + count <= 16): a run of
// lanes written to where it belongs, nothing else touched.
inline void store_lanes(float* out, vfloat v, int first, int count) {
#if defined(__AVX512F__)
  const auto lanes = static_cast<__mmask16>((1u << count) - 1);
  _mm512_mask_storeu_ps(out, lanes, first == 0 ? v : _mm512_maskz_compress_ps(static_cast<__mmask16>(lanes << first), v));
#else
  for (int i = 0; i < count; ++i) out[i] = v[first + i];
#endif
}

}  // namespace dlb::simd
