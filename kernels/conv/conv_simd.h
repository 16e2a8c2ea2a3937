// 16-lane fp32 vectors for the conv CPU kernels: one zmm register where the
// build targets AVX-512 (-march=native here), a pair of ymm registers where
// it targets AVX without AVX-512, and GCC's generic vector extension
// elsewhere, so the same kernels compile and stay correct on any x86-64
// build. Internal to kernels/conv.
//
// Why a pair and not GCC's 64-byte vector extension on AVX2: without
// AVX-512, GCC has no register mode for a 64-byte vector, so it keeps every
// such variable in memory and splits each operation into loads, 128-bit
// inserts and stores (GCC 12, -O3 -march=znver3: the Winograd GEMM's 8
// accumulators lived on the stack, about 15 instructions per multiply-add).
// A struct of two __m256 is split by the compiler into two registers.
//
// kRegisters: the registers one vfloat takes, for the kernels that size
// their register blocks (how many vfloats they keep live) to the 32 zmm of
// AVX-512 or the 16 ymm of AVX2.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) || defined(__AVX__)
#include <immintrin.h>
#endif

namespace dlb::simd {

inline constexpr int kLanes = 16;

#if defined(__AVX512F__) || !defined(__AVX__)
inline constexpr int kRegisters = 1;
using vfloat = float __attribute__((vector_size(64)));
inline vfloat max(vfloat a, vfloat b) { return a > b ? a : b; }
#else
inline constexpr int kRegisters = 2;
// Lanes 0-7 in lo, 8-15 in hi. Value-initialized (vfloat{}) it is zero.
struct vfloat {
  __m256 lo, hi;
  float operator[](int i) const {
    float lanes[kLanes];
    _mm256_storeu_ps(lanes, lo);
    _mm256_storeu_ps(lanes + 8, hi);
    return lanes[i];
  }
  vfloat& operator+=(vfloat b) { return *this = {_mm256_add_ps(lo, b.lo), _mm256_add_ps(hi, b.hi)}; }
  vfloat& operator-=(vfloat b) { return *this = {_mm256_sub_ps(lo, b.lo), _mm256_sub_ps(hi, b.hi)}; }
  vfloat& operator*=(vfloat b) { return *this = {_mm256_mul_ps(lo, b.lo), _mm256_mul_ps(hi, b.hi)}; }
};
inline vfloat operator+(vfloat a, vfloat b) { return a += b; }
inline vfloat operator-(vfloat a, vfloat b) { return a -= b; }
inline vfloat operator*(vfloat a, vfloat b) { return a *= b; }
// The sign flipped, as the vector extension's unary minus (0 becomes -0).
inline vfloat operator-(vfloat a) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  return {_mm256_xor_ps(a.lo, sign), _mm256_xor_ps(a.hi, sign)};
}
// a > b ? a : b per lane, as the vector extension's select and vmaxps
// (b where either is NaN).
inline vfloat max(vfloat a, vfloat b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
#endif

// v > 0 ? v : 0 per lane (0 for NaN and -0).
inline vfloat relu(vfloat v) { return max(v, vfloat{}); }

#if !defined(__AVX512F__) && defined(__AVX__)
// Through the intrinsics: a memcpy into the pair made GCC keep arrays of
// vfloats in memory.
inline vfloat load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void store(float* p, vfloat v) {
  _mm256_storeu_ps(p, v.lo);
  _mm256_storeu_ps(p + 8, v.hi);
}
#else
inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, vfloat v) { std::memcpy(p, &v, sizeof v); }
#endif
// Lanes 0-7 at p, lanes 8-15 at p + half (a Blocked16 layout's halves;
// half = 8: the 16 adjacent, one load).
inline vfloat load(const float* p, std::int64_t half) {
#if !defined(__AVX512F__) && defined(__AVX__)
  return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + half)};
#else
  if (half == 8) return load(p);
  float lanes[kLanes];
  std::memcpy(lanes, p, sizeof lanes / 2);
  std::memcpy(lanes + 8, p + half, sizeof lanes / 2);
  return load(lanes);
#endif
}
inline void store(float* p, vfloat v, std::int64_t half) {
#if !defined(__AVX512F__) && defined(__AVX__)
  _mm256_storeu_ps(p, v.lo);
  _mm256_storeu_ps(p + half, v.hi);
#else
  if (half == 8) return store(p, v);
  float lanes[kLanes];
  store(lanes, v);
  std::memcpy(p, lanes, sizeof lanes / 2);
  std::memcpy(p + half, lanes + 8, sizeof lanes / 2);
#endif
}
// Every lane x. (Not `vfloat{} + x`: 0 + x is not x for x = -0, so GCC keeps the add.)
inline vfloat splat(float x) {
#if defined(__AVX512F__)
  return _mm512_set1_ps(x);
#elif defined(__AVX__)
  return {_mm256_set1_ps(x), _mm256_set1_ps(x)};
#else
  float lanes[kLanes];
  for (float& lane : lanes) lane = x;
  return load(lanes);
#endif
}

// Keeps v in registers from here on. Without it GCC folds a vfloat's two
// loads into every FMA that reads it: the AVX2 Winograd GEMM's filter pair
// was loaded again for each of its 4 tiles, 12 loads to 8 FMAs, more than
// the two 256-bit loads a cycle a Zen 3 core makes (perf: the loop waited
// on them). With AVX-512 the compiler keeps it by itself: nothing there.
inline void in_registers([[maybe_unused]] vfloat& v) {
#if !defined(__AVX512F__) && defined(__AVX__)
  asm("" : "+x"(v.lo), "+x"(v.hi));
#endif
}

// a*b + c, rounded once where the target has FMA (spelled out there).
// Elsewhere GCC contracts it into an FMA by itself where it can, from -O2
// up, and at -O1 leaves a multiply and an add, so the kernels' tolerances
// allow either rounding. On AVX2 a vfloat is a pair of ymm, each taking
// the one-register form.
#if !defined(__AVX512F__) && defined(__AVX__)
inline __m256 fmadd(__m256 a, __m256 b, __m256 c) {
#if defined(__FMA__)
  return _mm256_fmadd_ps(a, b, c);
#else
  return a * b + c;
#endif
}
// a*b - c: fmadd(a, b, -c) without the sign flip's instruction.
inline __m256 fmsub(__m256 a, __m256 b, __m256 c) {
#if defined(__FMA__)
  return _mm256_fmsub_ps(a, b, c);
#else
  return a * b - c;
#endif
}
#endif
inline vfloat fmadd(vfloat a, vfloat b, vfloat c) {
#if defined(__AVX512F__)
  return _mm512_fmadd_ps(a, b, c);
#elif defined(__AVX__)
  return {fmadd(a.lo, b.lo, c.lo), fmadd(a.hi, b.hi, c.hi)};
#else
  return a * b + c;
#endif
}
inline vfloat fmsub(vfloat a, vfloat b, vfloat c) {
#if defined(__AVX512F__)
  return _mm512_fmsub_ps(a, b, c);
#elif defined(__AVX__)
  return {fmsub(a.lo, b.lo, c.lo), fmsub(a.hi, b.hi, c.hi)};
#else
  return a * b - c;
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

// A part of a vfloat, what the Winograd kernels' input transform works on:
// on AVX2 a half (one ymm: the 36 row transforms of a tile's 16 lanes, 72
// ymm, would all wait on the stack for the column pass), elsewhere the
// whole vfloat. kHalves parts make a vfloat, part p its lanes 8p .. 8p + 7
// on AVX2. A vhalf has the vector extension's operators (GCC defines
// __m256 as one), splat_as below, and fmadd and fmsub (above).
#if !defined(__AVX512F__) && defined(__AVX__)
inline constexpr int kHalves = 2;
using vhalf = __m256;
#else
inline constexpr int kHalves = 1;
using vhalf = vfloat;
#endif
// Every lane x, as a V (vfloat or vhalf).
template <class V>
inline V splat_as(float x) {
  return splat(x);
}
#if !defined(__AVX512F__) && defined(__AVX__)
template <>
inline vhalf splat_as<vhalf>(float x) {
  return _mm256_set1_ps(x);
}
#endif
// A part at p of a layout whose lanes 8-15 lie `half` floats after lanes
// 0-7 (as load(p, half)); on AVX2 part 1 starts at p + part_offset(1, half).
inline vhalf load_part(const float* p, [[maybe_unused]] std::int64_t half) {
#if !defined(__AVX512F__) && defined(__AVX__)
  return _mm256_loadu_ps(p);
#else
  return load(p, half);
#endif
}
inline void store_part(float* p, vhalf v, [[maybe_unused]] std::int64_t half) {
#if !defined(__AVX512F__) && defined(__AVX__)
  _mm256_storeu_ps(p, v);
#else
  store(p, v, half);
#endif
}
inline std::int64_t part_offset(int part, std::int64_t half) { return part * half; }

// Doubles a register holds (8 in a zmm, 4 in a ymm), and that vector: the
// kernels' steps in double (the Winograd filter transform, the weight
// gradient's last transform). A 64-byte vector on AVX2 would live in memory
// (see vfloat above): the weight gradient's sums of 8 output channels took
// 1.6% of the training step's samples there, in 128-bit inserts and stack
// stores (perf, Zen 3 VM).
inline constexpr int kDoubles = kRegisters == 1 ? 8 : 4;
using vdouble = double __attribute__((vector_size(kDoubles * sizeof(double))));
// p[0 .. kDoubles - 1] in double.
inline vdouble widen(const float* p) {
  using vfloats = float __attribute__((vector_size(kDoubles * sizeof(float))));
  vfloats f;
  std::memcpy(&f, p, sizeof f);
  return __builtin_convertvector(f, vdouble);
}

// v[l] = base[index[l] + delta] for the lanes l whose bit is set in mask, 0
// for the others (which are not read: their index may point anywhere).
inline vfloat masked_gather(const float* base, const std::int32_t* index, std::int32_t delta, std::uint16_t mask) {
#if defined(__AVX512F__)
  const __m512i at = _mm512_add_epi32(_mm512_loadu_si512(index), _mm512_set1_epi32(delta));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, at, base, 4);
#else
  float lanes[kLanes] = {};
  for (int l = 0; l < kLanes; ++l)
    if ((mask >> l) & 1) lanes[l] = base[index[l] + delta];
  return load(lanes);
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
