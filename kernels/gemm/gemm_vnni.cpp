// Own u8 x s8 GEMM with AVX-512 VNNI. vpdpbusd multiplies, in each of 16
// int32 lanes, 4 unsigned bytes of A by 4 signed bytes of B and adds the four
// products to the lane: 64 multiply-adds per instruction, two instructions
// per cycle, four times the fp32 FMA rate.
//
// This file is compiled for the build's target like every other, and the
// functions that use AVX-512 carry their own target attribute: it builds
// with -DDLB_NATIVE=OFF too, and the variant is registered only where
// cpu_has_avx512_vnni() says so at run time. Nothing here is called otherwise.
//
// Layout. B [k,n] s8 is packed once, in prepare, into panels of W = 64
// columns (W = 16 for n <= 16, 32 for n <= 32: the narrow layers of a
// network, which a 64-wide panel would leave mostly zeros):
//     panel[p][g][col][t] = B[4g + t, Wp + col]   (g < ceil(k/4), t < 4)
// with zeros past k and past n (exact: they multiply into nothing). One
// 64-byte load is then, for 16 consecutive columns, the 4 consecutive values
// of k that vpdpbusd multiplies by one broadcast group of 4 bytes of a row of
// A. Each panel also carries its column sums of B (for the zero-point
// compensation) and its output scales.
// A [m,k] u8 is read in place, inside the timed call: per step 4 bytes of a
// row broadcast to every lane; the last group of a row whose k is not a
// multiple of 4 is read with a masked load, so no byte past A is touched.
// For a network layer (gemm_vnni.h) the rows of a tile may instead be
// gathered into a buffer first, or be views of a padded image: each row then
// is `window` runs of k / window bytes (TileA), the tile's rows `channels`
// bytes apart in every run (a tile of a shifted image is pixels of one row).
//
// Micro-kernel: a tile of 6 rows x 64 columns of C in 24 zmm accumulators
// (+4 registers for B, 1 for A): per step 4 loads of B and 6 broadcasts feed
// 24 vpdpbusd, enough independent chains to cover its latency on both ports
// (narrow panels: 12 rows x 32 columns, 24 rows x 16 columns, the same 24
// accumulators).
// The sums stay in registers over all of k; the output stage follows in the
// registers: acc - za * colsum_j, converted to fp32, times c_scale[j], stored
// with a mask on the last panel's columns past n (or a network layer's
// output stage, gemm_vnni.h).
//
// Cache blocking: columns in blocks of whole panels whose packed B
// (k x block bytes) fits in half the L2, rows in blocks of kBlockRows. The
// (column block, row block) items are shared among the OpenMP threads with
// the column block outer, so each thread runs its row blocks against one
// L2-resident block of B; inside an item, each tile of A (6 x k bytes for
// 64-wide panels) stays in L1 while it meets every panel of the block.
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/common/buffer.h"
#include "kernels/common/error.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_vnni.h"

#define DLB_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace dlb {
namespace {

constexpr int kLanes = 16;                         // int32 lanes of a zmm register
constexpr int kGroupBytes = 4;                     // values of k per vpdpbusd lane
constexpr int kAccumulators = 24;                  // zmm accumulators of a tile
constexpr std::int64_t kParallelMinMacs = std::int64_t{1} << 20;

// A panel is `vectors` zmm registers wide (16, 32 or 64 columns of C: the
// narrow panels for the layers of 16 and 32 output channels, which a 64-wide
// one would leave three quarters or half empty); a tile is as many rows as
// keep kAccumulators accumulators busy (24, 12 or 6), a work item 8 tiles.
constexpr int tile_rows(int vectors) { return kAccumulators / vectors; }
constexpr std::int64_t block_rows(int vectors) { return 8 * tile_rows(vectors); }

struct PackedB {
  std::int64_t k = 0, n = 0, groups = 0, panels = 0;
  int vectors = 4;  // zmm registers per panel row: 1, 2 or 4
  int cols() const { return kLanes * vectors; }
  HostBuffer<std::int8_t> data;           // [panels][groups][64][4]
  HostBuffer<std::int32_t> column_sums;   // [panels * 64], sum_p B[p,j], 0 past n
  HostBuffer<float> scales;               // [panels * 64], c_scale[j], 0 past n
  std::int64_t panel_bytes() const { return groups * cols() * kGroupBytes; }
};

std::shared_ptr<PackedB> pack_b(const GemmArgs& args) {
  auto packed = std::make_shared<PackedB>();
  PackedB& p = *packed;
  p.k = args.k;
  p.n = args.n;
  p.groups = (args.k + kGroupBytes - 1) / kGroupBytes;
  p.vectors = args.n <= kLanes ? 1 : args.n <= 2 * kLanes ? 2 : 4;
  const int panel_cols = p.cols();
  p.panels = (args.n + panel_cols - 1) / panel_cols;
  const auto padded_cols = static_cast<std::size_t>(p.panels * panel_cols);
  p.data = HostBuffer<std::int8_t>(static_cast<std::size_t>(p.panels * p.panel_bytes()));
  p.column_sums = HostBuffer<std::int32_t>(padded_cols);
  p.scales = HostBuffer<float>(padded_cols);
  std::fill(p.data.span().begin(), p.data.span().end(), std::int8_t{0});
  std::fill(p.column_sums.span().begin(), p.column_sums.span().end(), 0);
  std::fill(p.scales.span().begin(), p.scales.span().end(), 0.0f);
  for (std::int64_t row = 0; row < p.k; ++row) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      const std::int8_t v = args.b_s8[row * p.n + j];
      const std::int64_t panel = j / panel_cols, col = j % panel_cols;
      p.data[static_cast<std::size_t>(panel * p.panel_bytes() +
                                      ((row / kGroupBytes) * panel_cols + col) * kGroupBytes + row % kGroupBytes)] = v;
      p.column_sums[static_cast<std::size_t>(j)] += v;
    }
  }
  for (std::int64_t j = 0; j < p.n; ++j) p.scales[static_cast<std::size_t>(j)] = args.c_scale[j];
  return packed;
}

// acc += sum of the four u8(a) * s8(b) byte products, per int32 lane, no
// saturation. Inline asm rather than _mm512_dpbusd_epi32: with the intrinsic
// GCC 12 copies each accumulator into a scratch register and back around
// every vpdpbusd (and spills at 24 accumulators), 590 instead of 960 GOP/s at
// 1024^3 here. AT&T operand order: b (may be memory), a, accumulator.
DLB_TARGET_VNNI inline void dpbusd(__m512i& acc, __m512i a_u8, __m512i b_s8) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a_u8), "vm"(b_s8));
}

// Where one panel of a tile goes, and what its output stage needs.
struct TileOut {
  float* c;                   // C[i0, first column of the panel]
  std::int64_t ldc;           // n
  int cols;                   // valid columns in this panel, 1..16 * V
  std::int32_t zero_point;    // za
  const std::int32_t* sums;   // column sums of this panel [64]
  const float* scales;        // c_scale of this panel [64]
  // The network layer's output stage (gemm_vnni.h), or null: C as above.
  const VnniOutput* layer = nullptr;
  std::int64_t row_offset = 0;              // of element (i0, 0) in the layer's [m, n] arrays
  std::int64_t col0 = 0;                    // the panel's first column
};

// Where the rows of a tile of A are: `segments` runs of segment_groups * 4
// bytes each (one run, with k % 4 bytes after it, for a plain A; a conv's
// window rows for a shifted image), run s of row r at a + r * lda + s *
// segment_stride.
struct TileA {
  const std::uint8_t* a;
  std::int64_t lda;
  std::int64_t segment_stride;
  std::int64_t segments;
  std::int64_t segment_groups;
  int tail_bytes;  // k % 4 values after the last run (plain A only)
};

// The layer output stage (gemm_vnni.h), what it needs of VnniOutput in
// registers and locals, read once per tile: the u8 stores may alias anything,
// so fields read through the VnniOutput pointer were loaded again after every
// store, and the bias once per row (mnist_cnn's first conv, k = 36, spent as
// long in its output stage as in its sums).
struct LayerStage {
  const float* bias;
  const std::uint8_t* residual;
  __m512 residual_scale;
  __m512i residual_zero_point;
  bool relu;
  std::uint8_t* out_u8;
  __m512 inv_out_scale;
  __m512i out_zero_point;
  float* out_f32;
};

DLB_TARGET_VNNI inline LayerStage layer_stage(const VnniOutput& o) {
  return LayerStage{o.bias,
                    o.residual,
                    _mm512_set1_ps(o.residual_scale),
                    _mm512_set1_epi32(o.residual_zero_point),
                    o.relu,
                    o.out_u8,
                    _mm512_set1_ps(1.0f / o.out_scale),
                    _mm512_set1_epi32(o.out_zero_point),
                    o.out_f32};
}

// One vector of 16 columns of one row, from the sums in fp32, their scales
// and the bias. The scale and the bias are one explicit fused multiply-add:
// written as a multiply and an add, GCC (gnu++20's -ffp-contract=fast) fused
// them or not by the inlining context, and two kernels with the same integer
// sums gave outputs one ulp apart.
DLB_TARGET_VNNI inline void layer_store(const LayerStage& o, std::int64_t at, __mmask16 mask, __m512 sum,
                                        __m512 scale, __m512 bias) {
  __m512 v = _mm512_fmadd_ps(sum, scale, bias);
  if (o.residual != nullptr) {
    const __m512i codes = _mm512_maskz_cvtepu8_epi32(mask, _mm_maskz_loadu_epi8(mask, o.residual + at));
    const __m512 r = _mm512_maskz_cvtepi32_ps(mask, _mm512_sub_epi32(codes, o.residual_zero_point));
    v = _mm512_fmadd_ps(r, o.residual_scale, v);
  }
  if (o.relu) v = _mm512_maskz_max_ps(mask, v, _mm512_setzero_ps());
  if (o.out_u8 == nullptr) {
    _mm512_mask_storeu_ps(o.out_f32 + at, mask, v);
    return;
  }
  // Round to nearest even (the MXCSR default), then saturate into [0, 255].
  // Masked forms throughout: see the GCC note in tile_kernel.
  __m512i q = _mm512_maskz_cvtps_epi32(mask, _mm512_mul_ps(v, o.inv_out_scale));
  q = _mm512_add_epi32(q, o.out_zero_point);
  q = _mm512_maskz_min_epi32(mask, _mm512_maskz_max_epi32(mask, q, _mm512_setzero_si512()), _mm512_set1_epi32(255));
  _mm512_mask_cvtepi32_storeu_epi8(o.out_u8 + at, mask, q);
}

// C[i0 : i0+Rows, panel] from rows of A and one packed panel of B.
template <int V, int Rows>
DLB_TARGET_VNNI void tile_kernel(const TileA& ta, const std::int8_t* panel, const TileOut& out) {
  constexpr int kPanelCols = kLanes * V;
  __m512i acc[Rows][V];
#pragma GCC unroll 24
  for (int r = 0; r < Rows; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_si512();

  const std::int8_t* b_group = panel;
  for (std::int64_t s = 0; s < ta.segments; ++s) {
    const std::uint8_t* a = ta.a + s * ta.segment_stride;
    for (std::int64_t g = 0; g < ta.segment_groups; ++g, b_group += kPanelCols * kGroupBytes) {
      __m512i b[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) b[v] = _mm512_load_si512(b_group + v * kLanes * kGroupBytes);
#pragma GCC unroll 24
      for (int r = 0; r < Rows; ++r) {
        std::int32_t four_bytes;
        std::memcpy(&four_bytes, a + r * ta.lda + g * kGroupBytes, sizeof four_bytes);
        const __m512i a_group = _mm512_set1_epi32(four_bytes);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) dpbusd(acc[r][v], a_group, b[v]);
      }
    }
  }
  if (ta.tail_bytes > 0) {  // k % 4 values left: B is zero-padded, A is read under a mask
    const std::uint8_t* a = ta.a + ta.segment_groups * kGroupBytes;
    const auto mask = static_cast<__mmask16>((1u << ta.tail_bytes) - 1);
#pragma GCC unroll 24
    for (int r = 0; r < Rows; ++r) {
      const __m128i tail = _mm_maskz_loadu_epi8(mask, a + r * ta.lda);
      const __m512i a_group = _mm512_set1_epi32(_mm_cvtsi128_si32(tail));
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v)
        dpbusd(acc[r][v], a_group, _mm512_load_si512(b_group + v * kLanes * kGroupBytes));
    }
  }

  // Masked conversion (and set1 from a scalar in the tail above): the
  // unmasked _mm512_cvtepi32_ps and _mm512_broadcastd_epi32 trip GCC 12's
  // false -Wuninitialized on their undefined pass-through (GCC bug 105593).
  const __m512i zero_point = _mm512_set1_epi32(out.zero_point);
  const bool layer = out.layer != nullptr;
  const LayerStage stage = layer ? layer_stage(*out.layer) : LayerStage{};
  const std::int64_t row_offset = out.row_offset, ldc = out.ldc;
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    const int cols = std::clamp(out.cols - v * kLanes, 0, kLanes);
    const auto mask = static_cast<__mmask16>((1u << cols) - 1);
    const __m512i compensation = _mm512_mullo_epi32(zero_point, _mm512_load_si512(out.sums + v * kLanes));
    const __m512 scale = _mm512_load_ps(out.scales + v * kLanes);
    if (layer) {
      const std::int64_t col = out.col0 + v * kLanes;
      const __m512 bias = _mm512_maskz_loadu_ps(mask, stage.bias + col);
#pragma GCC unroll 24
      for (int r = 0; r < Rows; ++r) {
        const __m512 sum = _mm512_maskz_cvtepi32_ps(mask, _mm512_sub_epi32(acc[r][v], compensation));
        layer_store(stage, row_offset + r * ldc + col, mask, sum, scale, bias);
      }
      continue;
    }
#pragma GCC unroll 24
    for (int r = 0; r < Rows; ++r) {
      const __m512 sum = _mm512_maskz_cvtepi32_ps(mask, _mm512_sub_epi32(acc[r][v], compensation));
      _mm512_mask_storeu_ps(out.c + r * ldc + v * kLanes, mask, _mm512_mul_ps(sum, scale));
    }
  }
}

// The tile kernel of panel width V for `rows` (1..tile_rows(V)) rows.
template <int V, int Rows = tile_rows(V)>
DLB_TARGET_VNNI void tile_kernel_rows(int rows, const TileA& ta, const std::int8_t* panel, const TileOut& out) {
  if (rows == Rows) {
    tile_kernel<V, Rows>(ta, panel, out);
  } else if constexpr (Rows > 1) {
    tile_kernel_rows<V, Rows - 1>(rows, ta, panel, out);
  }
}

// The output stage of panel p of a tile whose first row is row i of C.
TileOut tile_out(const GemmArgs& args, const PackedB& b, const VnniOutput* layer, std::int64_t i, std::int64_t p) {
  const std::int64_t first_col = p * b.cols();
  return TileOut{layer != nullptr ? nullptr : args.c + i * b.n + first_col,
                 b.n,
                 static_cast<int>(std::min<std::int64_t>(b.cols(), b.n - first_col)),
                 args.a_zero_point,
                 b.column_sums.data() + first_col,
                 b.scales.data() + first_col,
                 layer,
                 i * b.n,
                 first_col};
}

// One work item: rows [row0, row1) of C against panels [panel0, panel1).
template <int V>
DLB_TARGET_VNNI void gemm_block(const GemmArgs& args, const PackedB& b, const VnniOutput* layer,
                                const GatherRows* gather, std::int64_t row0, std::int64_t row1, std::int64_t panel0,
                                std::int64_t panel1) {
  thread_local std::vector<std::uint8_t> gathered;
  if (gather != nullptr) gathered.resize(static_cast<std::size_t>(tile_rows(V) * b.k));
  TileA ta{nullptr, b.k, 0, 1, b.k / kGroupBytes, static_cast<int>(b.k % kGroupBytes)};
  for (std::int64_t i = row0; i < row1; i += tile_rows(V)) {
    const int rows = static_cast<int>(std::min<std::int64_t>(tile_rows(V), row1 - i));
    ta.a = args.a_u8 + i * b.k;
    if (gather != nullptr) {
      (*gather)(i, rows, gathered.data());
      ta.a = gathered.data();
    }
    for (std::int64_t p = panel0; p < panel1; ++p)
      tile_kernel_rows<V>(rows, ta, b.data.data() + p * b.panel_bytes(), tile_out(args, b, layer, i, p));
  }
}

// The padded width of a shifted image.
std::int64_t shifted_pitch(const ShiftedImage& im) { return im.cols + im.window_cols - 1; }

// One work item of a shifted image: output rows [y0, y1) of `image` against
// panels [panel0, panel1). Tiles never cross an image row (they would run
// over its window_cols - 1 padding pixels: 8% more sums for mnist_cnn's
// 24-pixel rows, 20% for ResNet20's 8-pixel ones). A row of cols pixels is
// ceil(cols / tile_rows) tiles: full ones and a shorter last one for
// 16-column panels, tiles of equal size for wider ones. Measured per conv at
// batch 64 (own int8 ResNet20, 3 alternations of two builds, Zen 4): its
// 32-pixel rows of 16 channels 474-558 us as 24 + 8 against 541-648 as
// 16 + 16; its 16-pixel rows of 32 channels 416-464 us as 8 + 8 against
// 447-501 as 12 + 4 (not explained; mnist_cnn's first conv, 26 pixels, took
// the same time as 9, 9, 8 and as 12, 12, 2).
template <int V>
DLB_TARGET_VNNI void shifted_block(const GemmArgs& args, const PackedB& b, const VnniOutput& layer,
                                   const ShiftedImage& im, std::int64_t image, std::int64_t y0, std::int64_t y1,
                                   std::int64_t panel0, std::int64_t panel1) {
  const std::int64_t pitch = shifted_pitch(im);
  const std::uint8_t* base = im.data + image * (im.rows + im.window_rows - 1) * pitch * im.channels;
  const std::int64_t first_pixel = image * im.rows * im.cols;
  const std::int64_t tiles = (im.cols + tile_rows(V) - 1) / tile_rows(V);
  // Equal tiles: the first `longer` of them one row longer.
  const std::int64_t tile_base = im.cols / tiles, longer = im.cols % tiles;
  TileA ta{nullptr, im.channels, pitch * im.channels, im.window_rows, im.window_cols * im.channels / kGroupBytes,
           0};
  for (std::int64_t y = y0; y < y1; ++y) {
    std::int64_t x = 0;
    for (std::int64_t t = 0; t < tiles; ++t) {
      const int rows = static_cast<int>(V == 1 ? std::min<std::int64_t>(tile_rows(V), im.cols - x)
                                                : tile_base + (t < longer ? 1 : 0));
      ta.a = base + (y * pitch + x) * im.channels;
      for (std::int64_t p = panel0; p < panel1; ++p)
        tile_kernel_rows<V>(rows, ta, b.data.data() + p * b.panel_bytes(),
                            tile_out(args, b, &layer, first_pixel + y * im.cols + x, p));
      x += rows;
    }
  }
}

// Bytes of packed B a column block may take: half the L2 of one core.
std::int64_t column_block_budget() {
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return (l2 > 0 ? l2 : 1 << 21) / 2;
}

// Columns in blocks of whole panels whose packed B fits in half the L2.
std::int64_t column_block_panels(const PackedB& b) {
  return std::clamp<std::int64_t>(column_block_budget() / b.panel_bytes(), 1, b.panels);
}

template <int V>
void gemm_vnni_v(const GemmArgs& args, const PackedB& b, const VnniOutput* layer, const GatherRows* gather) {
  constexpr std::int64_t kBlockRows = block_rows(V);
  const std::int64_t block_panels = column_block_panels(b);
  const std::int64_t col_blocks = (b.panels + block_panels - 1) / block_panels;
  const std::int64_t row_blocks = (args.m + kBlockRows - 1) / kBlockRows;
  // Below ~10^6 multiply-adds (a few microseconds) waking the other threads
  // costs more than it saves.
  const bool parallel = col_blocks * row_blocks > 1 && args.m * args.n * args.k >= kParallelMinMacs;
#pragma omp parallel for collapse(2) schedule(static) if (parallel)
  for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
    for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
      gemm_block<V>(args, b, layer, gather, rb * kBlockRows, std::min(args.m, (rb + 1) * kBlockRows), cb * block_panels,
                    std::min(b.panels, (cb + 1) * block_panels));
    }
  }
}

// The same over a shifted image: work items are (column block, image, block
// of output rows of that image), a block about block_rows(V) pixels.
template <int V>
void shifted_vnni_v(const GemmArgs& args, const PackedB& b, const VnniOutput& layer, const ShiftedImage& im) {
  const std::int64_t block_panels = column_block_panels(b);
  const std::int64_t col_blocks = (b.panels + block_panels - 1) / block_panels;
  const std::int64_t rows_per_block = std::max<std::int64_t>(1, block_rows(V) / im.cols);
  const std::int64_t row_blocks = (im.rows + rows_per_block - 1) / rows_per_block;
  const bool parallel = col_blocks * im.images * row_blocks > 1 && args.m * args.n * args.k >= kParallelMinMacs;
#pragma omp parallel for collapse(3) schedule(static) if (parallel)
  for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
    for (std::int64_t image = 0; image < im.images; ++image) {
      for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
        shifted_block<V>(args, b, layer, im, image, rb * rows_per_block, std::min(im.rows, (rb + 1) * rows_per_block),
                         cb * block_panels, std::min(b.panels, (cb + 1) * block_panels));
      }
    }
  }
}

void gemm_vnni(const GemmArgs& args, const PackedB& b, const VnniOutput* layer = nullptr,
               const GatherRows* gather = nullptr) {
  switch (b.vectors) {
    case 1: return gemm_vnni_v<1>(args, b, layer, gather);
    case 2: return gemm_vnni_v<2>(args, b, layer, gather);
    default: return gemm_vnni_v<4>(args, b, layer, gather);
  }
}

void shifted_vnni(const GemmArgs& args, const PackedB& b, const VnniOutput& layer, const ShiftedImage& im) {
  switch (b.vectors) {
    case 1: return shifted_vnni_v<1>(args, b, layer, im);
    case 2: return shifted_vnni_v<2>(args, b, layer, im);
    default: return shifted_vnni_v<4>(args, b, layer, im);
  }
}

void check_layer_output(const GemmArgs& args, const VnniOutput& out) {
  DLB_REQUIRE(args.k <= kGemmS8MaxK, "gemm vnni: k too large for exact int32 sums");
  DLB_REQUIRE(out.bias != nullptr && (out.out_u8 == nullptr) != (out.out_f32 == nullptr) && out.out_scale > 0,
              "gemm vnni: a layer output stage needs a bias and one output (u8 with a positive scale, or fp32)");
}

}  // namespace

Run prepare_gemm_vnni_s8(const GemmArgs& args, const Exec&) {
  DLB_REQUIRE(args.k <= kGemmS8MaxK, "gemm vnni: k too large for exact int32 sums");
  std::shared_ptr<const PackedB> packed = pack_b(args);
  return [args, packed] { gemm_vnni(args, *packed); };
}

Run prepare_gemm_vnni_s8_out(const GemmArgs& args, const VnniOutput& out, GatherRows gather) {
  check_layer_output(args, out);
  DLB_REQUIRE(args.a_u8 != nullptr || gather, "gemm vnni: A neither given nor gathered");
  std::shared_ptr<const PackedB> packed = pack_b(args);
  return [args, packed, out, gather = std::move(gather)] { gemm_vnni(args, *packed, &out, gather ? &gather : nullptr); };
}

Run prepare_gemm_vnni_s8_out(const GemmArgs& args, const VnniOutput& out, const ShiftedImage& image) {
  check_layer_output(args, out);
  DLB_REQUIRE(image.data != nullptr && image.images >= 1 && image.rows >= 1 && image.cols >= 1 &&
                  image.channels >= 1 && image.window_rows >= 1 && image.window_cols >= 1,
              "gemm vnni: a shifted image needs data and positive dimensions");
  DLB_REQUIRE(image.window_cols * image.channels % kGroupBytes == 0,
              "gemm vnni: a shifted image needs window_cols * channels divisible by 4");
  DLB_REQUIRE(args.m == image.images * image.rows * image.cols &&
                  args.k == image.window_rows * image.window_cols * image.channels,
              "gemm vnni: m or k does not match the shifted image");
  std::shared_ptr<const PackedB> packed = pack_b(args);
  return [args, packed, out, image] { shifted_vnni(args, *packed, out, image); };
}

}  // namespace dlb
