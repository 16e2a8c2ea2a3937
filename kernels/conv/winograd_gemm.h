// What the own Winograd forwards (conv_winograd_nhwc.cpp, the stride-1
// kernel, and conv_winograd_s2_nhwc.cpp, the stride-2 one) share: the GEMM
// for one element xi of the transformed tile, the product of a block's
// transformed inputs and the transformed filters, the accumulators of a
// group of tiles in registers; and the threads' loop over the blocks of
// tiles. Internal to kernels/conv.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/common/thread_scratch.h"
#include "kernels/conv/conv_simd.h"

namespace dlb::winograd {

// One xi of output channel blocks kb .. kb + B - 1 (B = 1 or 2) for T
// tiles (kTiles, or 4) of a block: M_j[xi][t][16] = sum_c V[xi][t][c] *
// U[xi][kb + j][c][16] (vx, ux and mx at xi and the first tile), block j's
// M mblock floats after block 0's, the B x T accumulators in registers.
// With two blocks each broadcast of V feeds two multiply-adds and V is
// read once for both. With AVX-512 (32 registers)
// T = 8 and B = 2 where there are 8 tiles and two blocks. With AVX2 (16
// ymm registers, two per vfloat) T = 6 and B = 1: 12 accumulators, the
// filter's 2 and the broadcast's 1, the 6x16 block of the AVX2 SGEMMs
// (BLIS's Haswell kernel). Per channel 2 filter loads and 6 broadcasts feed
// 12 multiply-adds; T = 4 fed 8 with 2 + 4, and its 8 independent sums only
// just covered the 4-cycle latency of two FMA pipes (Zen 3 VM, mnist_cnn's
// conv2 at batch 64, alternating builds: T = 6 ran it in 2.66-2.72 ms
// against 2.87-2.96).
template <int T, int B>
[[gnu::always_inline]] inline void tiles_gemm(const float* vx, const float* ux, std::int64_t c, float* mx,
                                              std::int64_t mblock) {
    using namespace simd;
    vfloat acc[B][T] = {};
    for (std::int64_t cc = 0; cc < c; ++cc) {
      vfloat filter[B];
      for (int j = 0; j < B; ++j) {
        filter[j] = load(ux + (j * c + cc) * kLanes);
        in_registers(filter[j]);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        if constexpr (B == 1) {
          acc[0][t] = fmadd(splat(vx[t * c + cc]), filter[0], acc[0][t]);  // the broadcast folds into the FMA
        } else {
          const vfloat x = splat(vx[t * c + cc]);
          for (int j = 0; j < B; ++j) acc[j][t] = fmadd(x, filter[j], acc[j][t]);
        }
      }
    }
    for (int j = 0; j < B; ++j)
      for (int t = 0; t < T; ++t) store(mx + j * mblock + t * kLanes, acc[j][t]);
}

// The forward's blocks of `ts` tiles, split among the scratch's threads
// (schedule static: a thread's blocks are contiguous), start to end in
// cache: transform(tile, slot, v) for each tile of the block into V (the
// thread's scratch), then per output channel block kb, two at a time with
// AVX-512 where there are two, gemm(B, v, kb, present, m) (B the blocks,
// std::integral_constant 1 or 2) into M (m_offset floats after V) and
// store(m, first, present, kb, count): the output transform and epilogue.
// Where there are fewer than two blocks per thread (small images at batch
// 1), the output channel blocks are split too, each part transforming its
// block's input again.
template <class Transform, class Gemm, class Store>
void for_each_block(ThreadScratch& scratch, std::int64_t tiles, std::int64_t ts, std::int64_t kblocks,
                    std::int64_t m_offset, Transform transform, Gemm gemm, Store store) {
  const int threads = scratch.threads();
  const std::int64_t blocks = (tiles + ts - 1) / ts;
  const std::int64_t parts =
      blocks >= 2 * threads ? 1 : std::min<std::int64_t>(kblocks, (2 * threads + blocks - 1) / blocks);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t item = 0; item < blocks * parts; ++item) {
    float* v = scratch.of(omp_get_thread_num());
    float* m = v + m_offset;
    const std::int64_t block = item / parts, part = item % parts, first = block * ts;
    const int present = static_cast<int>(std::min<std::int64_t>(ts, tiles - first));
    for (int t = 0; t < present; ++t) transform(first + t, t, v);
    const std::int64_t end = kblocks * (part + 1) / parts;
    for (std::int64_t kb = kblocks * part / parts; kb < end;) {
      std::int64_t count = 1;
      if constexpr (simd::kRegisters == 1) {
        count = kb + 1 < end ? 2 : 1;  // two channel blocks at a time where there are two
        if (count == 2)
          gemm(std::integral_constant<int, 2>{}, v, kb, present, m);
        else
          gemm(std::integral_constant<int, 1>{}, v, kb, present, m);
      } else {
        gemm(std::integral_constant<int, 1>{}, v, kb, present, m);
      }
      store(m, first, present, kb, count);
      kb += count;
    }
  }
}

}  // namespace dlb::winograd
