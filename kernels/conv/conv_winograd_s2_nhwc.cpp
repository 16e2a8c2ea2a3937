// cpu_winograd_s2_nhwc: see conv_winograd_s2_nhwc.h for the kernel.
#include "kernels/conv/conv_winograd_s2_nhwc.h"

#include <algorithm>
#include <utility>

#include "kernels/common/error.h"
#include "kernels/common/thread_scratch.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/winograd_gemm.h"

namespace dlb {
namespace {

using namespace simd;
using winograd::tiles_gemm;

constexpr int kXi = 25;  // elements of a transformed 5x5 tile
// Phases (row parity p, column parity q) as 2 p + q: (0, 0), (0, 1), (1, 0), (1, 1).
constexpr int kPhases = 4;
// Tiles per block: the GEMM's accumulators in registers (winograd_gemm.h).
constexpr int kTiles = kRegisters == 1 ? 8 : 6;
// Two groups of tiles a block, xi by xi (block_gemm): each U[xi] read from
// L2 serves both from L1. U is 166 KB at 16 to 32 channels and 664 KB at
// 32 to 64, and a block's GEMM reads all of it once. Resnet20's two
// stride-2 shapes at batch 64 (NHWC, 2-core Zen 4 VM, alternated with
// oneDNN's brgconv in one process, fastest of 5 calls a pair, the first
// phase of the VM's): one group 613 and 520 us (medians of 11 pairs), two
// 631 and 485, four no better and noisier.
constexpr int kGroups = 2;
constexpr int kBlock = kGroups * kTiles;  // tiles per block
// V[xi] and M[xi] a line more than their rows apart (as WinogradNhwc's
// rows past 16 channels: conv_winograd_nhwc.cpp).
constexpr std::int64_t kRowPad = 16;

// Whether phase `phase` has a product at element (a, b): a one-tap axis
// (odd parity) has none at that axis's point at infinity (index 4).
constexpr bool active(int phase, int a, int b) { return (phase / 2 == 0 || a < 4) && (phase % 2 == 0 || b < 4); }
// The phases with a product at xi, and phase's place among them (its
// channels' slot in the GEMM's K = phases_at(xi) c).
constexpr int phases_at(int xi) {
  int count = 0;
  for (int phase = 0; phase < kPhases; ++phase) count += active(phase, xi / 5, xi % 5);
  return count;
}
constexpr int slot(int phase, int xi) {
  int count = 0;
  for (int before = 0; before < phase; ++before) count += active(before, xi / 5, xi % 5);
  return count;
}
// U's floats before element xi's, in units of k c.
constexpr int u_before(int xi) {
  int count = 0;
  for (int before = 0; before < xi; ++before) count += phases_at(before);
  return count;
}
static_assert(u_before(kXi) == 81, "25 + 20 + 20 + 16 products per tile and channel pair");

// o = B^T d for N = 5 values (an axis of even phase, two taps), or the
// first 4 rows for N = 4 (odd phase: one tap, whose product at infinity
// is left out; those rows do not read d[4]):
//   B^T = [2 -1 -2 1 0; 0 -2 -1 1 0; 0 2 -3 1 0; 0 -1 0 1 0; 0 2 -1 -2 1]
template <int N, class V>
inline void input_transform5(const V (&d)[N], V (&o)[N]) {
  o[0] = fmadd(splat_as<V>(2.0f), d[0] - d[2], d[3] - d[1]);
  o[1] = fmadd(splat_as<V>(-2.0f), d[1], d[3] - d[2]);
  o[2] = fmadd(splat_as<V>(2.0f), d[1], fmadd(splat_as<V>(-3.0f), d[2], d[3]));
  o[3] = d[3] - d[1];
  if constexpr (N == 5) o[4] = fmadd(splat_as<V>(2.0f), d[1] - d[3], d[4] - d[2]);
}

// o = A^T m for one 5-vector: A^T = [1 1 1 1 0; 0 1 -1 2 0; 0 1 1 4 0; 0 1 -1 8 1]
inline void output_transform5(const vfloat (&m)[5], vfloat (&o)[4]) {
  const vfloat s = m[1] + m[2], d = m[1] - m[2];
  o[0] = m[0] + s + m[3];
  o[1] = fmadd(splat(2.0f), m[3], d);
  o[2] = fmadd(splat(4.0f), m[3], s);
  o[3] = fmadd(splat(8.0f), m[3], d) + m[4];
}

struct Geometry {
  std::int64_t n, h, w, c, k, pad, oh, ow, th, tw;
  std::int64_t v_row, m_row;  // V[xi] to V[xi + 1], M[xi] to M[xi + 1], in floats
  std::int64_t tiles() const { return n * th * tw; }
  std::int64_t m_block() const { return kXi * m_row; }
};

// Phase (P, Q) of the 9x9 input window at (y0, x0) of one image (x its
// first pixel), transformed into V[xi][t][slot c + channel]: rows y0 + P +
// 2i, columns x0 + Q + 2j, zeros outside the image. A part of 16 channels
// at a time (conv_simd.h's vhalf, as winograd::input_tile).
template <int P, int Q>
void phase_tile(const Geometry& g, const float* x, std::int64_t y0, std::int64_t x0, bool inside, int t, float* v) {
  constexpr int R = P == 0 ? 5 : 4, C = Q == 0 ? 5 : 4, phase = 2 * P + Q;
  const std::int64_t c = g.c;
  for (std::int64_t item = 0; item < kHalves * (c / kLanes); ++item) {
    const std::int64_t cb = item / kHalves;
    const int part = static_cast<int>(item % kHalves);
    const float* base = x + cb * kLanes + part_offset(part, 8);
    vhalf rows[R][C];
    for (int i = 0; i < R; ++i) {
      const std::int64_t row = y0 + P + 2 * i;
      vhalf d[C];
      for (int j = 0; j < C; ++j) {
        const std::int64_t col = x0 + Q + 2 * j;
        d[j] = inside || (row >= 0 && row < g.h && col >= 0 && col < g.w) ? load_part(base + (row * g.w + col) * c, 8)
                                                                           : vhalf{};
      }
      input_transform5(d, rows[i]);
    }
    for (int b = 0; b < C; ++b) {
      vhalf column[R], o[R];
      for (int i = 0; i < R; ++i) column[i] = rows[i][b];
      input_transform5(column, o);
      for (int a = 0; a < R; ++a) {
        const int xi = a * 5 + b;
        store_part(v + xi * g.v_row + t * phases_at(xi) * c + slot(phase, xi) * c + cb * kLanes + part_offset(part, 8),
                   o[a], 8);
      }
    }
  }
}

void transform_input(const Geometry& g, const float* x, std::int64_t tile, int t, float* v) {
  const std::int64_t image = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
  const std::int64_t y0 = 8 * ty - g.pad, x0 = 8 * tx - g.pad;
  const bool inside = y0 >= 0 && y0 + 9 <= g.h && x0 >= 0 && x0 + 9 <= g.w;
  const float* img = x + image * g.h * g.w * g.c;
  phase_tile<0, 0>(g, img, y0, x0, inside, t, v);
  phase_tile<0, 1>(g, img, y0, x0, inside, t, v);
  phase_tile<1, 0>(g, img, y0, x0, inside, t, v);
  phase_tile<1, 1>(g, img, y0, x0, inside, t, v);
}

// The block's `present` tiles for output channel blocks kb .. kb + B - 1,
// xi by xi, each over its K = phases_at(xi) c.
template <int B>
void block_gemm(const Geometry& g, const float* v, const float* u, std::int64_t kb, int present, float* m) {
  const std::int64_t c = g.c, mblock = g.m_block();
  for (int xi = 0; xi < kXi; ++xi) {
    const std::int64_t kx = phases_at(xi) * c;
    const float* ux = u + u_before(xi) * g.k * c + kb * kx * kLanes;
    for (int t0 = 0; t0 < present; t0 += kTiles) {
      const float* vx = v + xi * g.v_row + t0 * kx;
      float* mx = m + xi * g.m_row + t0 * kLanes;
      if (present - t0 > 4)
        tiles_gemm<kTiles, B>(vx, ux, kx, mx, mblock);
      else
        tiles_gemm<4, B>(vx, ux, kx, mx, mblock);
    }
  }
}

// The 4x4 outputs of tile `tile` for output channels [16 kb, 16 kb + 16)
// from M, with the epilogue, stored where they lie inside the output.
template <bool kAccumulate, bool kRelu>
void transform_output(const Geometry& g, const float* m, std::int64_t tile, int t, std::int64_t kb, const float* bias,
                      float* y) {
  const std::int64_t image = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
  vfloat rows[5][4];
  for (int a = 0; a < 5; ++a) {
    vfloat row[5];
    for (int b = 0; b < 5; ++b) row[b] = load(m + (a * 5 + b) * g.m_row + t * kLanes);
    output_transform5(row, rows[a]);
  }
  const vfloat b = bias != nullptr ? load(bias + kb * kLanes) : vfloat{};
  float* const out = y + image * g.oh * g.ow * g.k + kb * kLanes;
  const bool inside = 4 * ty + 4 <= g.oh && 4 * tx + 4 <= g.ow;
  for (int j = 0; j < 4; ++j) {
    const std::int64_t ox = 4 * tx + j;
    const vfloat column[5] = {rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j]};
    vfloat o[4];
    output_transform5(column, o);
    float* p = out + (4 * ty * g.ow + ox) * g.k;
    for (int i = 0; i < 4; ++i, p += g.ow * g.k) {
      if (!inside && (4 * ty + i >= g.oh || ox >= g.ow)) continue;
      vfloat r = o[i] + b;
      if constexpr (kAccumulate) r += load(p);
      if constexpr (kRelu) r = simd::relu(r);
      store(p, r);
    }
  }
}

using TransformOutput = void (*)(const Geometry&, const float*, std::int64_t, int, std::int64_t, const float*, float*);
TransformOutput transform_output_for(bool accumulate, bool relu) {
  if (accumulate) return relu ? transform_output<true, true> : transform_output<true, false>;
  return relu ? transform_output<false, true> : transform_output<false, false>;
}

std::int64_t v_row(std::int64_t c) { return kBlock * kPhases * c + kRowPad; }
std::int64_t m_row() { return kBlock * kLanes + kRowPad; }
// A thread's scratch: V of a block, then M of two output channel blocks.
std::int64_t scratch_floats(std::int64_t c) { return kXi * (v_row(c) + 2 * m_row()); }

}  // namespace

bool WinogradStride2Nhwc::accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t s,
                                  std::int64_t stride) {
  return r == 3 && s == 3 && stride == 2 && c > 0 && k > 0 && c % kLanes == 0 && k % kLanes == 0;
}

WinogradStride2Nhwc::WinogradStride2Nhwc(const float* w, std::int64_t k, std::int64_t c,
                                         std::shared_ptr<ThreadScratch> scratch)
    : k_(k), c_(c), u_(static_cast<std::size_t>(u_before(kXi) * k * c)), scratch_(std::move(scratch)) {
  if (!accepts(c, k, 3, 3, 2))
    throw Unsupported("Winograd stride 2 on NHWC needs a 3x3 filter and channels in multiples of 16");
  if (!scratch_) scratch_ = std::make_shared<ThreadScratch>();
  scratch_->reserve(scratch_floats(c));
  // U of phase (p, q) = G g G^T, g the phase's 2x2 filter: along an axis of
  // parity 0 the taps 0 and 2, of parity 1 the tap 1 and a zero. In
  // double, rounded once.
  static constexpr double G[5][2] = {{0.5, 0}, {-0.5, -0.5}, {-1.0 / 6, 1.0 / 6}, {1.0 / 6, 1.0 / 3}, {0, 1}};
  const auto tap = [](int parity, int s) { return parity == 0 ? 2 * s : (s == 0 ? 1 : -1); };
  for (std::int64_t o = 0; o < k; ++o)
    for (std::int64_t i = 0; i < c; ++i) {
      const float* f = w + (o * c + i) * 9;
      for (int phase = 0; phase < kPhases; ++phase) {
        const int p = phase / 2, q = phase % 2;
        double g[2][2];
        for (int s = 0; s < 2; ++s)
          for (int t = 0; t < 2; ++t) {
            const int a = tap(p, s), b = tap(q, t);
            g[s][t] = a < 0 || b < 0 ? 0.0 : f[a * 3 + b];
          }
        for (int xi = 0; xi < kXi; ++xi) {
          const int a = xi / 5, b = xi % 5;
          if (!active(phase, a, b)) continue;
          double value = 0.0;
          for (int s = 0; s < 2; ++s)
            for (int t = 0; t < 2; ++t) value += G[a][s] * g[s][t] * G[b][t];
          const std::int64_t kx = phases_at(xi) * c;
          u_[static_cast<std::size_t>(u_before(xi) * k * c + ((o / kLanes) * kx + slot(phase, xi) * c + i) * kLanes +
                                      o % kLanes)] = static_cast<float>(value);
        }
      }
    }
}

WinogradStride2Nhwc::~WinogradStride2Nhwc() = default;

void WinogradStride2Nhwc::operator()(const float* x, std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t pad,
                                     const float* bias, bool accumulate, bool relu, float* y) const {
  DLB_REQUIRE(n > 0 && pad >= 0 && h + 2 * pad >= 3 && w + 2 * pad >= 3,
              "Winograd stride 2 NHWC: no output for this input and padding");
  Geometry g{n, h, w, c_, k_, pad, (h + 2 * pad - 3) / 2 + 1, (w + 2 * pad - 3) / 2 + 1, 0, 0, v_row(c_), m_row()};
  g.th = (g.oh + 3) / 4;
  g.tw = (g.ow + 3) / 4;
  const TransformOutput epilogue = transform_output_for(accumulate, relu);
  const float* const u = u_.data();
  winograd::for_each_block(
      *scratch_, g.tiles(), kBlock, k_ / kLanes, kXi * g.v_row,
      [&](std::int64_t tile, int t, float* v) { transform_input(g, x, tile, t, v); },
      [&](auto blocks, const float* v, std::int64_t kb, int present, float* m) {
        block_gemm<decltype(blocks)::value>(g, v, u, kb, present, m);
      },
      [&](const float* m, std::int64_t first, int present, std::int64_t kb, std::int64_t count) {
        for (std::int64_t j = 0; j < count; ++j)
          for (int t = 0; t < present; ++t) epilogue(g, m + j * g.m_block(), first + t, t, kb + j, bias, y);
      });
}

}  // namespace dlb
