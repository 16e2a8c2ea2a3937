// cpu_winograd: Winograd F(2x2, 3x3) (Lavin and Gray), 3x3 filters at stride 1, any pad.
//
// Each 2x2 output tile comes from a 4x4 input tile d (overlapping by 2):
//     Y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A
// 16 multiplications per tile and channel pair instead of 36. The
// elementwise products summed over c are, for each of the 16 positions xi
// of the 4x4 transformed tile, a GEMM
//     M[xi][k][tile] = sum_c U[xi][c][k] * V[xi][c][tile]
// with U = G g G^T (done once in prepare, outside the timed call, as
// frameworks do for inference) and V = B^T d B.
//
// The tiles of the whole batch are numbered row-major (image, tile row, tile
// column) and cut into blocks of whole tile rows, about 96 tiles each, so
// that small images (8x8: 16 tiles) still fill the vectors. Per block, all
// in cache: input transform of all channels into V [16][c][96] (separable:
// a horizontal pass over each input row, then a vertical one), then for
// every 8 output channels the 16 GEMMs in registers (8 channels x 48 tiles,
// 24 accumulators) into M [16][8][96], and the output transform straight
// into NCHW y. Threads split blocks (and channel ranges at batch 1).
#include <algorithm>
#include <memory>

#include "kernels/common/error.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/conv_threads.h"

namespace dlb {
namespace {

using simd::vfloat;
constexpr int kXi = 16;               // elements of a transformed 4x4 tile
constexpr int kChannelBlock = 8;      // output channels in registers
constexpr int kVectors = 3;           // tile vectors in registers
constexpr std::int64_t kTargetTiles = 96;

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

struct WinogradPlan {
  ConvShape p;
  std::int64_t oh = 0, ow = 0;
  std::int64_t th = 0, tw = 0;           // tiles per image: th rows of tw
  std::int64_t rows_per_block = 0;       // tile rows per block
  std::int64_t tiles = 0;                // tile slots per block, a multiple of 16
  std::int64_t blocks = 0;
  std::int64_t kp = 0;                   // k rounded up to 8
  std::int64_t channel_parts = 1;        // ranges of 8-channel groups per block (batch 1)
  HostBuffer<float> u;                   // [16][c][kp]
  std::unique_ptr<ThreadScratch> scratch;

  // Per-thread scratch layout.
  std::int64_t v_floats() const { return kXi * p.c * tiles; }
  std::int64_t m_floats() const { return kXi * kChannelBlock * tiles; }
  std::int64_t y_floats() const { return 4 * tiles; }
  std::int64_t row_floats() const { return 2 * tw + 2; }              // one padded input row
  std::int64_t h_floats() const { return 4 * 4 * tw; }                 // horizontal pass of 4 rows
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

// V[xi][c][slot] = (B^T d B)[xi] for the tiles of block `block`,
// B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
void transform_input(const WinogradPlan& plan, const float* x, std::int64_t block, float* v, float* hbuf,
                     float* prow) {
  const ConvShape& p = plan.p;
  const std::int64_t tw = plan.tw, first_row = block * plan.rows_per_block;
  const std::int64_t rows = std::min(plan.rows_per_block, p.n * plan.th - first_row);
  for (std::int64_t c = 0; c < p.c; ++c) {
    for (std::int64_t lr = 0; lr < rows; ++lr) {
      const std::int64_t n = (first_row + lr) / plan.th, ty = (first_row + lr) % plan.th;
      const float* image = x + (n * p.c + c) * p.h * p.w;
      // Horizontal pass: hbuf[i][j][tx] = (d_i B)[j] for input row i of the tile row.
      for (int i = 0; i < 4; ++i) {
        float* h = hbuf + i * 4 * tw;
        const std::int64_t ih = 2 * ty + i - p.pad;
        if (ih < 0 || ih >= p.h) {
          std::fill(h, h + 4 * tw, 0.0f);
          continue;
        }
        // prow[q] = input column q - pad, zero outside [0, w).
        const std::int64_t row_len = plan.row_floats();
        const std::int64_t q_begin = std::min(p.pad, row_len), q_end = std::min(p.pad + p.w, row_len);
        std::fill(prow, prow + q_begin, 0.0f);
        std::copy(image + ih * p.w, image + ih * p.w + (q_end - q_begin), prow + q_begin);
        std::fill(prow + q_end, prow + row_len, 0.0f);
#pragma omp simd
        for (std::int64_t tx = 0; tx < tw; ++tx) {
          const float d0 = prow[2 * tx], d1 = prow[2 * tx + 1], d2 = prow[2 * tx + 2], d3 = prow[2 * tx + 3];
          h[tx] = d0 - d2;
          h[tw + tx] = d1 + d2;
          h[2 * tw + tx] = d2 - d1;
          h[3 * tw + tx] = d1 - d3;
        }
      }
      // Vertical pass over the 4 rows, into the tile slots of this tile row.
      for (int j = 0; j < 4; ++j) {
        const float* h0 = hbuf + j * tw;
        const float* h1 = h0 + 4 * tw;
        const float* h2 = h1 + 4 * tw;
        const float* h3 = h2 + 4 * tw;
        float* out = v + (j * p.c + c) * plan.tiles + lr * tw;
        const std::int64_t xi_stride = 4 * p.c * plan.tiles;  // from row i to row i + 1 of the tile
#pragma omp simd
        for (std::int64_t tx = 0; tx < tw; ++tx) {
          out[tx] = h0[tx] - h2[tx];
          out[xi_stride + tx] = h1[tx] + h2[tx];
          out[2 * xi_stride + tx] = h2[tx] - h1[tx];
          out[3 * xi_stride + tx] = h1[tx] - h3[tx];
        }
      }
    }
  }
}

// m[kk][slot] = sum_c u[c][kk] * v[c][slot] for 8 channels and TV vectors of tile slots.
template <int TV>
void tile_gemm(const float* v, const float* u, std::int64_t channels, std::int64_t v_stride, std::int64_t u_stride,
               float* m, std::int64_t m_stride) {
  vfloat acc[kChannelBlock][TV] = {};
  for (std::int64_t c = 0; c < channels; ++c) {
    vfloat a[TV];
#pragma GCC unroll 3
    for (int t = 0; t < TV; ++t) a[t] = simd::load(v + c * v_stride + t * simd::kLanes);
    const float* uc = u + c * u_stride;
#pragma GCC unroll 8
    for (int kk = 0; kk < kChannelBlock; ++kk) {
      const vfloat b = simd::splat(uc[kk]);
#pragma GCC unroll 3
      for (int t = 0; t < TV; ++t) acc[kk][t] = simd::fmadd(b, a[t], acc[kk][t]);
    }
  }
  for (int kk = 0; kk < kChannelBlock; ++kk)
    for (int t = 0; t < TV; ++t) simd::store(m + kk * m_stride + t * simd::kLanes, acc[kk][t]);
}

// Output transform Y = A^T M A, A^T = [1 1 1 0; 0 1 -1 -1], for channels
// k0.. of the block, written into NCHW y (the last tile row or column of an
// odd-sized output is half outside and clipped).
void transform_output(const WinogradPlan& plan, const float* m, std::int64_t block, std::int64_t k0, float* ybuf,
                      float* y) {
  const ConvShape& p = plan.p;
  const std::int64_t tiles = plan.tiles, tw = plan.tw, first_row = block * plan.rows_per_block;
  const std::int64_t rows = std::min(plan.rows_per_block, p.n * plan.th - first_row);
  const std::int64_t channels = std::min<std::int64_t>(kChannelBlock, p.k - k0);
  for (std::int64_t kk = 0; kk < channels; ++kk) {
    const float* mk = m + kk * tiles;
    for (std::int64_t slot = 0; slot < rows * tw; slot += simd::kLanes) {
      vfloat t[2][4];  // A^T M: 2 rows of 4
      for (int j = 0; j < 4; ++j) {
        const vfloat m0 = simd::load(mk + (0 * 4 + j) * kChannelBlock * tiles + slot);
        const vfloat m1 = simd::load(mk + (1 * 4 + j) * kChannelBlock * tiles + slot);
        const vfloat m2 = simd::load(mk + (2 * 4 + j) * kChannelBlock * tiles + slot);
        const vfloat m3 = simd::load(mk + (3 * 4 + j) * kChannelBlock * tiles + slot);
        t[0][j] = m0 + m1 + m2;
        t[1][j] = m1 - m2 - m3;
      }
      for (int a = 0; a < 2; ++a) {
        simd::store(ybuf + (2 * a) * tiles + slot, t[a][0] + t[a][1] + t[a][2]);
        simd::store(ybuf + (2 * a + 1) * tiles + slot, t[a][1] - t[a][2] - t[a][3]);
      }
    }
    // ybuf[2a + b][slot] is output (2 ty + a, 2 tx + b) of the slot's tile.
    for (std::int64_t lr = 0; lr < rows; ++lr) {
      const std::int64_t n = (first_row + lr) / plan.th, ty = (first_row + lr) % plan.th;
      float* out = y + ((n * p.k + k0 + kk) * plan.oh + 2 * ty) * plan.ow;
      for (std::int64_t a = 0; a < 2 && 2 * ty + a < plan.oh; ++a, out += plan.ow) {
        const float* left = ybuf + (2 * a) * tiles + lr * tw;
        const float* right = ybuf + (2 * a + 1) * tiles + lr * tw;
        const std::int64_t pairs = plan.ow / 2;
#pragma omp simd
        for (std::int64_t tx = 0; tx < pairs; ++tx) {
          out[2 * tx] = left[tx];
          out[2 * tx + 1] = right[tx];
        }
        if (plan.ow % 2 != 0) out[plan.ow - 1] = left[pairs];
      }
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
    float* hbuf = ybuf + plan.y_floats();
    float* prow = hbuf + plan.h_floats();
    std::int64_t transformed = -1;
    const auto [first, last] = thread_range(items, t, omp_get_num_threads());
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t block = item / plan.channel_parts, part = item % plan.channel_parts;
      if (block != transformed) {
        transform_input(plan, args.x, block, v, hbuf, prow);
        transformed = block;
      }
      const std::int64_t rows = std::min(plan.rows_per_block, p.n * plan.th - block * plan.rows_per_block);
      const std::int64_t vectors = (rows * plan.tw + simd::kLanes - 1) / simd::kLanes;
      for (std::int64_t g = groups * part / plan.channel_parts; g < groups * (part + 1) / plan.channel_parts; ++g) {
        const std::int64_t k0 = g * kChannelBlock;
        for (int xi = 0; xi < kXi; ++xi) {
          const float* vx = v + xi * p.c * plan.tiles;
          const float* ux = plan.u.data() + xi * p.c * plan.kp + k0;
          float* mx = m + xi * kChannelBlock * plan.tiles;
          std::int64_t vec = 0;
          for (; vec + kVectors <= vectors; vec += kVectors)
            tile_gemm<kVectors>(vx + vec * simd::kLanes, ux, p.c, plan.tiles, plan.kp, mx + vec * simd::kLanes,
                                plan.tiles);
          if (vectors - vec == 2)
            tile_gemm<2>(vx + vec * simd::kLanes, ux, p.c, plan.tiles, plan.kp, mx + vec * simd::kLanes, plan.tiles);
          if (vectors - vec == 1)
            tile_gemm<1>(vx + vec * simd::kLanes, ux, p.c, plan.tiles, plan.kp, mx + vec * simd::kLanes, plan.tiles);
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
  plan->rows_per_block = std::max<std::int64_t>(1, (kTargetTiles + plan->tw / 2) / plan->tw);
  plan->tiles = round_up(plan->rows_per_block * plan->tw, simd::kLanes);
  plan->blocks = (p.n * plan->th + plan->rows_per_block - 1) / plan->rows_per_block;
  plan->kp = round_up(p.k, kChannelBlock);
  transform_weights(*plan, args.w);
  plan->scratch = std::make_unique<ThreadScratch>(plan->v_floats() + plan->m_floats() + plan->y_floats() +
                                                  plan->h_floats() + plan->row_floats() + simd::kLanes);
  const std::int64_t wanted = 2 * plan->scratch->threads();
  if (plan->blocks < wanted)
    plan->channel_parts = std::min(plan->kp / kChannelBlock, (wanted + plan->blocks - 1) / plan->blocks);
  return [plan, args] { run_winograd(*plan, args); };
}

}  // namespace dlb
