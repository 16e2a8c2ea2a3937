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
// where the build targets AVX-512, otherwise one float at a time with the C
// library's exp (the portable fallback). V supports + - * as values.

#if defined(__AVX512F__)
struct Avx512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  // Streaming stores need this alignment (one cache line).
  static constexpr std::uintptr_t kStreamAlignment = 64;

  static V set1(float v) { return _mm512_set1_ps(v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  // The first n (< 16) lanes from p, the others `fill`; nothing past p + n is touched.
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
  static float reduce_max(V v) {
    return reduce(v, [](V a, V b) { return max(a, b); });
  }
  static float reduce_add(V v) {
    return reduce(v, [](V a, V b) { return a + b; });
  }

  // exp(x), 16 lanes: n = round(x / ln2), r = x - n ln2 in two steps
  // (Cody-Waite, |r| <= ln2/2), exp(r) by a degree-5 polynomial (minimax for
  // relative error on [-ln2/2, ln2/2], 1.1e-7, fitted with 1 + r fixed so that
  // exp(0) = 1 exactly), then times 2^n by vscalefps, which rounds
  // underflow to subnormals or 0 and overflow to inf. Clamping x to
  // [-104, 88.8] keeps n small enough for the reduction to be exact; past
  // the ends the result is 0 or inf anyway. The clamps take x as second
  // operand, so NaN comes through. Error <= 3 ulp (test_softmax).
  static V exp(V x) {
    x = max(set1(-104.0f), x);
    x = _mm512_mask_min_ps(x, kAll, set1(88.8f), x);
    // Adding 1.5 * 2^23 rounds x / ln2 to an integer in the low mantissa bits.
    const V shifter = set1(0x1.8p23f);
    const V n = _mm512_sub_ps(_mm512_fmadd_ps(x, set1(1.44269504f), shifter), shifter);
    V r = _mm512_fnmadd_ps(n, set1(0x1.62e430p-1f), x);  // ln2 rounded to float
    r = _mm512_fnmadd_ps(n, set1(-0x1.05c610p-29f), r);  // ln2 - that
    V p = set1(0.008312860503792763f);
    p = _mm512_fmadd_ps(p, r, set1(0.041889019310474396f));
    p = _mm512_fmadd_ps(p, r, set1(0.16667111217975616f));
    p = _mm512_fmadd_ps(p, r, set1(0.4999924302101135f));
    p = _mm512_fmadd_ps(p, r, set1(1.0f));
    p = _mm512_fmadd_ps(p, r, set1(1.0f));
    return _mm512_mask_scalef_ps(p, kAll, p, n);
  }

 private:
  // The _mask_ forms with every lane selected: GCC 12 warns (falsely,
  // -Wuninitialized on _mm512_undefined_ps) about the unmasked ones.
  static constexpr __mmask16 kAll = 0xffff;
  static __mmask16 first_lanes(std::int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
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
#else
struct Scalar {
  using V = float;
  static constexpr int kWidth = 1;
  static constexpr std::uintptr_t kStreamAlignment = alignof(float);

  static V set1(float v) { return v; }
  static V load(const float* p) { return *p; }
  // n < kWidth = 1: nothing to load.
  static V load_first(const float*, std::int64_t, float fill) { return fill; }
  static void store(float* p, V v) { *p = v; }
  static void store_first(float*, std::int64_t, V) {}
  static void stream(float* p, V v) { *p = v; }
  static void stream_fence() {}
  // Same NaN rule as vmaxps: the second operand when either is NaN.
  static V max(V a, V b) { return a > b ? a : b; }
  static float reduce_max(V v) { return v; }
  static float reduce_add(V v) { return v; }
  static V exp(V x) { return std::exp(x); }
};
using Simd = Scalar;
#endif

using V = Simd::V;
constexpr int kWidth = Simd::kWidth;

template <class F>
void for_each_vector(const float* x, float* y, std::int64_t n, F&& f) {
  std::int64_t j = 0;
  for (; j + kWidth <= n; j += kWidth) Simd::store(y + j, f(Simd::load(x + j)));
  if (j < n) Simd::store_first(y + j, n - j, f(Simd::load_first(x + j, n - j, 0.0f)));
}

// exp over an array, all cores.
void exp_all_cores(const float* x, float* y, std::int64_t n) {
  const std::int64_t vectors = n / kWidth;
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < vectors; ++v) Simd::store(y + v * kWidth, Simd::exp(Simd::load(x + v * kWidth)));
  const std::int64_t done = vectors * kWidth;
  for_each_vector(x + done, y + done, n - done, [](V v) { return Simd::exp(v); });
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

void softmax_naive(const SoftmaxArgs& args, NaiveTemporaries& t) {
  const std::int64_t rows = args.rows, cols = args.cols;
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = args.x + r * cols;
    float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
    for (std::int64_t j = 0; j < cols; ++j) m = std::max(m, x[j]);
    t.row_max[r] = m;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = args.x + r * cols;
    float* shifted = t.shifted.data() + r * cols;
    const float m = t.row_max[r];
#pragma omp simd
    for (std::int64_t j = 0; j < cols; ++j) shifted[j] = x[j] - m;
  }
  exp_all_cores(t.shifted.data(), t.exps.data(), rows * cols);
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* e = t.exps.data() + r * cols;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (std::int64_t j = 0; j < cols; ++j) s += e[j];
    t.row_sum[r] = s;
  }
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
constexpr int kBlockVectors = 8;  // vectors per rescale of the running sum

// Folds kCount vectors into the per-lane running (m, s): one rescale of s
// to the block's max, then one exp per element. A NaN element makes its
// lane's sum NaN (exp(NaN - m), or m itself NaN), so the row's sum is NaN.
template <int kCount>
void fold_block(const V* v, V& m, V& s) {
  V block_max = v[0];
  for (int k = 1; k < kCount; ++k) block_max = Simd::max(block_max, v[k]);
  const V m_new = Simd::max(m, block_max);
  // Pairwise sum of the block's exps: a short dependency chain into s.
  V e[kCount];
  for (int k = 0; k < kCount; ++k) e[k] = Simd::exp(v[k] - m_new);
  for (int width = kCount / 2; width > 0; width /= 2)
    for (int k = 0; k < width; ++k) e[k] = e[k] + e[k + width];
  s = s * Simd::exp(m - m_new) + e[0];
  m = m_new;
}

// One read of x[0, n): the online max and sum (per lane, then across lanes).
MaxSum online_max_sum(const float* x, std::int64_t n) {
  V m = Simd::set1(kLowest), s = Simd::set1(0.0f);
  V v[kBlockVectors];
  std::int64_t j = 0;
  for (; j + kBlockVectors * kWidth <= n; j += kBlockVectors * kWidth) {
    for (int k = 0; k < kBlockVectors; ++k) v[k] = Simd::load(x + j + k * kWidth);
    fold_block<kBlockVectors>(v, m, s);
  }
  for (; j + kWidth <= n; j += kWidth) {
    v[0] = Simd::load(x + j);
    fold_block<1>(v, m, s);
  }
  if (j < n) {
    // Missing lanes read as -inf: they add exp(-inf) = 0.
    v[0] = Simd::load_first(x + j, n - j, -std::numeric_limits<float>::infinity());
    fold_block<1>(v, m, s);
  }
  const float max = Simd::reduce_max(m);
  return {max, Simd::reduce_add(s * Simd::exp(m - Simd::set1(max)))};
}

// The (max, sum) of a row from those of its segments.
MaxSum combine(const MaxSum* parts, int count) {
  float max = kLowest;
  for (int i = 0; i < count; ++i) max = std::max(max, parts[i].max);
  float sum = 0.0f;
  for (int i = 0; i < count; ++i) sum += parts[i].sum * std::exp(parts[i].max - max);
  return {max, sum};
}

// Writes y[0, n) from x[0, n) and the row's (max, sum): softmax
// exp(x - max) * (1 / sum), log-softmax (x - max) - log(sum). With
// `streaming`, whole aligned vectors go out through non-temporal stores (the
// unaligned head and the tail through ordinary masked stores).
template <SoftmaxKind K>
void write_outputs(const float* x, float* y, std::int64_t n, MaxSum row, bool streaming) {
  const V max = Simd::set1(row.max);
  const V scale = Simd::set1(K == SoftmaxKind::softmax ? 1.0f / row.sum : std::log(row.sum));
  const auto out = [&](V v) {
    if constexpr (K == SoftmaxKind::softmax) {
      return Simd::exp(v - max) * scale;
    } else {
      return (v - max) - scale;
    }
  };
  if (!streaming) {
    for_each_vector(x, y, n, out);
    return;
  }
  const auto misalignment = reinterpret_cast<std::uintptr_t>(y) % Simd::kStreamAlignment;
  const auto head = std::min<std::int64_t>(
      n, static_cast<std::int64_t>((Simd::kStreamAlignment - misalignment) % Simd::kStreamAlignment / sizeof(float)));
  for_each_vector(x, y, head, out);
  std::int64_t j = head;
  for (; j + kWidth <= n; j += kWidth) Simd::stream(y + j, out(Simd::load(x + j)));
  for_each_vector(x + j, y + j, n - j, out);
}

// [begin, end) of the part of a row of `cols` that thread `t` of `threads`
// takes, cut at multiples of 16 floats (64 bytes) so that no two threads
// write one cache line.
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
// once from memory (online max and sum), and read again from the cache by the
// output pass. With fewer rows than threads (one long row), each row is cut
// into one segment per thread instead and the segments' (max, sum) are
// combined between the two passes.
template <SoftmaxKind K>
void softmax_fused(const SoftmaxArgs& args) {
  const std::int64_t rows = args.rows, cols = args.cols;
  const bool streaming = rows * cols * static_cast<std::int64_t>(sizeof(float)) >= kSoftmaxStreamingBytes;
  const int threads = omp_get_max_threads();
  if (rows >= threads) {
#pragma omp parallel
    {
#pragma omp for schedule(static) nowait
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* x = args.x + r * cols;
        write_outputs<K>(x, args.y + r * cols, cols, online_max_sum(x, cols), streaming);
      }
      Simd::stream_fence();
    }
    return;
  }
  std::vector<MaxSum> parts(static_cast<std::size_t>(threads));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* x = args.x + r * cols;
    float* y = args.y + r * cols;
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num(), count = omp_get_num_threads();
      const Segment seg = row_segment(cols, t, count);
      parts[static_cast<std::size_t>(t)] = online_max_sum(x + seg.begin, seg.size);
#pragma omp barrier
      write_outputs<K>(x + seg.begin, y + seg.begin, seg.size, combine(parts.data(), count), streaming);
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

void softmax_exp(const float* x, float* y, std::int64_t n) { exp_all_cores(x, y, n); }

}  // namespace dlb
