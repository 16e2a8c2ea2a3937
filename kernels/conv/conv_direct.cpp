// cpu_direct: direct convolution, no lowering to GEMM.
//
// Per image, the input is copied once into zero-padded "phase planes": the
// padded image split by (row mod stride, column mod stride), each phase a
// plane of hq x wq. Then the input element an output (oh, ow) needs under
// filter tap (r, s) sits at
//     plane[phase(r, s)][(oh + r/stride) * wq + (ow + s/stride)]
// so with the output positions flattened as j = oh * wq + ow, tap (r, s) is
// one fixed offset from j, and 16 consecutive positions are one vector load,
// whatever the stride. Columns ow >= OW of that flattened grid are computed
// and dropped (wq - OW of every wq: 1/17 at 32x32 pad 1, more on small images).
//
// Register block: 8 output channels x 48 positions (3 vectors): 24
// accumulators; per tap 3 input loads and 8 weight broadcasts feed 24 FMAs.
// Weights are repacked in prepare as [k/8][c][r*s][8] so the 8 broadcasts
// are adjacent. Threads split (image, channel block, position range) items.
#include <algorithm>
#include <memory>

#include "kernels/conv/conv.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/conv_threads.h"

namespace dlb {
namespace {

using simd::vfloat;
constexpr int kChannelBlock = 8;
constexpr int kVectors = 3;
constexpr std::int64_t kPositions = kVectors * simd::kLanes;  // flattened positions per block

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

struct DirectPlan {
  ConvShape p;
  std::int64_t hq = 0, wq = 0;        // phase plane height and width
  std::int64_t plane = 0;             // floats per phase plane, slack for the last block's reads
  std::int64_t positions = 0;         // OH * wq rounded up to kPositions
  std::int64_t channel_blocks = 0;    // ceil(k / 8)
  std::int64_t position_parts = 1;    // position ranges per (image, channel block) item
  std::vector<std::int64_t> tap_offset;  // per (r, s): phase * plane + (r/stride) * wq + s/stride
  HostBuffer<float> weights;          // [channel_blocks][c][r*s][8], zero past k
  std::unique_ptr<ThreadScratch> scratch;  // per thread: [c][stride^2][plane]

  std::int64_t image_floats() const { return p.c * p.stride * p.stride * plane; }
};

// Copies image n of x into the phase planes. Only in-bounds elements are
// written: the padding positions keep the zeros the scratch was created with.
void fill_phase_planes(const DirectPlan& d, const float* x, std::int64_t n, float* planes) {
  const ConvShape& p = d.p;
  const std::int64_t st = p.stride;
  for (std::int64_t c = 0; c < p.c; ++c) {
    const float* in = x + (n * p.c + c) * p.h * p.w;
    float* out = planes + c * st * st * d.plane;
    for (std::int64_t ih = 0; ih < p.h; ++ih) {
      const std::int64_t hp = ih + p.pad;
      float* row = out + (hp % st) * st * d.plane + (hp / st) * d.wq;
      const float* src = in + ih * p.w;
      for (std::int64_t phase_col = 0; phase_col < st; ++phase_col) {
        // Input columns iw with (iw + pad) % stride == phase_col go to
        // column (iw + pad) / stride of that phase's plane.
        const std::int64_t first = ((phase_col - p.pad) % st + st) % st;
        float* dst = row + phase_col * d.plane + (first + p.pad) / st;
        for (std::int64_t iw = first; iw < p.w; iw += st) *dst++ = src[iw];
      }
    }
  }
}

// acc[kk][v] = sum over c and taps of w[kk][c][tap] * planes[c][tap_offset + j0 + 16 v].
void direct_block(const DirectPlan& d, const float* planes, const float* weights, std::int64_t j0,
                  float* out /* [8][kPositions] */) {
  vfloat acc[kChannelBlock][kVectors] = {};
  const std::int64_t taps = d.p.r * d.p.s;
  const std::int64_t channel_stride = d.p.stride * d.p.stride * d.plane;
  const std::int64_t* offsets = d.tap_offset.data();
  for (std::int64_t c = 0; c < d.p.c; ++c) {
    const float* in = planes + c * channel_stride + j0;
    const float* wc = weights + c * taps * kChannelBlock;
    for (std::int64_t t = 0; t < taps; ++t) {
      const float* src = in + offsets[t];
      vfloat a[kVectors];
#pragma GCC unroll 3
      for (int v = 0; v < kVectors; ++v) a[v] = simd::load(src + v * simd::kLanes);
      const float* wt = wc + t * kChannelBlock;
#pragma GCC unroll 8
      for (int kk = 0; kk < kChannelBlock; ++kk) {
        const vfloat b = simd::splat(wt[kk]);
#pragma GCC unroll 3
        for (int v = 0; v < kVectors; ++v) acc[kk][v] = simd::fmadd(b, a[v], acc[kk][v]);
      }
    }
  }
  for (int kk = 0; kk < kChannelBlock; ++kk)
    for (int v = 0; v < kVectors; ++v) simd::store(out + kk * kPositions + v * simd::kLanes, acc[kk][v]);
}

// Writes the valid columns of block [j0, j0 + kPositions) of the flattened
// grid into the NCHW output of channels k0.. (at most 8, fewer at the end).
void store_block(const DirectPlan& d, const float* block, std::int64_t n, std::int64_t k0, std::int64_t j0,
                 float* y) {
  const ConvShape& p = d.p;
  const std::int64_t oh = p.oh(), ow = p.ow();
  const std::int64_t end = std::min(j0 + kPositions, oh * d.wq);
  const std::int64_t channels = std::min<std::int64_t>(kChannelBlock, p.k - k0);
  for (std::int64_t kk = 0; kk < channels; ++kk) {
    float* out = y + ((n * p.k + k0 + kk) * oh) * ow;
    const float* src = block + kk * kPositions - j0;
    for (std::int64_t j = j0; j < end;) {
      const std::int64_t row = j / d.wq, col = j - row * d.wq;
      const std::int64_t row_end = std::min(end, (row + 1) * d.wq);
      const std::int64_t valid_end = std::min(row_end, row * d.wq + ow);
      if (col < ow) std::copy(src + j, src + valid_end, out + row * ow + col);
      j = row_end;
    }
  }
}

void run_direct(DirectPlan& d, const ConvArgs& args) {
  const std::int64_t blocks = d.positions / kPositions;
  const std::int64_t items = d.p.n * d.channel_blocks * d.position_parts;
  const int threads = d.scratch->threads();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float* planes = d.scratch->of(t);
    float* block_out = planes + d.image_floats();
    std::int64_t filled_image = -1;
    const auto [first, last] = thread_range(items, t, omp_get_num_threads());
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t part = item % d.position_parts;
      const std::int64_t kb = item / d.position_parts % d.channel_blocks;
      const std::int64_t n = item / (d.position_parts * d.channel_blocks);
      if (n != filled_image) {
        fill_phase_planes(d, args.x, n, planes);
        filled_image = n;
      }
      const float* weights = d.weights.data() + kb * d.p.c * d.p.r * d.p.s * kChannelBlock;
      for (std::int64_t b = blocks * part / d.position_parts; b < blocks * (part + 1) / d.position_parts; ++b) {
        direct_block(d, planes, weights, b * kPositions, block_out);
        store_block(d, block_out, n, kb * kChannelBlock, b * kPositions, args.y);
      }
    }
  }
}

}  // namespace

Run prepare_conv_direct(const ConvArgs& args, const Exec&) {
  validate_conv_shape(args.shape);
  auto d = std::make_shared<DirectPlan>();
  const ConvShape& p = d->p = args.shape;
  const std::int64_t st = p.stride;
  d->hq = (p.h + 2 * p.pad + st - 1) / st;
  d->wq = (p.w + 2 * p.pad + st - 1) / st;
  d->positions = round_up(p.oh() * d->wq, kPositions);
  d->channel_blocks = (p.k + kChannelBlock - 1) / kChannelBlock;
  std::int64_t max_offset = 0;
  for (std::int64_t r = 0; r < p.r; ++r) {
    for (std::int64_t s = 0; s < p.s; ++s) {
      const std::int64_t within = (r / st) * d->wq + s / st;
      max_offset = std::max(max_offset, within);
      d->tap_offset.push_back(within);  // the phase part is added once plane is known
    }
  }
  d->plane = round_up(std::max(d->hq * d->wq, d->positions + max_offset), simd::kLanes);
  for (std::int64_t r = 0; r < p.r; ++r)
    for (std::int64_t s = 0; s < p.s; ++s) d->tap_offset[r * p.s + s] += ((r % st) * st + s % st) * d->plane;

  // Weights [k][c][r][s] -> [k/8][c][r*s][8], zeros past k.
  const std::int64_t taps = p.r * p.s;
  d->weights = HostBuffer<float>(static_cast<std::size_t>(d->channel_blocks * p.c * taps * kChannelBlock));
  for (std::int64_t kb = 0; kb < d->channel_blocks; ++kb)
    for (std::int64_t c = 0; c < p.c; ++c)
      for (std::int64_t t = 0; t < taps; ++t)
        for (std::int64_t kk = 0; kk < kChannelBlock; ++kk) {
          const std::int64_t k = kb * kChannelBlock + kk;
          d->weights[static_cast<std::size_t>(((kb * p.c + c) * taps + t) * kChannelBlock + kk)] =
              k < p.k ? args.w[(k * p.c + c) * taps + t] : 0.0f;
        }

  d->scratch = std::make_unique<ThreadScratch>(d->image_floats() + kChannelBlock * kPositions);
  // Enough items for every thread twice over: split positions when images x
  // channel blocks are too few (batch 1).
  const std::int64_t per_position_part = p.n * d->channel_blocks;
  const std::int64_t wanted = 2 * d->scratch->threads();
  if (per_position_part < wanted)
    d->position_parts = std::min(d->positions / kPositions, (wanted + per_position_part - 1) / per_position_part);
  return [d, args] { run_direct(*d, args); };
}

}  // namespace dlb
