// The own Winograd weight gradient: see conv_winograd_wgrad.h.
#include "kernels/conv/conv_winograd_wgrad.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "kernels/common/error.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/conv_threads.h"
#include "kernels/conv/winograd_f43.h"

namespace dlb {
namespace {

using simd::kLanes;
using simd::load;
using simd::store;
using simd::vfloat;

constexpr int kXi = 36;     // elements of a transformed 6x6 tile
constexpr int kTiles = 32;  // tiles per block: the accumulators are loaded and stored once a block
// V[xi] and U[xi] of a block start kTiles * c (k) + kXiPad floats apart,
// not kTiles * c (k): at 16 channels that was 2 KB, so 36 rows written a
// tile at a time fell on a few sets of the 8-way L1 and evicted each
// other. A line more per row: the weight gradient at 64x16x32x32,
// 64x32x16x16 and 64x64x8x8 in 988, 748 and 667 us against 1169, 998 and
// 791 (inputs in the cache; from memory, 1396, 978 and 841 against 1533,
// 1110 and 871; 2-core Zen 3 VM).
constexpr std::int64_t kXiPad = 16;

struct Geometry {
  std::int64_t n, h, w, c, k, pad, oh, ow, th, tw;
  std::int64_t tiles() const { return n * th * tw; }
  std::int64_t v_row() const { return kTiles * c + kXiPad; }  // V[xi] to V[xi + 1]
  std::int64_t u_row() const { return kTiles * k + kXiPad; }
};

struct TileAt {
  std::int64_t image, ty, tx;
};

// The places of tiles first .. first + count - 1 (image, tile row, tile
// column), counted on from the first's.
void locate(const Geometry& g, std::int64_t first, int count, TileAt* at) {
  TileAt p{first / (g.th * g.tw), first / g.tw % g.th, first % g.tw};
  for (int t = 0; t < count; ++t) {
    at[t] = p;
    if (++p.tx == g.tw) {
      p.tx = 0;
      if (++p.ty == g.th) {
        p.ty = 0;
        ++p.image;
      }
    }
  }
}

// V[xi][t][c] = (B^T x B)[xi] of tile t's 6x6 input window, zeros where it
// lies in the padding.
void transform_input(const Geometry& g, const float* x, const Blocked16& at, const TileAt& tile, int t, float* v) {
  winograd::input_tile(x + tile.image * at.image, at, g.h, g.w, g.c, 4 * tile.ty - g.pad, 4 * tile.tx - g.pad,
                       v + t * g.c, g.v_row());
}

// U[xi][t][k] = (G' dy G'^T)[xi] of tile t's 4x4 output gradients, zeros
// past the output's edge; where db is given, the tile's 16 gradients per
// channel summed in float and added to db[k] in double (the bias gradient:
// the tiles cover each output once).
void transform_gradient(const Geometry& g, const float* dy, const Blocked16& at, const TileAt& tile, int t,
                        float* u, double* db) {
  const std::int64_t y0 = 4 * tile.ty, x0 = 4 * tile.tx;
  const float* image = dy + tile.image * at.image;
  const bool inside = y0 + 4 <= g.oh && x0 + 4 <= g.ow;  // most tiles: loads without checks
  for (std::int64_t kb = 0; kb < g.k / kLanes; ++kb) {
    const float* base = image + kb * at.block;
    vfloat rows[4][6], sum{};
    for (int i = 0; i < 4; ++i) {
      const std::int64_t row = y0 + i;
      vfloat d[4];
      if (inside) {
        const float* p = base + (row * g.ow + x0) * at.pixel;
        for (int j = 0; j < 4; ++j) d[j] = load(p + j * at.pixel, at.half);
      } else {
        for (int j = 0; j < 4; ++j) {
          const std::int64_t col = x0 + j;
          d[j] = row < g.oh && col < g.ow ? load(base + (row * g.ow + col) * at.pixel, at.half) : vfloat{};
        }
      }
      if (db != nullptr) sum += (d[0] + d[1]) + (d[2] + d[3]);
      winograd::filter_transform4(d, rows[i]);
    }
    if (db != nullptr) {
      float lanes[kLanes];
      store(lanes, sum);
      for (int lane = 0; lane < kLanes; ++lane) db[kb * kLanes + lane] += lanes[lane];
    }
    for (int b = 0; b < 6; ++b) {
      const vfloat column[4] = {rows[0][b], rows[1][b], rows[2][b], rows[3][b]};
      vfloat o[6];
      winograd::filter_transform4(column, o);
      for (int a = 0; a < 6; ++a) store(u + (a * 6 + b) * g.u_row() + t * g.k + kb * kLanes, o[a]);
    }
  }
}

// M[xi][c][k] (+)= sum_{t < count} V[xi][t][c] U[xi][t][k] (M's values
// not read where fresh) for input
// channels c0 .. c0 + C - 1 and output channels k0 .. k0 + 16 K - 1: their
// accumulators in registers over the block's tiles (a channel of V
// broadcast, K vectors of U loaded once a tile for the C channels).
template <int C, int K>
void tile_gemm(const Geometry& g, const float* vx, const float* ux, float* mx, std::int64_t c0, std::int64_t k0,
               int count, bool fresh) {
  const std::int64_t c = g.c, k = g.k;
  vfloat acc[C][K];
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < K; ++j) acc[i][j] = fresh ? vfloat{} : load(mx + (c0 + i) * k + k0 + j * kLanes);
  for (int t = 0; t < count; ++t) {
    vfloat grad[K];
    for (int j = 0; j < K; ++j) {
      grad[j] = load(ux + t * k + k0 + j * kLanes);
      simd::in_registers(grad[j]);
    }
    const float* vt = vx + t * c + c0;
#pragma GCC unroll 16
    for (int i = 0; i < C; ++i) {
      const vfloat input = simd::splat(vt[i]);
      for (int j = 0; j < K; ++j) acc[i][j] = simd::fmadd(input, grad[j], acc[i][j]);
    }
  }
  for (int i = 0; i < C; ++i)
    for (int j = 0; j < K; ++j) store(mx + (c0 + i) * k + k0 + j * kLanes, acc[i][j]);
}

// M[xi] += V[xi]^T U[xi] over the block's tiles, per xi in register blocks.
// With AVX-512 (32 registers) 8 input channels by 2 vectors of output
// channels (16 accumulators) where K is a multiple of 32, else 16 by 1.
// With AVX2 (16 ymm, two a vector) 6 by 1: 12 accumulators, the gradient's
// 2 and the broadcast's 1; the channels past the last 6 (16 = 6 + 6 + 4)
// 4 or 2 by 1. (The AVX-512 blocks there kept 32 ymm of accumulators on
// the stack: perf on the Zen 3 VM found 265 of the 356 multiply-adds
// reading a spilled accumulator.)
void block_gemm(const Geometry& g, const float* v, const float* u, int count, bool fresh, float* m) {
  const std::int64_t c = g.c, k = g.k;
  for (int xi = 0; xi < kXi; ++xi) {
    const float* vx = v + xi * g.v_row();
    const float* ux = u + xi * g.u_row();
    float* mx = m + xi * c * k;
    if constexpr (simd::kRegisters == 1) {
      if (k % (2 * kLanes) == 0) {
        for (std::int64_t c0 = 0; c0 < c; c0 += 8)
          for (std::int64_t k0 = 0; k0 < k; k0 += 2 * kLanes) tile_gemm<8, 2>(g, vx, ux, mx, c0, k0, count, fresh);
      } else {
        for (std::int64_t c0 = 0; c0 < c; c0 += 16)
          for (std::int64_t k0 = 0; k0 < k; k0 += kLanes) tile_gemm<16, 1>(g, vx, ux, mx, c0, k0, count, fresh);
      }
    } else {
      for (std::int64_t k0 = 0; k0 < k; k0 += kLanes) {
        std::int64_t c0 = 0;
        for (; c0 + 6 <= c; c0 += 6) tile_gemm<6, 1>(g, vx, ux, mx, c0, k0, count, fresh);
        if (c - c0 == 4) tile_gemm<4, 1>(g, vx, ux, mx, c0, k0, count, fresh);
        if (c - c0 == 2) tile_gemm<2, 1>(g, vx, ux, mx, c0, k0, count, fresh);
      }
    }
  }
}

}  // namespace

bool WinogradWeightGrad::accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t s,
                                 std::int64_t stride) {
  return r == 3 && s == 3 && stride == 1 && c > 0 && k > 0 && c % kLanes == 0 && k % kLanes == 0;
}

WinogradWeightGrad::WinogradWeightGrad(std::int64_t k, std::int64_t c, std::shared_ptr<ThreadScratch> scratch)
    : k_(k), c_(c), scratch_(std::move(scratch)) {
  if (!accepts(c, k, 3, 3, 1))
    throw Unsupported("Winograd weight gradient F(3x3, 4x4): input and output channels in multiples of 16");
  if (!scratch_) scratch_ = std::make_shared<ThreadScratch>();
  // Per thread: its M, then V and U of one block; and its bias sums.
  scratch_->reserve(kXi * c * k + kXi * (kTiles * (c + k) + 2 * kXiPad));
  bias_parts_.resize(static_cast<std::size_t>(scratch_->threads() * k));
}

WinogradWeightGrad::~WinogradWeightGrad() = default;

std::int64_t WinogradWeightGrad::workspace_bytes() const {
  return static_cast<std::int64_t>(scratch_->threads()) * (kXi * c_ * k_ + kXi * (kTiles * (c_ + k_) + 2 * kXiPad)) *
         static_cast<std::int64_t>(sizeof(float));
}

void WinogradWeightGrad::operator()(const float* x, const Blocked16& x_at, const float* dy, const Blocked16& dy_at,
                                    std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t pad,
                                    float* dw, float* db) const {
  Geometry g{n, h, w, c_, k_, pad, h + 2 * pad - 2, w + 2 * pad - 2, 0, 0};
  DLB_REQUIRE(n > 0 && g.oh > 0 && g.ow > 0 && pad >= 0 && pad <= 2,
              "Winograd weight gradient: no output for this input and padding (0 to 2)");
  g.th = (g.oh + 3) / 4;
  g.tw = (g.ow + 3) / 4;
  const std::int64_t blocks = (g.tiles() + kTiles - 1) / kTiles, m_floats = kXi * c_ * k_;
  int team = 1;
  ThreadScratch& scratch = *scratch_;
#pragma omp parallel num_threads(scratch.threads())
  {
    const int thread = omp_get_thread_num(), threads = omp_get_num_threads();
    if (thread == 0) team = threads;
    float* m = scratch.of(thread);
    float* v = m + m_floats;
    float* u = v + kXi * g.v_row();
    double* bias = db != nullptr ? bias_parts_.data() + thread * k_ : nullptr;
    if (bias != nullptr) std::fill(bias, bias + k_, 0.0);
    const auto [first_block, last_block] = thread_range(blocks, thread, threads);
    // A thread's first block starts its sums at zero in registers instead
    // of reading an M zeroed first: at 64 channels M is 590 KB a thread,
    // and perf put its memset at 7% of a harness's samples (the 64x64x8x8
    // weight gradient 800-830 us against 860-930, alternated in one
    // process on the 2-core Zen 4 VM; at 16 and 32 channels no change).
    // A thread without blocks adds zeros.
    if (first_block == last_block) std::fill(m, m + m_floats, 0.0f);
    for (std::int64_t block = first_block; block < last_block; ++block) {
      const std::int64_t first = block * kTiles;
      const int count = static_cast<int>(std::min<std::int64_t>(kTiles, g.tiles() - first));
      TileAt at[kTiles];
      locate(g, first, count, at);
      for (int t = 0; t < count; ++t) {
        transform_input(g, x, x_at, at[t], t, v);
        transform_gradient(g, dy, dy_at, at[t], t, u, bias);
      }
      block_gemm(g, v, u, count, block == first_block, m);
    }
  }
  if (db != nullptr)
    for (std::int64_t o = 0; o < k_; ++o) {
      double sum = 0.0;
      for (int thread = 0; thread < team; ++thread) sum += bias_parts_[static_cast<std::size_t>(thread * k_ + o)];
      db[o] = static_cast<float>(sum);
    }
  // dW[k][c] = A'^T (the threads' M added) A', in double (A'^T = A^T S^-1,
  // winograd_f43.h), a register of output channels at a time (simd::vdouble:
  // 4 with AVX2, 8 with AVX-512): rows, then columns.
  double at[3][6];
  for (int p = 0; p < 3; ++p)
    for (int a = 0; a < 6; ++a) at[p][a] = winograd::kF34OutputTransform[p][a] / winograd::kF34RowScale[a];
  using simd::kDoubles;
  using simd::vdouble;
  // Per input channel and 64 output channels, the threads' M rows are
  // summed first (contiguous runs the prefetcher follows: a step of 4
  // output channels reading 36 rows 16 KB apart waited on its loads, 14% of
  // the call at 64 x 64 channels), then transformed a register at a time.
  constexpr std::int64_t kChunk = 64;
  const std::int64_t c = c_, k = k_, chunks = (k + kChunk - 1) / kChunk;
#pragma omp parallel for num_threads(scratch.threads()) schedule(static)
  for (std::int64_t item = 0; item < c * chunks; ++item) {
    const std::int64_t ci = item / chunks, kc = item % chunks * kChunk, kn = std::min(kChunk, k - kc);
    alignas(64) double sums[kXi][kChunk];
    for (int xi = 0; xi < kXi; ++xi) {
      double* row = sums[xi];
      std::fill(row, row + kn, 0.0);
      for (int thread = 0; thread < team; ++thread) {
        const float* part = scratch.of(thread) + (xi * c + ci) * k + kc;
        for (std::int64_t o = 0; o < kn; ++o) row[o] += part[o];
      }
    }
    for (std::int64_t k0 = kc; k0 < kc + kn; k0 += kDoubles) {
      vdouble sum[kXi];
      for (int xi = 0; xi < kXi; ++xi) std::memcpy(&sum[xi], &sums[xi][k0 - kc], sizeof sum[xi]);
      vdouble rows[3][6];
      for (int p = 0; p < 3; ++p)
        for (int b = 0; b < 6; ++b) {
          vdouble r = {};
          for (int a = 0; a < 6; ++a) r += at[p][a] * sum[a * 6 + b];
          rows[p][b] = r;
        }
      for (int p = 0; p < 3; ++p)
        for (int q = 0; q < 3; ++q) {
          vdouble r = {};
          for (int b = 0; b < 6; ++b) r += rows[p][b] * at[q][b];
          for (int lane = 0; lane < kDoubles; ++lane)
            dw[(((k0 + lane) * c + ci) * 3 + p) * 3 + q] = static_cast<float>(r[lane]);
        }
    }
  }
}

}  // namespace dlb
