// cpu_winograd: Winograd F(2x2, 3x3) (Lavin and Gray), 3x3 filters at stride 1, any pad.
//
// Each 2x2 output tile comes from a 4x4 input tile d (neighbours overlap by 2):
//     Y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A
// 16 multiplications per tile and channel pair instead of 36. The
// elementwise products summed over c are, for each of the 16 positions xi
// of the 4x4 transformed tile, a GEMM
//     M[xi][k][tile] = sum_c U[xi][c][k] * V[xi][c][tile]
// with U = G g G^T (done once in prepare, outside the timed call, as
// frameworks do for inference) and V = B^T d B.
//
// The tiles of the whole batch are numbered (image, tile row, tile column)
// and cut into blocks of 96, whatever the image size (an 8x8 image has only
// 16 tiles), and each block is done start to end in cache:
//   1. input transform of all channels into V [16][c][96], 16 tiles at a
//      time in registers, their 4x4 inputs fetched straight from NCHW x:
//      by masked gathers (the masks are the zero padding), or on images 16
//      or more tiles wide by row loads split into even and odd columns;
//   2. per 8 output channels, the 16 GEMMs in registers (8 channels x 48
//      tiles, 24 accumulators) into M [16][8][96];
//   3. output transform in registers, written into NCHW y.
// Threads split the blocks (and the output channels too at batch 1).
#include <algorithm>
#include <memory>

#include "kernels/common/error.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/conv_threads.h"

namespace dlb {
namespace {

using simd::kLanes;
using simd::vfloat;
constexpr int kXi = 16;                // elements of a transformed 4x4 tile
constexpr int kChannelBlock = 8;       // output channels in registers
constexpr int kVectors = 3;            // tile vectors in registers
constexpr std::int64_t kTiles = 96;    // tiles per block: two register blocks of 48
constexpr std::int64_t kBlockVectors = kTiles / kLanes;

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

// Where the tiles of a block read x: per 16 tiles, the offset of each tile's
// top-left input element (image, row 2 ty - pad, column 2 tx - pad) and, per
// element (i, j) of the 4x4 tile, the mask of tiles for which it lies inside
// the image (outside is zero padding) and the tile exists.
struct BlockGather {
  std::int32_t offset[kBlockVectors][kLanes];
  std::uint16_t mask[kBlockVectors][kXi];
};

// The other way to fetch input tiles (AVX-512 builds, images with at least 16
// tiles per row): the tiles of one tile row are consecutive slots, so each
// of the 4 input rows of 16 tiles is 4 contiguous loads, split into even and
// odd columns by permutes. A run is tiles [slot, slot + count) of the block
// in one tile row, at most 16.
struct TileRun {
  std::int64_t slot, image, ty, tx, count;
};
struct BlockRuns {
  std::int64_t count;
  TileRun run[kTiles];
};

struct WinogradPlan {
  ConvShape p;
  std::int64_t oh = 0, ow = 0;
  std::int64_t th = 0, tw = 0;      // tiles per image: th rows of tw
  std::int64_t tiles = 0;           // in the batch
  std::int64_t blocks = 0;
  std::int64_t kp = 0;              // k rounded up to 8
  std::int64_t channel_parts = 1;   // ranges of 8-channel groups per block (batch 1)
  bool by_rows = false;             // input tiles by rows (BlockRuns), not by gathers (BlockGather)
  HostBuffer<float> u;              // [16][c][kp]
  std::unique_ptr<ThreadScratch> scratch;

  // Per-thread scratch: V, M, the output tiles of one channel, the gather or run table.
  std::int64_t v_floats() const { return kXi * p.c * kTiles; }
  std::int64_t m_floats() const { return kXi * kChannelBlock * kTiles; }
  std::int64_t y_floats() const { return 4 * kTiles + kLanes; }  // 16 lanes read past the last tile
  std::int64_t table_floats() const {
    return static_cast<std::int64_t>((std::max(sizeof(BlockGather), sizeof(BlockRuns)) + sizeof(float) - 1) /
                                     sizeof(float));
  }
  std::int64_t tiles_in(std::int64_t block) const { return std::min(kTiles, tiles - block * kTiles); }
};

// U[xi][c][k] = (G g G^T)[xi], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1].
void transform_weights(WinogradPlan& plan, const float* w) {
  const ConvShape& p = plan.p;
  plan.u = HostBuffer<float>(static_cast<std::size_t>(kXi * p.c * plan.kp));
  std::fill(plan.u.span().begin(), plan.u.span().end(), 0.0f);
  for (std::int64_t k = 0; k < p.k; ++k) {
    for (std::int64_t c = 0; c < p.c; ++c) {
      const float* g = w + (k * p.c + c) * 9;
      float gg[4][3];  // G g
      for (int j = 0; j < 3; ++j) {
        gg[0][j] = g[j];
        gg[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        gg[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        gg[3][j] = g[6 + j];
      }
      for (int i = 0; i < 4; ++i) {
        const float row[4] = {gg[i][0], 0.5f * (gg[i][0] + gg[i][1] + gg[i][2]),
                              0.5f * (gg[i][0] - gg[i][1] + gg[i][2]), gg[i][2]};
        for (int j = 0; j < 4; ++j) plan.u[static_cast<std::size_t>(((i * 4 + j) * p.c + c) * plan.kp + k)] = row[j];
      }
    }
  }
}

void plan_gather(const WinogradPlan& plan, std::int64_t block, BlockGather& g) {
  const ConvShape& p = plan.p;
  const std::int64_t first = block * kTiles, count = plan.tiles_in(block);
  for (std::int64_t v = 0; v < kBlockVectors; ++v) {
    for (int xi = 0; xi < kXi; ++xi) g.mask[v][xi] = 0;
    for (int l = 0; l < kLanes; ++l) {
      const std::int64_t slot = v * kLanes + l;
      g.offset[v][l] = 0;
      if (slot >= count) continue;
      const std::int64_t tile = first + slot;
      const std::int64_t n = tile / (plan.th * plan.tw), ty = tile / plan.tw % plan.th, tx = tile % plan.tw;
      const std::int64_t row = 2 * ty - p.pad, col = 2 * tx - p.pad;
      // x has fewer than 2^31 elements (validate_conv_shape): the offset fits.
      g.offset[v][l] = static_cast<std::int32_t>(n * p.c * p.h * p.w + row * p.w + col);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
          if (row + i >= 0 && row + i < p.h && col + j >= 0 && col + j < p.w)
            g.mask[v][i * 4 + j] |= static_cast<std::uint16_t>(1u << l);
    }
  }
}

// V[xi][c][slot] = (B^T d B)[xi], B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
// 16 tiles per step. noipa: GCC 12 at -O3 was seen to drop calls to this
// function altogether after small rewrites of it (its interprocedural value
// propagation: -fno-ipa-cp or -fno-ipa-vrp kept the call, so did any debug
// print; sanitizers found nothing). Keeping IPA out of it costs nothing: it
// is called once per block of 96 tiles.
__attribute__((noipa)) void transform_input(const WinogradPlan& plan, const float* x, const BlockGather& g, std::int64_t vectors,
                     float* v) {
  const ConvShape& p = plan.p;
  const std::int64_t xi_stride = p.c * kTiles;
  for (std::int64_t c = 0; c < p.c; ++c) {
    for (std::int64_t vec = 0; vec < vectors; ++vec) {
      vfloat h[4][4];  // d B, row by row
      for (int i = 0; i < 4; ++i) {
        vfloat d[4];
        for (int j = 0; j < 4; ++j) {
          // Element (i, j) of each tile: channel c, i rows and j columns from its top-left.
          const auto delta = static_cast<std::int32_t>(c * p.h * p.w + i * p.w + j);
          d[j] = simd::masked_gather(x, g.offset[vec], delta, g.mask[vec][i * 4 + j]);
        }
        h[i][0] = d[0] - d[2];
        h[i][1] = d[1] + d[2];
        h[i][2] = d[2] - d[1];
        h[i][3] = d[1] - d[3];
      }
      float* out = v + c * kTiles + vec * kLanes;
      for (int j = 0; j < 4; ++j) {
        simd::store(out + (0 * 4 + j) * xi_stride, h[0][j] - h[2][j]);
        simd::store(out + (1 * 4 + j) * xi_stride, h[1][j] + h[2][j]);
        simd::store(out + (2 * 4 + j) * xi_stride, h[2][j] - h[1][j]);
        simd::store(out + (3 * 4 + j) * xi_stride, h[1][j] - h[3][j]);
      }
    }
  }
}

#if defined(__AVX512F__)
void plan_runs(const WinogradPlan& plan, std::int64_t block, BlockRuns& runs) {
  const std::int64_t first = block * kTiles, count = plan.tiles_in(block);
  runs.count = 0;
  for (std::int64_t slot = 0; slot < count;) {
    const std::int64_t tile = first + slot;
    const std::int64_t tx = tile % plan.tw;
    const std::int64_t length = std::min({plan.tw - tx, count - slot, std::int64_t{kLanes}});
    runs.run[runs.count++] = {slot, tile / (plan.th * plan.tw), tile / plan.tw % plan.th, tx, length};
    slot += length;
  }
}

// row[q .. q + 16) with the columns outside [0, w) as 0; memory outside the
// row is never touched (masked load; left of the row, where row + q would
// point before it, the in-row part is expand-loaded into its lanes).
__m512 load_row(const float* row, std::int64_t q, std::int64_t w) {
  const std::int64_t lo = std::max<std::int64_t>(0, -q), hi = std::min<std::int64_t>(kLanes, w - q);
  if (hi <= lo) return _mm512_setzero_ps();
  const auto mask = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
  return lo == 0 ? _mm512_maskz_loadu_ps(mask, row + q) : _mm512_maskz_expandloadu_ps(mask, row + q + lo);
}

// As transform_input, by tile runs: tiles tx.. of tile row ty read input
// columns 2 tx - pad + (0..3), so per input row the loads at columns
// 2 tx - pad and 2 tx - pad + 2, split into even and odd columns, are
// d[0..3] of up to 16 tiles.
void transform_input_rows(const WinogradPlan& plan, const float* x, const BlockRuns& runs, float* v) {
  const ConvShape& p = plan.p;
  const std::int64_t xi_stride = p.c * kTiles;
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (std::int64_t c = 0; c < p.c; ++c) {
    for (std::int64_t r = 0; r < runs.count; ++r) {
      const TileRun& run = runs.run[r];
      const float* image = x + (run.image * p.c + c) * p.h * p.w;
      const std::int64_t q = 2 * run.tx - p.pad;
      vfloat h[4][4];  // d B, row by row
      for (int i = 0; i < 4; ++i) {
        const std::int64_t row = 2 * run.ty + i - p.pad;
        if (row < 0 || row >= p.h) {
          for (auto& e : h[i]) e = vfloat{};
          continue;
        }
        const float* in = image + row * p.w;
        const __m512 a = load_row(in, q, p.w), a_next = load_row(in, q + kLanes, p.w);
        const __m512 b = load_row(in, q + 2, p.w), b_next = load_row(in, q + 2 + kLanes, p.w);
        const vfloat d0 = _mm512_permutex2var_ps(a, even, a_next), d1 = _mm512_permutex2var_ps(a, odd, a_next);
        const vfloat d2 = _mm512_permutex2var_ps(b, even, b_next), d3 = _mm512_permutex2var_ps(b, odd, b_next);
        h[i][0] = d0 - d2;
        h[i][1] = d1 + d2;
        h[i][2] = d2 - d1;
        h[i][3] = d1 - d3;
      }
      float* out = v + c * kTiles + run.slot;
      const int count = static_cast<int>(run.count);
      for (int j = 0; j < 4; ++j) {
        simd::store_lanes(out + (0 * 4 + j) * xi_stride, h[0][j] - h[2][j], 0, count);
        simd::store_lanes(out + (1 * 4 + j) * xi_stride, h[1][j] + h[2][j], 0, count);
        simd::store_lanes(out + (2 * 4 + j) * xi_stride, h[2][j] - h[1][j], 0, count);
        simd::store_lanes(out + (3 * 4 + j) * xi_stride, h[1][j] - h[3][j], 0, count);
      }
    }
  }
}
#endif

// m[kk][slot] = sum_c u[c][kk] * v[c][slot] for 8 channels and TV vectors of tiles.
template <int TV>
void tile_gemm(const float* v, const float* u, std::int64_t channels, std::int64_t u_stride, float* m) {
  vfloat acc[kChannelBlock][TV];
  for (auto& row : acc)
    for (auto& a : row) a = vfloat{};
  for (std::int64_t c = 0; c < channels; ++c) {
    vfloat a[TV];
#pragma GCC unroll 3
    for (int t = 0; t < TV; ++t) a[t] = simd::load(v + c * kTiles + t * kLanes);
    simd::rank1_update(acc, u + c * u_stride, a);
  }
  for (int kk = 0; kk < kChannelBlock; ++kk)
    for (int t = 0; t < TV; ++t) simd::store(m + kk * kTiles + t * kLanes, acc[kk][t]);
}

// Output transform Y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1], for channels
// k0.. of the block, written into NCHW y; the last tile row or column of an
// odd-sized output is half outside and clipped.
void transform_output(const WinogradPlan& plan, const float* m, std::int64_t block, std::int64_t k0, float* ybuf,
                      float* y) {
  const ConvShape& p = plan.p;
  const std::int64_t count = plan.tiles_in(block), first = block * kTiles;
  const std::int64_t channels = std::min<std::int64_t>(kChannelBlock, p.k - k0);
  for (std::int64_t kk = 0; kk < channels; ++kk) {
    const float* mk = m + kk * kTiles;
    for (std::int64_t slot = 0; slot < count; slot += kLanes) {
      vfloat t[2][4];  // A^T M
      for (int j = 0; j < 4; ++j) {
        const vfloat m0 = simd::load(mk + (0 * 4 + j) * kChannelBlock * kTiles + slot);
        const vfloat m1 = simd::load(mk + (1 * 4 + j) * kChannelBlock * kTiles + slot);
        const vfloat m2 = simd::load(mk + (2 * 4 + j) * kChannelBlock * kTiles + slot);
        const vfloat m3 = simd::load(mk + (3 * 4 + j) * kChannelBlock * kTiles + slot);
        t[0][j] = m0 + m1 + m2;
        t[1][j] = m1 - m2 - m3;
      }
      for (int a = 0; a < 2; ++a) {
        simd::store(ybuf + (2 * a) * kTiles + slot, t[a][0] + t[a][1] + t[a][2]);
        simd::store(ybuf + (2 * a + 1) * kTiles + slot, t[a][1] - t[a][2] - t[a][3]);
      }
    }
    // ybuf[2a + b][slot] is output (2 ty + a, 2 tx + b) of the slot's tile.
    // Slots run along tile rows: write them a tile-row segment at a time.
    for (std::int64_t slot = 0; slot < count;) {
      const std::int64_t tile = first + slot;
      const std::int64_t n = tile / (plan.th * plan.tw), ty = tile / plan.tw % plan.th, tx0 = tile % plan.tw;
      const std::int64_t segment = std::min(plan.tw - tx0, count - slot);
      float* out = y + ((n * p.k + k0 + kk) * plan.oh + 2 * ty) * plan.ow;
      for (std::int64_t a = 0; a < 2 && 2 * ty + a < plan.oh; ++a, out += plan.ow) {
        for (std::int64_t t = 0; t < segment; t += kLanes) {
          const std::int64_t col = 2 * (tx0 + t);  // output columns col.. of tiles t..t+15
          // At most the 32 columns of these 16 tiles (store_interleaved's bound).
          const std::int64_t columns = std::min({std::int64_t{2 * kLanes}, 2 * (segment - t), plan.ow - col});
          simd::store_interleaved(out + col, simd::load(ybuf + (2 * a) * kTiles + slot + t),
                                  simd::load(ybuf + (2 * a + 1) * kTiles + slot + t), static_cast<int>(columns));
        }
      }
      slot += segment;
    }
  }
}

void run_winograd(WinogradPlan& plan, const ConvArgs& args) {
  const ConvShape& p = plan.p;
  const std::int64_t groups = plan.kp / kChannelBlock;
  const std::int64_t items = plan.blocks * plan.channel_parts;
  const int threads = plan.scratch->threads();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float* v = plan.scratch->of(t);
    float* m = v + plan.v_floats();
    float* ybuf = m + plan.m_floats();
    float* table = ybuf + plan.y_floats();
    std::int64_t transformed = -1;
    const auto [first, last] = thread_range(items, t, omp_get_num_threads());
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t block = item / plan.channel_parts, part = item % plan.channel_parts;
      const std::int64_t vectors = (plan.tiles_in(block) + kLanes - 1) / kLanes;
      if (block != transformed) {
#if defined(__AVX512F__)
        if (plan.by_rows) {
          auto* runs = reinterpret_cast<BlockRuns*>(table);
          plan_runs(plan, block, *runs);
          transform_input_rows(plan, args.x, *runs, v);
        }
#endif
        if (!plan.by_rows) {
          auto* gather = reinterpret_cast<BlockGather*>(table);
          plan_gather(plan, block, *gather);
          transform_input(plan, args.x, *gather, vectors, v);
        }
        transformed = block;
      }
      for (std::int64_t g = groups * part / plan.channel_parts; g < groups * (part + 1) / plan.channel_parts; ++g) {
        const std::int64_t k0 = g * kChannelBlock;
        for (int xi = 0; xi < kXi; ++xi) {
          const float* vx = v + xi * p.c * kTiles;
          const float* ux = plan.u.data() + xi * p.c * plan.kp + k0;
          float* mx = m + xi * kChannelBlock * kTiles;
          std::int64_t vec = 0;
          for (; vec + kVectors <= vectors; vec += kVectors)
            tile_gemm<kVectors>(vx + vec * kLanes, ux, p.c, plan.kp, mx + vec * kLanes);
          if (vectors - vec == 2) tile_gemm<2>(vx + vec * kLanes, ux, p.c, plan.kp, mx + vec * kLanes);
          if (vectors - vec == 1) tile_gemm<1>(vx + vec * kLanes, ux, p.c, plan.kp, mx + vec * kLanes);
        }
        transform_output(plan, m, block, k0, ybuf, args.y);
      }
    }
  }
}

}  // namespace

Run prepare_conv_winograd(const ConvArgs& args, const Exec&) {
  validate_conv_shape(args.shape);
  if (!conv_is_3x3_stride1(args)) throw Unsupported("Winograd F(2x2, 3x3) needs a 3x3 filter at stride 1");
  auto plan = std::make_shared<WinogradPlan>();
  const ConvShape& p = plan->p = args.shape;
  plan->oh = p.oh();
  plan->ow = p.ow();
  plan->th = (plan->oh + 1) / 2;
  plan->tw = (plan->ow + 1) / 2;
  plan->tiles = p.n * plan->th * plan->tw;
  plan->blocks = (plan->tiles + kTiles - 1) / kTiles;
  plan->kp = round_up(p.k, kChannelBlock);
  transform_weights(*plan, args.w);
#if defined(__AVX512F__)
  // Below 16 tiles per row, runs leave lanes idle and gathers were faster
  // here (single thread, n64: 16x16 images 128 against 179 GFLOP/s).
  plan->by_rows = plan->tw >= 16;
#endif
  plan->scratch = std::make_unique<ThreadScratch>(plan->v_floats() + plan->m_floats() + plan->y_floats() +
                                                  plan->table_floats());
  const std::int64_t wanted = 2 * plan->scratch->threads();
  if (plan->blocks < wanted)
    plan->channel_parts = std::min(plan->kp / kChannelBlock, (wanted + plan->blocks - 1) / plan->blocks);
  return [plan, args] { run_winograd(*plan, args); };
}

}  // namespace dlb
