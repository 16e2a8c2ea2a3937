// 16-lane fp32 vectors for the conv CPU kernels, as GCC vector extensions:
// one zmm register where the build targets AVX-512 (-march=native here),
// two ymm or four xmm registers elsewhere, so the same kernels compile and
// stay correct on any x86-64 build. Internal to kernels/conv.
#pragma once

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
inline vfloat splat(float x) { return vfloat{} + x; }

// a*b + c rounded once where the build has FMA. Spelled out: in ISO C++ mode
// (-std=c++20) GCC does not contract a*b + c into an FMA by itself.
inline vfloat fmadd(vfloat a, vfloat b, vfloat c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}

}  // namespace dlb::simd
