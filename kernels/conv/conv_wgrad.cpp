// ConvWeightGrad: see conv_wgrad.h.
//
// Register tile: V vectors of 16 output channels (V = 4, 2 or 1 by k: 64,
// 32, 16 and fewer) times `rows` whole rows of the r x r window, V * rows *
// r accumulators (at most 24 where r allows, as the direct kernel's
// rank-1 update keeps), plus V vectors of dz: per output position V loads
// and rows * r broadcasts feed V * rows * r FMAs. The window rows a tile
// takes are pointers into the padded plane set once per output row, and the
// taps along a window row are compile-time offsets from them, so every
// broadcast is one load from a base register. The window r is a template
// parameter for r <= kMaxWindow; larger windows take a generic loop (each
// tap's offset read from a table), correct but slower.
#include "kernels/conv/conv_wgrad.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "kernels/common/error.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/conv_threads.h"

namespace dlb {
namespace {

// The kernels below use most of conv_simd.h: its whole namespace, not a list.
using namespace simd;

constexpr int kAccumulators = 24;
constexpr int kMaxWindow = 7;

// One image, one input channel, one block of V * 16 output channels, window
// rows [a0, a0 + rows): acc[(a - a0) * r + b][v] += dz[y, x, v] * x[y + a, x + b]
// over every output position, into `partial` ([tap][kpad] from tap a0 * r).
struct TileArgs {
  const float* plane;   // the padded input plane of this image and channel
  std::int64_t pitch;   // its row length, w + 2 pad
  const float* dz;      // this image's dz^T [oh, ow, kpad], at the block's first channel
  std::int64_t kpad;
  std::int64_t oh, ow;
  std::int64_t a0;      // first window row
  float* partial;       // partial dW [tap][kpad] at (tap a0 * r, the block's first channel)
};

template <int V, int R, int ROWS>
void tile(const TileArgs& t) {
  constexpr int T = ROWS * R;
  vfloat acc[T][V];
  for (int i = 0; i < T; ++i)
    for (int v = 0; v < V; ++v) acc[i][v] = load(t.partial + i * t.kpad + v * kLanes);
  for (std::int64_t y = 0; y < t.oh; ++y) {
    const float* row[ROWS];
    for (int a = 0; a < ROWS; ++a) row[a] = t.plane + (y + t.a0 + a) * t.pitch;
    const float* d = t.dz + y * t.ow * t.kpad;
    for (std::int64_t x = 0; x < t.ow; ++x) {
      vfloat g[V];
      for (int v = 0; v < V; ++v) g[v] = load(d + x * t.kpad + v * kLanes);
#pragma GCC unroll 8
      for (int a = 0; a < ROWS; ++a) {
#pragma GCC unroll 8
        for (int b = 0; b < R; ++b) {
          const vfloat xv = splat(row[a][x + b]);
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) acc[a * R + b][v] = fmadd(xv, g[v], acc[a * R + b][v]);
        }
      }
    }
  }
  for (int i = 0; i < T; ++i)
    for (int v = 0; v < V; ++v) store(t.partial + i * t.kpad + v * kLanes, acc[i][v]);
}

// The same for any window, one tap at a time (one vector accumulator set per
// tap, the position loop inside): windows above kMaxWindow.
template <int V>
void tile_generic(const TileArgs& t, std::int64_t r, std::int64_t rows) {
  for (std::int64_t a = 0; a < rows; ++a)
    for (std::int64_t b = 0; b < r; ++b) {
      float* out = t.partial + (a * r + b) * t.kpad;
      vfloat acc[V];
      for (int v = 0; v < V; ++v) acc[v] = load(out + v * kLanes);
      for (std::int64_t y = 0; y < t.oh; ++y) {
        const float* row = t.plane + (y + t.a0 + a) * t.pitch + b;
        const float* d = t.dz + y * t.ow * t.kpad;
        for (std::int64_t x = 0; x < t.ow; ++x) {
          const vfloat xv = splat(row[x]);
          for (int v = 0; v < V; ++v) acc[v] = fmadd(xv, load(d + x * t.kpad + v * kLanes), acc[v]);
        }
      }
      for (int v = 0; v < V; ++v) store(out + v * kLanes, acc[v]);
    }
}

#if defined(__AVX512F__)
// Rows r[i] of 16 floats in, r[j] = column j out. (GCC 12 reports
// -Wmaybe-uninitialized inside its own unpack and shuffle intrinsics, on
// the undefined vector they start from: a false report, GCC bug 105593.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 2; ++i)
    for (int m = 0; m < 4; ++m) {
      t[8 * i + m] = _mm512_shuffle_f32x4(r[8 * i + m], r[8 * i + 4 + m], 0x88);
      t[8 * i + 4 + m] = _mm512_shuffle_f32x4(r[8 * i + m], r[8 * i + 4 + m], 0xdd);
    }
  for (int m = 0; m < 8; ++m) {
    r[m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0xdd);
  }
}
#pragma GCC diagnostic pop
#endif

// One image's dz [k, plane] into dz^T [plane, kpad] (the lanes past k are
// left as they are: zero). Element by element, the reads a plane apart
// were a sixth of the kernel's time on mnist_cnn's conv2; with AVX-512, in
// blocks of 16 x 16 transposed in registers (masked at the edges).
void transpose_image(const float* dz, std::int64_t k, std::int64_t plane, float* dzt, std::int64_t kpad) {
#if defined(__AVX512F__)
  for (std::int64_t k0 = 0; k0 < k; k0 += kLanes) {
    const std::int64_t rows = std::min<std::int64_t>(kLanes, k - k0);
    for (std::int64_t q0 = 0; q0 < plane; q0 += kLanes) {
      const std::int64_t cols = std::min<std::int64_t>(kLanes, plane - q0);
      const auto mask = static_cast<__mmask16>((1u << cols) - 1);
      __m512 r[16];
      for (int i = 0; i < kLanes; ++i)
        r[i] = i < rows ? _mm512_maskz_loadu_ps(mask, dz + (k0 + i) * plane + q0) : _mm512_setzero_ps();
      transpose16(r);
      for (std::int64_t j = 0; j < cols; ++j) _mm512_storeu_ps(dzt + (q0 + j) * kpad + k0, r[j]);
    }
  }
#else
  for (std::int64_t q = 0; q < plane; ++q)
    for (std::int64_t c = 0; c < k; ++c) dzt[q * kpad + c] = dz[c * plane + q];
#endif
}

using TileFn = void (*)(const TileArgs&);

// Window rows per tile: as many as keep V * rows * r <= kAccumulators, at
// least one.
constexpr int max_rows(int v, int r) { return std::max(1, std::min(r, kAccumulators / (v * r))); }

template <int V, int R, std::size_t... I>
constexpr std::array<TileFn, sizeof...(I)> row_table(std::index_sequence<I...>) {
  return {&tile<V, R, static_cast<int>(I) + 1>...};
}

// tile<V, R, rows> for a run-time window and row count.
template <int V, int R = 1>
TileFn pick(std::int64_t r, std::int64_t rows) {
  if constexpr (R > kMaxWindow) {
    return nullptr;
  } else {
    if (r != R) return pick<V, R + 1>(r, rows);
    static constexpr auto table = row_table<V, R>(std::make_index_sequence<max_rows(V, R)>{});
    return table[static_cast<std::size_t>(rows - 1)];
  }
}

}  // namespace

// What a call needs besides the shape: the tiling and the per-thread buffers.
struct ConvWeightGrad::Plan {
  int vectors = 1;                 // V
  std::int64_t kpad = 0;           // k rounded up to whole blocks of V * 16
  std::int64_t rows_per_tile = 1;  // window rows per tile (the last tile may take fewer)
  std::int64_t pitch = 0, padded_h = 0;
  int threads = 1;
  // Per thread: one image's x zero-padded [c, h + 2p, w + 2p] (the border is
  // zero from construction and never written), its dz^T [oh, ow, kpad] (the
  // lanes past k zero likewise), and the partial dW [c, r * r, kpad].
  std::vector<HostBuffer<float>> xpad, dzt, partial;
};

ConvWeightGrad::ConvWeightGrad(const ConvShape& shape) : p_(shape), plan_(std::make_unique<Plan>()) {
  validate_conv_shape(p_);
  DLB_REQUIRE(p_.stride == 1 && p_.r == p_.s,
              "conv weight gradient: needs a square window at stride 1, got " + p_.descriptor());
  Plan& plan = *plan_;
  plan.vectors = p_.k > 2 * kLanes ? 4 : p_.k > kLanes ? 2 : 1;
  const std::int64_t block = plan.vectors * kLanes;
  plan.kpad = (p_.k + block - 1) / block * block;
  const int most = max_rows(plan.vectors, static_cast<int>(std::min<std::int64_t>(p_.r, kMaxWindow)));
  // Tiles of about equal rows: 5 rows at most 2 a tile are 2, 2, 1.
  const std::int64_t tiles = (p_.r + most - 1) / most;
  plan.rows_per_tile = (p_.r + tiles - 1) / tiles;
  plan.pitch = p_.w + 2 * p_.pad;
  plan.padded_h = p_.h + 2 * p_.pad;
  plan.threads = omp_get_max_threads();
  const auto zeroed = [](std::int64_t floats) {
    HostBuffer<float> b(static_cast<std::size_t>(floats));
    std::fill(b.span().begin(), b.span().end(), 0.0f);
    return b;
  };
  for (int t = 0; t < plan.threads; ++t) {
    plan.xpad.push_back(zeroed(p_.c * plan.padded_h * plan.pitch));
    plan.dzt.push_back(zeroed(p_.oh() * p_.ow() * plan.kpad));
    plan.partial.push_back(zeroed(p_.c * p_.r * p_.r * plan.kpad));
  }
}

ConvWeightGrad::~ConvWeightGrad() = default;

std::int64_t ConvWeightGrad::workspace_bytes() const {
  std::int64_t floats = 0;
  for (const auto* buffers : {&plan_->xpad, &plan_->dzt, &plan_->partial})
    for (const auto& b : *buffers) floats += static_cast<std::int64_t>(b.size());
  return floats * static_cast<std::int64_t>(sizeof(float));
}

void ConvWeightGrad::operator()(const float* x, const float* dz, float* dw) const {
  Plan& plan = *plan_;
  const std::int64_t oh = p_.oh(), ow = p_.ow(), plane_in = p_.h * p_.w, plane_out = oh * ow;
  const std::int64_t taps = p_.r * p_.r, block = plan.vectors * kLanes;
  TileFn fns[kMaxWindow] = {};  // by rows - 1
  for (std::int64_t rows = 1; rows <= plan.rows_per_tile && p_.r <= kMaxWindow; ++rows)
    fns[rows - 1] = plan.vectors == 4 ? pick<4>(p_.r, rows) : plan.vectors == 2 ? pick<2>(p_.r, rows) : pick<1>(p_.r, rows);
  // Zeroed here, not by their threads: a thread the runtime does not start
  // leaves its partial as zeros, not the last call's sums.
  for (auto& b : plan.partial) std::fill(b.span().begin(), b.span().end(), 0.0f);
#pragma omp parallel num_threads(plan.threads)
  {
    const int me = omp_get_thread_num();
    float* xpad = plan.xpad[static_cast<std::size_t>(me)].data();
    float* dzt = plan.dzt[static_cast<std::size_t>(me)].data();
    float* partial = plan.partial[static_cast<std::size_t>(me)].data();
    const auto [first, last] = thread_range(p_.n, me, omp_get_num_threads());
    for (std::int64_t n = first; n < last; ++n) {
      const float* xn = x + n * p_.c * plane_in;
      for (std::int64_t c = 0; c < p_.c; ++c)
        for (std::int64_t y = 0; y < p_.h; ++y)
          std::copy(xn + (c * p_.h + y) * p_.w, xn + (c * p_.h + y + 1) * p_.w,
                    xpad + (c * plan.padded_h + y + p_.pad) * plan.pitch + p_.pad);
      transpose_image(dz + n * p_.k * plane_out, p_.k, plane_out, dzt, plan.kpad);
      for (std::int64_t c = 0; c < p_.c; ++c)
        for (std::int64_t kb = 0; kb < plan.kpad; kb += block)
          for (std::int64_t a0 = 0; a0 < p_.r; a0 += plan.rows_per_tile) {
            const std::int64_t rows = std::min(plan.rows_per_tile, p_.r - a0);
            const TileArgs t{xpad + c * plan.padded_h * plan.pitch, plan.pitch, dzt + kb, plan.kpad, oh, ow, a0,
                             partial + (c * taps + a0 * p_.r) * plan.kpad + kb};
            if (fns[rows - 1] != nullptr) {
              fns[rows - 1](t);
            } else if (plan.vectors == 4) {
              tile_generic<4>(t, p_.r, rows);
            } else if (plan.vectors == 2) {
              tile_generic<2>(t, p_.r, rows);
            } else {
              tile_generic<1>(t, p_.r, rows);
            }
          }
    }
  }
  // dw [k, c, tap] = the partials in thread order.
  for (std::int64_t k = 0; k < p_.k; ++k)
    for (std::int64_t c = 0; c < p_.c; ++c)
      for (std::int64_t tap = 0; tap < taps; ++tap) {
        const std::int64_t at = (c * taps + tap) * plan.kpad + k;
        float sum = plan.partial[0][static_cast<std::size_t>(at)];
        for (int t = 1; t < plan.threads; ++t) sum += plan.partial[static_cast<std::size_t>(t)][static_cast<std::size_t>(at)];
        dw[(k * p_.c + c) * taps + tap] = sum;
      }
}

}  // namespace dlb
