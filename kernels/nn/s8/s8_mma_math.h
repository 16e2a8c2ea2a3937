// gpu_own_mma_s8's arithmetic: s8_direct_math.h's Conv as an implicit GEMM
// on the int8 tensor cores, mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32.
// One warp's work, lane by lane, in functions compiled for the GPU kernel
// (nn_gpu_kernels.cu) and for its host twin (nn_s8_direct_host.cpp), which
// runs the 32 lanes of a warp on their registers and models the instruction
// from those registers through the PTX ISA's fragment layouts (ptx:: below):
// a lane that loads the wrong element for its register is a wrong sum on
// the host too, which the CPU tests see.
//
// The GEMM: row = output pixel (batch * oh * ow), column = output channel,
// and the reduction over the conv's window as its sequence of 32-bit words,
// word j = (tap a * rw + b) * words + g: the 4 codes of channels 4g..4g+3 of
// input pixel (oy * stride + a - pad, ox * stride + b - pad), the pad word
// (4 copies of the zero point) outside the image or past the last row, and
// as B the packed weights' word j of the column (s8_direct_math.h's layout),
// zero past the last word or column. A k-step is 8 words (32 codes): the
// words are padded to a multiple of 8 with zero weights. The integer sums are
// exact, and the epilogue is Conv's (finish_sum), so the outputs are the
// direct kernel's and cpu_own_s8's bit for bit.
//
// Tiling: a warp owns kMmaRows = 32 rows (2 m-tiles of 16) and nt n-tiles of
// 8 columns (nt = 1, 2, 4 or 8: every column of the layer up to 64), a block
// kMmaWarps = 4 warps (128 rows) sharing its columns, the grid's y the
// column groups beyond 64. Per k-step a lane loads 8 words of A (2 taps'
// table entries, 4 rows) and nt x 2 words of B (one 8-byte load per n-tile:
// the weights are packed in fragment order at prepare time), then issues
// 2 x nt mma. Operands come straight from global memory through the L1
// (the weights of a layer are at most 36 KiB and read by every warp): no
// shared-memory staging, no cp.async pipeline yet.
//
// Split k: a warp's k-steps run one after another, each waiting on its
// loads, so a layer of few warps and many steps waits on that chain:
// mnist_cnn's fc1 (288 steps; 1 warp at batch 1, 32 at 1024) is the likely
// reason its int8 pass took 216 us at batch 1 and 253 at 64 on the H200,
// where fp16 took 29 and 41 (unverified until a GPU run's layer times). Where the grid's blocks
// are fewer than twice the GPU's multiprocessors, the k-steps are split
// into `splits` ranges (at least kMmaMinStepsPerSplit steps each), one per
// grid z: each warp adds its partial sums into `partial` [pixels, k] (int32,
// zeroed before; integer sums are exact, so the order of the adds is free),
// and MmaFinish's elements take every sum through the same epilogue.
#pragma once

#include <cstdint>

#include "kernels/nn/s8/s8_direct_math.h"

// The loops over a lane's registers unrolled on the GPU, so that the
// fragments stay in registers (indexed by constants), not local memory.
#if defined(__CUDA_ARCH__)
#define DLB_MMA_UNROLL _Pragma("unroll")
#else
#define DLB_MMA_UNROLL
#endif

namespace dlb::nn::s8 {

// The PTX ISA's layouts ("Matrix Fragments for mma.m16n8k32", .u8/.s8):
// element i of lane's fragment, low bytes first (register i / 4, byte i % 4),
// with groupID = lane >> 2 and threadID_in_group = lane % 4.
namespace ptx {

struct Element {
  int row = 0, col = 0;
};

// A, 16 x 32 (.row): 4 registers. row = groupID for i < 4 or 8 <= i < 12,
// else groupID + 8; col = threadID_in_group * 4 + (i & 3), + 16 for i >= 8.
DLB_HOST_DEVICE inline Element a_element(int lane, int i) {
  const int group = lane >> 2, thread = lane % 4;
  return {(i < 4 || (i >= 8 && i < 12)) ? group : group + 8, thread * 4 + (i & 3) + (i >= 8 ? 16 : 0)};
}

// B, 32 x 8 (.col): 2 registers. row (the k index) = threadID_in_group * 4 +
// (i & 3), + 16 for i >= 4; col = groupID.
DLB_HOST_DEVICE inline Element b_element(int lane, int i) {
  const int group = lane >> 2, thread = lane % 4;
  return {thread * 4 + (i & 3) + (i >= 4 ? 16 : 0), group};
}

// C and D, 16 x 8 s32: 4 registers. row = groupID for i < 2, else groupID +
// 8; col = threadID_in_group * 2 + (i & 1).
DLB_HOST_DEVICE inline Element c_element(int lane, int i) {
  const int group = lane >> 2, thread = lane % 4;
  return {i < 2 ? group : group + 8, thread * 2 + (i & 1)};
}

}  // namespace ptx

inline constexpr int kMmaMTiles = 2;                // m-tiles of 16 rows a warp
inline constexpr int kMmaRows = 16 * kMmaMTiles;    // rows a warp
inline constexpr int kMmaWarps = 4;                 // warps a block
inline constexpr int kMmaWordsPerStep = 8;          // 32 codes: mma's k

// Where word j of the reduction reads: tap (dy, dx) of the window and the
// byte offset of its channel word from the pixel's window origin; dy =
// kMmaNoTap past the last word (the pad word, against zero weights).
struct alignas(8) MmaTap {
  std::int16_t dy = 0, dx = 0;
  std::int32_t offset = 0;
};
inline constexpr std::int16_t kMmaNoTap = 0x4000;
inline constexpr int kMmaNoRow = -2 * kMmaNoTap;  // a row's iy past the last pixel: outside for every tap

struct MmaConv {
  Conv conv;  // the shape, input, per-channel constants and epilogue (conv.weights unused)
  // [n_tiles][k_steps][32 lanes][2]: the B fragment of n-tile nt at k-step s, lane by lane
  const std::uint32_t* b = nullptr;
  const MmaTap* taps = nullptr;  // [k_steps * 8]
  int k_steps = 0;
  int n_tiles = 0;  // a multiple of nt
  int nt = 1;       // n-tiles a warp: 1, 2, 4 or 8
  int splits = 1;   // k-step ranges (grid z): 1, or partial sums into `partial`
  std::int32_t* partial = nullptr;  // [pixels, k] where splits > 1
  DLB_HOST_DEVICE std::int64_t warps() const { return (conv.pixels() + kMmaRows - 1) / kMmaRows; }
  DLB_HOST_DEVICE int column_groups() const { return n_tiles / nt; }
  // The first k-step of range `split` (split = splits: k_steps).
  DLB_HOST_DEVICE int split_begin(int split) const { return k_steps * split / splits; }
};

inline constexpr int kMmaMinStepsPerSplit = 4;

// The k-step ranges for p on a GPU of `multiprocessors`: enough that the
// grid has twice as many blocks as the GPU has multiprocessors, where the
// k-steps allow kMmaMinStepsPerSplit each; 1 where the grid fills it already.
inline int mma_splits(const MmaConv& p, int multiprocessors) {
  const std::int64_t blocks = (p.warps() + kMmaWarps - 1) / kMmaWarps * p.column_groups();
  const std::int64_t want = (2 * static_cast<std::int64_t>(multiprocessors) + blocks - 1) / blocks;
  const std::int64_t most = p.k_steps / kMmaMinStepsPerSplit;
  return static_cast<int>(want < most ? (want > 1 ? want : 1) : (most > 1 ? most : 1));
}

// n-tiles a warp for k output channels: all of them up to 64.
inline int mma_warp_n_tiles(int k) {
  const int tiles = (k + 7) / 8;
  return tiles <= 1 ? 1 : tiles <= 2 ? 2 : tiles <= 4 ? 4 : 8;
}

// One lane's registers for a warp tile of kMmaMTiles x NT mma tiles.
template <int NT>
struct MmaLane {
  std::uint32_t a[kMmaMTiles][4];
  std::uint32_t b[NT][2];
  std::int32_t c[kMmaMTiles][NT][4];
};

// A lane's 4 rows of A (m-tile mt, half h: row mt * 16 + h * 8 + groupID of
// the warp's): the byte offset of the row's window origin in x and its
// input coordinates (iy = kMmaNoRow for a row past the last pixel).
struct MmaRows {
  std::int64_t base[kMmaMTiles][2];
  int iy[kMmaMTiles][2], ix[kMmaMTiles][2];
};

DLB_HOST_DEVICE inline MmaRows mma_rows(const MmaConv& p, std::int64_t warp, int lane) {
  const Conv& c = p.conv;
  MmaRows r;
  DLB_MMA_UNROLL
  for (int mt = 0; mt < kMmaMTiles; ++mt)
    DLB_MMA_UNROLL
    for (int h = 0; h < 2; ++h) {
      const std::int64_t pixel = warp * kMmaRows + mt * 16 + h * 8 + (lane >> 2);
      const int ox = static_cast<int>(pixel % c.ow), oy = static_cast<int>(pixel / c.ow % c.oh);
      const std::int64_t n = pixel / (static_cast<std::int64_t>(c.ow) * c.oh);
      r.iy[mt][h] = pixel < c.pixels() ? oy * c.stride - c.pad : kMmaNoRow;
      r.ix[mt][h] = ox * c.stride - c.pad;
      r.base[mt][h] = ((n * c.h + r.iy[mt][h]) * c.w + r.ix[mt][h]) * c.words * 4;
    }
  return r;
}

// The A fragments of k-step s: register 2q + h of m-tile mt holds row
// mt * 16 + h * 8 + groupID, word 4q + threadID_in_group of the step.
template <int NT>
DLB_HOST_DEVICE inline void mma_load_a(const MmaConv& p, const MmaRows& r, int s, int lane, MmaLane<NT>& l) {
  const Conv& c = p.conv;
  DLB_MMA_UNROLL
  for (int q = 0; q < 2; ++q) {
    const MmaTap tap = p.taps[s * kMmaWordsPerStep + 4 * q + lane % 4];
    DLB_MMA_UNROLL
    for (int mt = 0; mt < kMmaMTiles; ++mt)
      DLB_MMA_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int iy = r.iy[mt][h] + tap.dy, ix = r.ix[mt][h] + tap.dx;
        const bool inside = static_cast<unsigned>(iy) < static_cast<unsigned>(c.h) &&
                            static_cast<unsigned>(ix) < static_cast<unsigned>(c.w);
        l.a[mt][2 * q + h] = inside ? load_word(c.x + r.base[mt][h] + tap.offset) : c.pad_word;
      }
  }
}

// The B fragments of k-step s for the warp's n-tiles from nt0 on: as packed.
template <int NT>
DLB_HOST_DEVICE inline void mma_load_b(const MmaConv& p, int nt0, int s, int lane, MmaLane<NT>& l) {
  DLB_MMA_UNROLL
  for (int nt = 0; nt < NT; ++nt) {
    const std::uint32_t* b = p.b + ((static_cast<std::int64_t>(nt0 + nt) * p.k_steps + s) * 32 + lane) * 2;
#if defined(__CUDA_ARCH__)
    const uint2 v = __ldg(reinterpret_cast<const uint2*>(b));
    l.b[nt][0] = v.x;
    l.b[nt][1] = v.y;
#else
    l.b[nt][0] = b[0];
    l.b[nt][1] = b[1];
#endif
  }
}

// Each of the lane's sums that is an output of the conv, as
// out(pixel, o, sum): register i of tile (mt, nt) is row mt * 16 + groupID
// (+ 8 for i >= 2), column (nt0 + nt) * 8 + 2 threadID_in_group + (i & 1).
template <int NT, class Out>
DLB_HOST_DEVICE inline void mma_outputs(const MmaConv& p, std::int64_t warp, int nt0, int lane, const MmaLane<NT>& l,
                                        Out&& out) {
  const Conv& c = p.conv;
  DLB_MMA_UNROLL
  for (int mt = 0; mt < kMmaMTiles; ++mt)
    DLB_MMA_UNROLL
    for (int nt = 0; nt < NT; ++nt)
      DLB_MMA_UNROLL
      for (int i = 0; i < 4; ++i) {
        const std::int64_t pixel = warp * kMmaRows + mt * 16 + (lane >> 2) + (i >= 2 ? 8 : 0);
        const int o = (nt0 + nt) * 8 + 2 * (lane % 4) + (i & 1);
        if (pixel < c.pixels() && o < c.k) out(pixel, o, l.c[mt][nt][i]);
      }
}

// The warp's outputs through the epilogue.
template <int NT>
DLB_HOST_DEVICE inline void mma_store(const MmaConv& p, std::int64_t warp, int nt0, int lane, const MmaLane<NT>& l) {
  mma_outputs(p, warp, nt0, lane, l,
              [&p](std::int64_t pixel, int o, std::int32_t sum) { finish_sum(p.conv, pixel, o, sum); });
}

// With split k: the warp's partial sums added into p.partial (on the GPU
// one atomic add each: the ranges' warps add into the same sums).
template <int NT>
DLB_HOST_DEVICE inline void mma_add_partial(const MmaConv& p, std::int64_t warp, int nt0, int lane,
                                            const MmaLane<NT>& l) {
  mma_outputs(p, warp, nt0, lane, l, [&p](std::int64_t pixel, int o, std::int32_t sum) {
    std::int32_t* to = p.partial + pixel * p.conv.k + o;
#if defined(__CUDA_ARCH__)
    atomicAdd(to, sum);
#else
    *to += sum;
#endif
  });
}

// After the split ranges: element i = pixel * k + o of the conv's output
// from its whole sum.
struct MmaFinish {
  Conv conv;
  const std::int32_t* partial = nullptr;  // [pixels, k]
  DLB_HOST_DEVICE std::int64_t elements() const { return conv.elements(); }
};

DLB_HOST_DEVICE inline void element(const MmaFinish& f, std::int64_t i) {
  finish_sum(f.conv, i / f.conv.k, static_cast<int>(i % f.conv.k), f.partial[i]);
}

// The host's model of one mma.sync.m16n8k32.row.col.s32.u8.s8.s32 of the
// warp on tile (mt, nt): the matrices gathered from the 32 lanes' registers
// through the PTX layouts, D = A x B + C, scattered back the same way.
template <int NT>
inline void mma_on_host(MmaLane<NT> (&lanes)[32], int mt, int nt) {
  std::uint8_t a[16][32] = {};
  std::int8_t b[32][8] = {};
  std::int32_t c[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 16; ++i) {
      const ptx::Element e = ptx::a_element(lane, i);
      a[e.row][e.col] = static_cast<std::uint8_t>(lanes[lane].a[mt][i / 4] >> (8 * (i % 4)));
    }
    for (int i = 0; i < 8; ++i) {
      const ptx::Element e = ptx::b_element(lane, i);
      b[e.row][e.col] = static_cast<std::int8_t>(static_cast<std::uint8_t>(lanes[lane].b[nt][i / 4] >> (8 * (i % 4))));
    }
    for (int i = 0; i < 4; ++i) {
      const ptx::Element e = ptx::c_element(lane, i);
      c[e.row][e.col] = lanes[lane].c[mt][nt][i];
    }
  }
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 8; ++col)
      for (int k = 0; k < 32; ++k) c[row][col] += static_cast<std::int32_t>(a[row][k]) * b[k][col];
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const ptx::Element e = ptx::c_element(lane, i);
      lanes[lane].c[mt][nt][i] = c[e.row][e.col];
    }
}

#if defined(__CUDACC__)
// The instruction itself, for one lane: c += a x b (sm_80 and later).
__device__ inline void mma_u8s8(const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], std::int32_t (&c)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  __trap();
#endif
}
#endif

}  // namespace dlb::nn::s8
