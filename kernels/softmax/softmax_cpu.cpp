// softmax on the CPU: cpu_naive (five materializing passes) and cpu_fused
// (online max and sum, then the output), both on all cores and sharing one
// vectorized exp. x, y: [rows, cols] row-major, host memory.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/softmax/softmax.h"

namespace dlb {
namespace {

// ---------------------------------------------------------------- vectors
// The passes below are written once over a vector type: 16 AVX-512 lanes
// where the build targets AVX-512, 8 AVX2 lanes where it targets AVX2 and
// FMA, otherwise one float at a time with the C library's exp (the portable
// fallback). V supports + - * as values.

// exp(x) for x below this is flushed to 0 (exp(-87.33) = 1.18e-38, just
// above FLT_MIN; n = -126 in the AVX-512 exp).
constexpr float kExpMin = -87.33f;

// The vector exps' argument reduction and polynomial (see Avx512::exp):
// n = round(x log2(e)) by adding and subtracting 1.5 * 2^23, r = x - n ln2
// with ln2 = kLn2High + kLn2Low, exp(r) ~ kExpPoly in Horner order.
constexpr float kLog2e = 1.44269504f;
constexpr float kRoundShifter = 0x1.8p23f;
constexpr float kLn2High = 0x1.62e430p-1f;   // ln2 rounded to float
constexpr float kLn2Low = -0x1.05c610p-29f;  // ln2 - that
constexpr float kExpPoly[] = {0.008312860503792763f, 0.041889019310474396f, 0.16667111217975616f,
                              0.4999924302101135f, 1.0f, 1.0f};

#if defined(__AVX512F__)
struct Avx512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  // Streaming stores need this alignment (one cache line).
  static constexpr std::uintptr_t kStreamAlignment = 64;

  static V set1(float v) { return _mm512_set1_ps(v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // The first n (<= 16) lanes from p, the others `fill`; nothing past p + n is touched.
  static V load_first(const float* p, std::int64_t n, float fill) {
    return _mm512_mask_loadu_ps(set1(fill), first_lanes(n), p);
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_first(float* p, std::int64_t n, V v) { _mm512_mask_storeu_ps(p, first_lanes(n), v); }
  // Non-temporal: the line goes to memory without being read first.
  static void stream(float* p, V v) { _mm512_stream_ps(p, v); }
  static void stream_fence() { _mm_sfence(); }
  // vmaxps returns its second operand when either is NaN.
  static V max(V a, V b) { return _mm512_mask_max_ps(a, kAll, a, b); }

  // exp(x), 16 lanes, for x <= 88.7 (softmax's arguments, x - max, are
  // <= 0): n = round(x / ln2), r = x - n ln2 in two steps (Cody-Waite,
  // |r| <= ln2/2), exp(r) by a degree-5 polynomial (minimax for relative
  // error on [-ln2/2, ln2/2], 1.1e-7, fitted with 1 + r fixed so that
  // exp(0) = 1 exactly), then times 2^n by vscalefps. Error <= 3 ulp
  // (test_softmax). Results below FLT_MIN (x < -87.33, -inf included) are 0,
  // as with flush-to-zero, by the zero-masking of vscalefps: an underflowing
  // vscalefps costs a microcode assist of ~200 cycles, and softmax meets such
  // x wherever an entry is masked or far below its row's max; masked-off
  // lanes cost nothing (measured: 3.1 ns per vector at x = -1, -100 or -inf,
  // against 79 ns with the underflow). NaN is not below anything: it stays.
  static V exp(V x) {
    const __mmask16 normal = _mm512_cmp_ps_mask(x, set1(kExpMin), _CMP_NLT_UQ);
    // Adding 1.5 * 2^23 rounds x / ln2 to an integer in the low mantissa bits.
    const V shifter = set1(kRoundShifter);
    const V n = _mm512_sub_ps(_mm512_fmadd_ps(x, set1(kLog2e), shifter), shifter);
    V r = _mm512_fnmadd_ps(n, set1(kLn2High), x);
    r = _mm512_fnmadd_ps(n, set1(kLn2Low), r);
    V p = set1(kExpPoly[0]);
    for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, set1(kExpPoly[i]));
    return _mm512_maskz_scalef_ps(normal, p, n);
  }
  // exp(x) for x <= 0 (see Avx2::exp_nonpositive): vscalefps takes any n,
  // so this is exp itself.
  static V exp_nonpositive(V x) { return exp(x); }

 private:
  // The _mask_ forms with every lane selected: GCC 12 warns (falsely,
  // -Wuninitialized on _mm512_undefined_ps) about the unmasked ones.
  static constexpr __mmask16 kAll = 0xffff;
  static __mmask16 first_lanes(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

 public:
  // Lane 0 of op folded over all lanes: halves, quarters, pairs, neighbours.
  template <class Op>
  static float reduce(V v, Op op) {
    v = op(v, _mm512_mask_shuffle_f32x4(v, kAll, v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = op(v, _mm512_mask_shuffle_f32x4(v, kAll, v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = op(v, _mm512_mask_permute_ps(v, kAll, v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = op(v, _mm512_mask_permute_ps(v, kAll, v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_cvtss_f32(v);
  }
};
using Simd = Avx512;
#elif defined(__AVX2__) && defined(__FMA__)
struct Avx2 {
  using V = __m256;
  static constexpr int kWidth = 8;
  static constexpr std::uintptr_t kStreamAlignment = 32;

  static V set1(float v) { return _mm256_set1_ps(v); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  // The first n (<= 8) lanes from p, the others `fill`; vmaskmovps touches
  // nothing past p + n (masked-off lanes do not fault).
  static V load_first(const float* p, std::int64_t n, float fill) {
    const __m256i m = first_lanes(n);
    return _mm256_blendv_ps(set1(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  // The first n lanes to p, nothing past p + n: a partial vector through the
  // stack, since vmaskmovps to memory is slow on AMD (Zen 3, rows of 10:
  // softmax 3.0-4.7 GB/s with it, 6.3-6.6 without, three alternations).
  static void store_first(float* p, std::int64_t n, V v) {
    if (n >= kWidth) {
      _mm256_storeu_ps(p, v);
      return;
    }
    alignas(32) float lanes[kWidth];
    _mm256_store_ps(lanes, v);
    for (std::int64_t i = 0; i < n; ++i) p[i] = lanes[i];
  }
  static void stream(float* p, V v) { _mm256_stream_ps(p, v); }
  static void stream_fence() { _mm_sfence(); }
  // vmaxps returns its second operand when either is NaN.
  static V max(V a, V b) { return _mm256_max_ps(a, b); }

  // exp(x), 8 lanes: the AVX-512 exp's reduction and polynomial, with 2^n
  // built in the exponent field instead of vscalefps (AVX2 has none), as
  // 2^(n >> 1) * 2^(n - (n >> 1)) so that both factors are normal floats
  // for every n of the domain (-126 at x = -87.33, 128 at x = 88.72, where
  // 2^128 alone is not a float). x above 89 is taken as 89 (exp = inf, and
  // n stays far from int overflow); below kExpMin (-inf included) 0; NaN
  // stays NaN (every step propagates it; the flush keeps unordered lanes).
  static V exp(V x) {
    const V normal = _mm256_cmp_ps(x, set1(kExpMin), _CMP_NLT_UQ);
    x = _mm256_min_ps(set1(89.0f), x);  // vminps: x itself when x is NaN
    const V shifter = set1(kRoundShifter);
    const V n = _mm256_sub_ps(_mm256_fmadd_ps(x, set1(kLog2e), shifter), shifter);
    const __m256i ni = _mm256_cvtps_epi32(n);
    const __m256i half = _mm256_srai_epi32(ni, 1);
    const auto power = [](__m256i e) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
    };
    const V p = _mm256_mul_ps(_mm256_mul_ps(exp_reduced(x, n), power(half)), power(_mm256_sub_epi32(ni, half)));
    return _mm256_and_ps(p, normal);
  }

  // exp(x) for x <= 0 (and NaN), which is all softmax's fused passes ask
  // (x - max, and running maxima against later ones): there n is in
  // [-126, 0] for every x not flushed, 2^n is one normal float, and it
  // comes from the rounding itself: with the shifter 1.5 * 2^23 + 127 the
  // sum's low mantissa bits hold n + 127, which shifted left by 23 is 2^n's
  // exponent field. 13 instructions against exp's 20 (no clamp, no
  // conversion, one factor): on a Zen 3, one core, an exp loop over 1024
  // floats in L1 0.67 -> 0.47 ns per float; cpu_fused 1.12x on the
  // softmax family's cases (geometric mean, two cores).
  // Flush and NaN as in exp; x > 88 is outside its domain.
  static V exp_nonpositive(V x) {
    const V normal = _mm256_cmp_ps(x, set1(kExpMin), _CMP_NLT_UQ);
    const V shifter = set1(kRoundShifter + 127.0f);
    const V t = _mm256_fmadd_ps(x, set1(kLog2e), shifter);
    const V power = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
    return _mm256_and_ps(_mm256_mul_ps(exp_reduced(x, _mm256_sub_ps(t, shifter)), power), normal);
  }

 private:
  // exp(x - n ln2) for the integer n nearest x log2(e): Cody-Waite in two
  // steps, then the polynomial.
  static V exp_reduced(V x, V n) {
    V r = _mm256_fnmadd_ps(n, set1(kLn2High), x);
    r = _mm256_fnmadd_ps(n, set1(kLn2Low), r);
    V p = set1(kExpPoly[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, set1(kExpPoly[i]));
    return p;
  }
  static __m256i first_lanes(std::int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }

 public:
  // Lane 0 of op folded over all lanes: halves, pairs, neighbours.
  template <class Op>
  static float reduce(V v, Op op) {
    v = op(v, _mm256_permute2f128_ps(v, v, 1));
    v = op(v, _mm256_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = op(v, _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm256_cvtss_f32(v);
  }
};
using Simd = Avx2;
#else
struct Scalar {
  using V = float;
  static constexpr int kWidth = 1;
  static constexpr std::uintptr_t kStreamAlignment = alignof(float);

  static V set1(float v) { return v; }
  static V load(const float* p) { return *p; }
  static V load_first(const float* p, std::int64_t n, float fill) { return n > 0 ? *p : fill; }
  static void store(float* p, V v) { *p = v; }
  static void store_first(float* p, std::int64_t n, V v) {
    if (n > 0) *p = v;
  }
  static void stream(float* p, V v) { *p = v; }
  static void stream_fence() {}
  // Same NaN rule as vmaxps: the second operand when either is NaN.
  static V max(V a, V b) { return a > b ? a : b; }
  // Its one lane.
  template <class Op>
  static float reduce(V v, Op) {
    return v;
  }
  // Flushed below kExpMin like the AVX-512 exp (NaN < kExpMin is false).
  static V exp(V x) { return x < kExpMin ? 0.0f : std::exp(x); }
  static V exp_nonpositive(V x) { return exp(x); }
};
using Simd = Scalar;
#endif

using V = Simd::V;
constexpr int kWidth = Simd::kWidth;

// A vector's largest lane and the sum of its lanes, by Simd::reduce (NaN as
// Simd::max takes it).
float reduce_max(V v) {
  return Simd::reduce(v, [](V a, V b) { return Simd::max(a, b); });
}
float reduce_add(V v) {
  return Simd::reduce(v, [](V a, V b) { return a + b; });
}

// exp over an array, all cores: Simd::exp, or Simd::exp_nonpositive.
template <bool kNonpositive>
void exp_all_cores(const float* x, float* y, std::int64_t n) {
  const auto exp = [](V v) { return kNonpositive ? Simd::exp_nonpositive(v) : Simd::exp(v); };
  const std::int64_t vectors = n / kWidth;
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < vectors; ++v) Simd::store(y + v * kWidth, exp(Simd::load(x + v * kWidth)));
  const std::int64_t done = vectors * kWidth;
  if (done < n) Simd::store_first(y + done, n - done, exp(Simd::load_first(x + done, n - done, 0.0f)));
}

// ---------------------------------------------------------------- cpu_naive

// The five passes' results: row max and row sum [rows], x - max and its exp
// [rows, cols].
struct NaiveTemporaries {
  explicit NaiveTemporaries(std::int64_t rows, std::int64_t cols)
      : row_max(static_cast<std::size_t>(rows)),
        shifted(static_cast<std::size_t>(rows * cols)),
        exps(static_cast<std::size_t>(rows * cols)),
        row_sum(static_cast<std::size_t>(rows)) {}
  HostBuffer<float> row_max, shifted, exps, row_sum;
};

// Five passes over memory, each its own parallel loop, as an eager framework
// runs five ops: over rows (static blocks), the exp over the flat array.
// A NaN or an all -inf row gives NaN through x - max or exp (softmax.h).
void softmax_naive(const SoftmaxArgs& args, NaiveTemporaries& t) {
  const std::int64_t rows = args.rows, cols = args.cols;
  // 1. row_max = max_j x
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = args.x + r * cols;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, x[j]);
    t.row_max[r] = m;
  }
  // 2. shifted = x - row_max
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = args.x + r * cols;
    float* shifted = t.shifted.data() + r * cols;
    const float m = t.row_max[r];
#pragma omp simd
    for (std::int64_t j = 0; j < cols; ++j) shifted[j] = x[j] - m;
  }
  // 3. exps = exp(shifted)
  exp_all_cores<false>(t.shifted.data(), t.exps.data(), rows * cols);
  // 4. row_sum = sum_j exps, accumulated in double: a running fp32 sum per vector lane
  // loses up to 2^-24 of its value at every step, which over the cols / 16
  // steps of a long row (a peaked row: 1 plus thousands of tiny terms) goes
  // past the 1e-5 the table asks for. Library sums use cascades for the
  // same reason; the extra work hides under this pass's memory traffic.
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* e = t.exps.data() + r * cols;
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < cols; ++j) s += e[j];
    t.row_sum[r] = static_cast<float>(s);
  }
  // 5. y = exps / row_sum
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* e = t.exps.data() + r * cols;
    float* y = args.y + r * cols;
    const float s = t.row_sum[r];
#pragma omp simd
    for (std::int64_t j = 0; j < cols; ++j) y[j] = e[j] / s;
  }
}

// ---------------------------------------------------------------- cpu_fused

// Running max of a row (or a segment of one) and the sum of exp(x - max).
struct MaxSum {
  float max;
  float sum;
};

// The running max starts at the lowest finite float, not -inf: a lane that
// has seen only -inf entries (or nothing) keeps max -FLT_MAX and sum 0, and
// rescaling it gives 0 * exp(0) = 0, where -inf would give exp(-inf + inf) =
// NaN. A row of only -inf still ends with sum 0, and 0/0 in the output.
constexpr float kLowest = std::numeric_limits<float>::lowest();
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
// Vectors per block: the first pass takes a block's max, then its exps,
// so that the running sum is rescaled (one exp) once per block, and the
// second pass needs one factor (one exp) per block. 32 vectors are 2 KiB:
// the block's second read is from L1.
constexpr std::int64_t kBlockVectors = 32;

// A row segment cut into vectors. With streaming stores, the cut follows
// y's alignment: `head` elements (< kWidth) up to y's first
// streaming-aligned address, `body` whole vectors, `tail` elements
// (< kWidth) after them; without, the head is empty. Both passes group the
// vectors in the same blocks: the head alone, the body in blocks of
// kBlockVectors vectors (the last one shorter), the tail alone.
struct Frame {
  bool streaming;
  std::int64_t head, body, tail;

  Frame(const float* y, std::int64_t n, bool streaming_stores) : streaming(streaming_stores), head(0) {
    if (streaming) {
      const auto misalignment = reinterpret_cast<std::uintptr_t>(y) % Simd::kStreamAlignment;
      const auto to_boundary = (Simd::kStreamAlignment - misalignment) % Simd::kStreamAlignment / sizeof(float);
      head = std::min(n, static_cast<std::int64_t>(to_boundary));
    }
    body = (n - head) / kWidth;
    tail = n - head - body * kWidth;
  }
  std::int64_t vectors() const { return (head > 0) + body + (tail > 0); }
  std::int64_t blocks() const { return (head > 0) + (body + kBlockVectors - 1) / kBlockVectors + (tail > 0); }
};

// exp(x - running max) of every vector of a segment and the running max
// (per lane) each block was taken against, kept by the first pass of
// softmax for the second. Per thread, reused across calls.
struct Scratch {
  float* exps;       // [frame.vectors() * kWidth]
  float* block_max;  // [frame.blocks() * kWidth]
};
Scratch thread_scratch(const Frame& frame) {
  thread_local HostBuffer<float> buffer;
  const auto floats = static_cast<std::size_t>((frame.vectors() + frame.blocks()) * kWidth);
  if (buffer.size() < floats) buffer = HostBuffer<float>(floats);
  return {buffer.data(), buffer.data() + frame.vectors() * kWidth};
}

// The per-lane running (m, s) of a segment, and where the first pass keeps
// its exps when it keeps them. s is a compensated (Kahan) sum, s - c: a long
// row adds many block sums per lane (a thousand for half of a 10^6 row),
// and in a peaked row each is tiny next to s, so plain addition would lose
// up to half an ulp of s at every step, the same way every time.
template <bool kKeep>
struct Fold {
  V m = Simd::set1(kLowest);
  V s = Simd::set1(0.0f);
  V c = Simd::set1(0.0f);
  float* exps = nullptr;  // kKeep: the next vector's slot
  float* block_max = nullptr;
  // Where the next row lies, in floats from the element being read (0: no
  // next row to fetch). Each vector's exp issues a prefetch of the same
  // place in the next row into L2, so that the reads from memory go on
  // while the exps are computed and the next row's first pass finds its
  // data in L2. Measured against prefetching the next row during the
  // output pass instead (paired runs, 256 MiB, cols 1024 and 4096): 1-5%
  // faster; splitting the prefetches between both passes was 2-3% slower.
  std::ptrdiff_t ahead = 0;
  bool started = false;  // s and c are 0 until the first block: nothing to rescale

  // Folds `count` whole vectors at x, one block: their max first, then one
  // exp per element against the new running max (the block's second read
  // is from L1). The max takes the data as second operand, so a NaN
  // reaches m_new and every exp of the block, or at least its own exp:
  // either way the lane's sum is NaN, and so the segment's.
  void add_block(const float* x, std::int64_t count) {
    V block[4] = {m, m, m, m};
    std::int64_t k = 0;
    for (; k + 4 <= count; k += 4)
      for (int j = 0; j < 4; ++j) block[j] = Simd::max(block[j], Simd::load(x + (k + j) * kWidth));
    for (; k < count; ++k) block[0] = Simd::max(block[0], Simd::load(x + k * kWidth));
    const V m_new = Simd::max(Simd::max(block[0], block[1]), Simd::max(block[2], block[3]));
    V sum[4] = {Simd::set1(0.0f), Simd::set1(0.0f), Simd::set1(0.0f), Simd::set1(0.0f)};
    for (k = 0; k + 4 <= count; k += 4) {
      for (int j = 0; j < 4; ++j) {
        prefetch_next_row(x + (k + j) * kWidth);
        const V e = Simd::exp_nonpositive(Simd::load(x + (k + j) * kWidth) - m_new);
        if constexpr (kKeep) Simd::store(exps + (k + j) * kWidth, e);
        sum[j] = sum[j] + e;
      }
    }
    for (; k < count; ++k) {
      prefetch_next_row(x + k * kWidth);
      const V e = Simd::exp_nonpositive(Simd::load(x + k * kWidth) - m_new);
      if constexpr (kKeep) Simd::store(exps + k * kWidth, e);
      sum[0] = sum[0] + e;
    }
    finish_block((sum[0] + sum[1]) + (sum[2] + sum[3]), m_new, count);
  }

  // One vector, the head or tail, whose missing lanes read as -inf (they
  // add exp(-inf) = 0).
  void add_vector(V v) {
    const V m_new = Simd::max(m, v);
    const V e = Simd::exp_nonpositive(v - m_new);
    if constexpr (kKeep) Simd::store(exps, e);
    finish_block(e, m_new, 1);
  }

  MaxSum total() const {
    const float max = reduce_max(m);
    return {max, reduce_add((s - c) * Simd::exp_nonpositive(m - Simd::set1(max)))};
  }

 private:
  // One line of the next row into L2 (one vector is one cache line).
  void prefetch_next_row(const float* at) const {
    if (ahead != 0) __builtin_prefetch(at + ahead, 0, 2);
  }
  // s := s * exp(m - m_new) + block_sum, compensated; m := m_new.
  void finish_block(V block_sum, V m_new, std::int64_t count) {
    if constexpr (kKeep) {
      Simd::store(block_max, m_new);
      exps += count * kWidth;
      block_max += kWidth;
    }
    if (started) {
      const V scale = Simd::exp_nonpositive(m - m_new);
      s = s * scale;
      c = c * scale;
    }
    started = true;
    const V y = block_sum - c;
    const V t = s + y;
    c = (t - s) - y;
    s = t;
    m = m_new;
  }
};

// First pass: one read of x[0, n) from memory for the online max and sum;
// with `scratch`, the exps are kept for the second pass. With streaming
// stores (a matrix past the caches) the pass also prefetches `next_x` (the
// next row this thread takes, n elements, or nullptr) into L2.
template <bool kKeep>
MaxSum fold_segment(const float* x, const Frame& frame, const float* next_x, const Scratch* scratch) {
  Fold<kKeep> fold;
  if constexpr (kKeep) {
    fold.exps = scratch->exps;
    fold.block_max = scratch->block_max;
  }
  // The vectorized build only: there a vector is one 64-byte cache line.
  constexpr bool kVectorIsLine = kWidth * sizeof(float) == 64;
  if (kVectorIsLine && frame.streaming && next_x != nullptr) fold.ahead = next_x - x;
  if (frame.head > 0) {
    fold.add_vector(Simd::load_first(x, frame.head, kMinusInf));
    x += frame.head;
  }
  for (std::int64_t k = 0; k < frame.body; k += kBlockVectors) {
    const std::int64_t count = std::min(kBlockVectors, frame.body - k);
    fold.add_block(x, count);
    x += count * kWidth;
  }
  if (frame.tail > 0) fold.add_vector(Simd::load_first(x, frame.tail, kMinusInf));
  return fold.total();
}

// The (max, sum) of a row from those of its segments.
MaxSum combine(const MaxSum* parts, int count) {
  float max = kLowest;
  for (int i = 0; i < count; ++i) max = std::max(max, parts[i].max);
  float sum = 0.0f;
  for (int i = 0; i < count; ++i) sum += parts[i].sum * std::exp(parts[i].max - max);
  return {max, sum};
}

// Second pass: y[0, n) in the frame's vectors, `out(at, vector, block)`
// giving the vector whose first element is y[at]; only the head's and
// tail's own lanes are stored. The whole vectors of the body go out through
// streaming stores when the frame is for them (aligned by its
// construction), the head and tail through ordinary masked stores.
template <class Out>
void write_segment(float* y, const Frame& frame, Out&& out) {
  std::int64_t at = 0, vector = 0, block = 0;
  if (frame.head > 0) {
    Simd::store_first(y, frame.head, out(at, vector++, block++));
    at = frame.head;
  }
  for (std::int64_t k = 0; k < frame.body; ++k, at += kWidth) {
    const V v = out(at, vector++, block);
    if (frame.streaming) {
      Simd::stream(y + at, v);
    } else {
      Simd::store(y + at, v);
    }
    if ((k + 1) % kBlockVectors == 0 || k + 1 == frame.body) ++block;
  }
  if (frame.tail > 0) Simd::store_first(y + at, frame.tail, out(at, vector, block));
}

// Both passes over one row segment x[0, n) -> y[0, n), given the row's
// (max, sum) by `row_stats(segment's own (max, sum))` (identity for a whole
// row; the combination across threads for a segment).
//   softmax:      exp(x - max) / sum, from the kept exps: e * (exp(m_block - max) / sum)
//   log-softmax:  (x - max) - log(sum), from x read again (no exp to keep)
template <SoftmaxKind K, class RowStats>
void softmax_segment(const float* x, float* y, std::int64_t n, bool streaming, const float* next_x,
                     RowStats&& row_stats) {
  const Frame frame(y, n, streaming);
  if constexpr (K == SoftmaxKind::softmax) {
    const Scratch scratch = thread_scratch(frame);
    const MaxSum row = row_stats(fold_segment<true>(x, frame, next_x, &scratch));
    const V max = Simd::set1(row.max), inv_sum = Simd::set1(1.0f / row.sum);
    V factor = inv_sum;
    std::int64_t factor_block = -1;
    write_segment(y, frame, [&](std::int64_t, std::int64_t vector, std::int64_t block) {
      if (block != factor_block) {
        factor = Simd::exp_nonpositive(Simd::load(scratch.block_max + block * kWidth) - max) * inv_sum;
        factor_block = block;
      }
      return Simd::load(scratch.exps + vector * kWidth) * factor;
    });
  } else {
    const MaxSum row = row_stats(fold_segment<false>(x, frame, next_x, nullptr));
    const V max = Simd::set1(row.max), log_sum = Simd::set1(std::log(row.sum));
    write_segment(y, frame, [&](std::int64_t at, std::int64_t, std::int64_t) {
      const V v = at + kWidth <= n ? Simd::load(x + at) : Simd::load_first(x + at, n - at, 0.0f);
      return (v - max) - log_sum;
    });
  }
}

// Rows of up to 16 floats (one AVX-512 vector, two AVX2 ones) are done in
// registers by softmax_short_row: the segment machinery of longer rows
// (head, blocks, compensated sums, scratch) costs more than such a row
// (measured on a Zen 3, AVX2, rows of 10: 1.9 GB/s through it, against
// 4.7 for the five passes of cpu_naive).
constexpr std::int64_t kShortRow = 16;
constexpr int kShortRowVectors = static_cast<int>((kShortRow + kWidth - 1) / kWidth);

// A row of at most kShortRow elements, in registers: max, exp and sum, out.
// The lanes past n read as -inf and add exp(-inf - max) = 0 (with a finite
// max; an all -inf row gives NaN, as everywhere; a NaN reaches the sum).
template <SoftmaxKind K>
void softmax_short_row(const float* x, float* y, std::int64_t n) {
  V v[kShortRowVectors], e[kShortRowVectors];
  const int count = static_cast<int>((n + kWidth - 1) / kWidth);
  const auto lanes = [&](int i) { return std::min<std::int64_t>(kWidth, n - i * kWidth); };
  V m = Simd::set1(kMinusInf);
  for (int i = 0; i < count; ++i) {
    v[i] = Simd::load_first(x + i * kWidth, lanes(i), kMinusInf);
    m = Simd::max(m, v[i]);
  }
  const V max = Simd::set1(reduce_max(m));
  V sum = Simd::set1(0.0f);
  for (int i = 0; i < count; ++i) {
    e[i] = Simd::exp_nonpositive(v[i] - max);
    sum = sum + e[i];
  }
  const float total = reduce_add(sum);
  for (int i = 0; i < count; ++i) {
    if constexpr (K == SoftmaxKind::softmax) {
      Simd::store_first(y + i * kWidth, lanes(i), e[i] * Simd::set1(1.0f / total));
    } else {
      Simd::store_first(y + i * kWidth, lanes(i), (v[i] - max) - Simd::set1(std::log(total)));
    }
  }
}

// [begin, begin + size) of the part of a row of `cols` that thread `t` of
// `threads` takes, cut at multiples of 16 floats (64 bytes) so that no two
// threads write one cache line.
struct Segment {
  std::int64_t begin, size;
};
Segment row_segment(std::int64_t cols, int t, int threads) {
  constexpr std::int64_t kLine = 16;
  const std::int64_t per = (cols + threads - 1) / threads;
  const std::int64_t step = (per + kLine - 1) / kLine * kLine;
  const std::int64_t begin = std::min(cols, t * step);
  return {begin, std::min(cols, begin + step) - begin};
}

}  // namespace

// Rows are shared out in contiguous blocks, one per thread; a row is read
// once from memory (online max and sum), and the output pass reads the kept
// exps (softmax) or x again (log-softmax) from the cache. With fewer rows
// than threads (one long row), each row is cut into one segment per thread
// instead and the segments' (max, sum) are combined between the two passes.
template <SoftmaxKind K>
void softmax_fused(const SoftmaxArgs& args) {
  const std::int64_t rows = args.rows, cols = args.cols;
  // Rows of a few vectors would go out mostly through the head and tail anyway.
  const bool streaming =
      rows * cols * static_cast<std::int64_t>(sizeof(float)) >= kSoftmaxStreamingBytes && cols >= 4 * kWidth;
  const int threads = omp_get_max_threads();
  if (cols <= kShortRow) {
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) softmax_short_row<K>(args.x + r * cols, args.y + r * cols, cols);
    return;
  }
  if (rows >= threads) {
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
      for (std::int64_t r = 0; r < rows; ++r)
        softmax_segment<K>(args.x + r * cols, args.y + r * cols, cols, streaming,
                           r + 1 < rows ? args.x + (r + 1) * cols : nullptr, [](MaxSum own) { return own; });
      Simd::stream_fence();
    }
    return;
  }
  // Per calling thread and kept: a pass of a network calls this every time
  // (a batch-1 log-softmax is one row), and allocates nothing in it.
  // The workers reach it through this pointer: naming a thread_local on
  // a worker would name the worker's own.
  thread_local std::vector<MaxSum> kept;
  if (kept.size() < static_cast<std::size_t>(threads)) kept.resize(static_cast<std::size_t>(threads));
  MaxSum* const parts = kept.data();
  for (std::int64_t r = 0; r < rows; ++r) {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), count = omp_get_num_threads();
      const Segment seg = row_segment(cols, t, count);
      softmax_segment<K>(args.x + r * cols + seg.begin, args.y + r * cols + seg.begin, seg.size, streaming, nullptr,
                         [&](MaxSum own) {
                           parts[t] = own;
#pragma omp barrier
                           return combine(parts, count);
                         });
      Simd::stream_fence();
    }
  }
}

template void softmax_fused<SoftmaxKind::softmax>(const SoftmaxArgs&);
template void softmax_fused<SoftmaxKind::log_softmax>(const SoftmaxArgs&);

Run prepare_softmax_naive(const SoftmaxArgs& args, const Exec&) {
  auto temporaries = std::make_shared<NaiveTemporaries>(args.rows, args.cols);
  return [args, temporaries] { softmax_naive(args, *temporaries); };
}

void softmax_exp(const float* x, float* y, std::int64_t n) { exp_all_cores<false>(x, y, n); }
void softmax_exp_nonpositive(const float* x, float* y, std::int64_t n) { exp_all_cores<true>(x, y, n); }

}  // namespace dlb
