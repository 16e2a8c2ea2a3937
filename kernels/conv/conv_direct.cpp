// cpu_direct: direct convolution, no lowering to GEMM.
//
// Per image, the input is copied once into zero-padded "phase planes": the
// padded image split by (row mod stride, column mod stride), each phase a
// plane of hq x wq. Then the input element an output (oh, ow) needs under
// filter tap (r, s) sits at
//     plane[phase(r, s)][(oh + r/stride) * wq + (ow + s/stride)]
// so with the output positions flattened as j = oh * wq + ow, tap (r, s) is
// one fixed offset from j, and 16 consecutive positions are one vector load,
// whatever the stride. Where OW is a multiple of 16 (the ResNet20 and most
// CNN layers) the vectors are 16 outputs of one row each, stored whole;
// otherwise they run along the flattened grid, columns ow >= OW computed and
// dropped at the store (wq - OW of every wq).
//
// Register block: 8 output channels x 3 vectors of 16 positions: 24
// accumulators; per tap 3 input loads and 8 weight broadcasts feed 24 FMAs.
// The last block of an image takes 1 or 2 vectors, whatever is left.
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

std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }

struct DirectPlan {
  ConvShape p;
  std::int64_t hq = 0, wq = 0;        // phase plane height and width
  std::int64_t plane = 0;             // floats per phase plane, slack for the last block's reads
  std::int64_t positions = 0;         // OH * wq rounded up to 16
  std::int64_t channel_blocks = 0;    // ceil(k / 8)
  std::int64_t position_parts = 1;    // vector ranges per (image, channel block) item
  // An image's output as vectors of 16 positions, in order: where each
  // starts in the flattened grid and, when whole_rows (OW % 16 == 0), where
  // its 16 outputs start in the (oh, ow) plane.
  bool whole_rows = false;
  std::vector<std::int64_t> vector_start, vector_dest;
  std::vector<std::int64_t> tap_offset;  // per (r, s): phase * plane + (r/stride) * wq + s/stride
  // Where the copy into the phase planes puts things (worked out once: the
  // divisions would cost as much as the copy): per input row, the start of
  // its row in its phase plane; per column phase, the first input column
  // of that phase, how many there are, and where they start in the row.
  std::vector<std::int64_t> row_start;
  struct ColumnPhase {
    std::int64_t first, count, start;
  };
  std::vector<ColumnPhase> column_phases;
  HostBuffer<float> weights;          // [channel_blocks][c][r*s][8], zero past k
  std::unique_ptr<ThreadScratch> scratch;  // per thread: [c][stride^2][plane]

  std::int64_t image_floats() const { return p.c * p.stride * p.stride * plane; }
};

// dst[i] = src[i * stride] for i < count; the stride a compile-time
// constant where it can be (1 and 2: what the default shapes use), so that
// the copy is vectorized (stride 2: loads and permutes, not gathers).
template <std::int64_t Stride>
void strided_copy(const float* src, std::int64_t count, float* dst) {
  for (std::int64_t i = 0; i < count; ++i) dst[i] = src[i * Stride];
}
void strided_copy(const float* src, std::int64_t count, std::int64_t stride, float* dst) {
  if (stride == 1) return strided_copy<1>(src, count, dst);
  if (stride == 2) return strided_copy<2>(src, count, dst);
  for (std::int64_t i = 0; i < count; ++i) dst[i] = src[i * stride];
}

// Copies image n of x into the phase planes. Only in-bounds elements are
// written: the padding positions keep the zeros the scratch was created with.
void fill_phase_planes(const DirectPlan& d, const float* x, std::int64_t n, float* planes) {
  const ConvShape& p = d.p;
  for (std::int64_t c = 0; c < p.c; ++c) {
    const float* in = x + (n * p.c + c) * p.h * p.w;
    float* out = planes + c * p.stride * p.stride * d.plane;
    for (std::int64_t ih = 0; ih < p.h; ++ih) {
      float* row = out + d.row_start[static_cast<std::size_t>(ih)];
      for (const auto& phase : d.column_phases)
        strided_copy(in + ih * p.w + phase.first, phase.count, p.stride, row + phase.start);
    }
  }
}

// A run of lanes of one output vector that lands in one output row: the
// flattened positions of a block, cut at row ends, garbage columns dropped.
struct LaneRun {
  int vector, first, count;
  std::int64_t dest;  // offset in the (oh, ow) output plane of lane `first`
};
constexpr int kMaxRuns = kVectors * (simd::kLanes + 2);  // at worst a run per lane (wq = 1), plus row ends

int plan_lane_runs(const DirectPlan& d, std::int64_t j0, int vectors, LaneRun* runs) {
  const std::int64_t oh = d.p.oh(), ow = d.p.ow();
  std::int64_t row = j0 / d.wq, col = j0 - row * d.wq;
  int count = 0;
  for (int v = 0; v < vectors; ++v) {
    for (int lane = 0; lane < simd::kLanes && row < oh;) {
      const int in_row = static_cast<int>(std::min<std::int64_t>(simd::kLanes - lane, d.wq - col));
      if (col < ow) runs[count++] = {v, lane, static_cast<int>(std::min<std::int64_t>(in_row, ow - col)), row * ow + col};
      lane += in_row;
      col += in_row;
      if (col == d.wq) {
        col = 0;
        ++row;
      }
    }
  }
  return count;
}

// acc[kk][v] = sum over c and taps of w[kk][c][tap] * planes[c][tap_offset + start of vector q0 + v],
// then written straight from the registers into the NCHW planes of output
// channels k0.. (at most 8, fewer at the end) of image n.
template <int V>
void direct_block(const DirectPlan& d, const float* planes, const float* weights, std::int64_t n, std::int64_t k0,
                  std::int64_t q0, float* y) {
  std::int64_t start[V];
  for (int v = 0; v < V; ++v) start[v] = d.vector_start[static_cast<std::size_t>(q0 + v)];
  vfloat acc[kChannelBlock][V];
  for (auto& row : acc)
    for (auto& a : row) a = vfloat{};
  const std::int64_t taps = d.p.r * d.p.s;
  const std::int64_t channel_stride = d.p.stride * d.p.stride * d.plane;
  const std::int64_t* offsets = d.tap_offset.data();
  for (std::int64_t c = 0; c < d.p.c; ++c) {
    const float* in = planes + c * channel_stride;
    const float* wc = weights + c * taps * kChannelBlock;
    for (std::int64_t t = 0; t < taps; ++t) {
      const float* src = in + offsets[t];
      vfloat a[V];
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) a[v] = simd::load(src + start[v]);
      simd::rank1_update(acc, wc + t * kChannelBlock, a);
    }
  }
  const std::int64_t plane = d.p.oh() * d.p.ow();
  const std::int64_t channels = std::min<std::int64_t>(kChannelBlock, d.p.k - k0);
  if (d.whole_rows) {
    for (std::int64_t kk = 0; kk < channels; ++kk) {
      float* out = y + (n * d.p.k + k0 + kk) * plane;
      for (int v = 0; v < V; ++v) simd::store(out + d.vector_dest[static_cast<std::size_t>(q0 + v)], acc[kk][v]);
    }
    return;
  }
  LaneRun runs[kMaxRuns];
  const int count = plan_lane_runs(d, start[0], V, runs);
  for (std::int64_t kk = 0; kk < channels; ++kk) {
    float* out = y + (n * d.p.k + k0 + kk) * plane;
    for (int i = 0; i < count; ++i)
      simd::store_lanes(out + runs[i].dest, acc[kk][runs[i].vector], runs[i].first, runs[i].count);
  }
}

void run_direct(DirectPlan& d, const ConvArgs& args) {
  const auto vectors = static_cast<std::int64_t>(d.vector_start.size());
  const std::int64_t blocks = (vectors + kVectors - 1) / kVectors;
  const std::int64_t items = d.p.n * d.channel_blocks * d.position_parts;
  const int threads = d.scratch->threads();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num();
    float* planes = d.scratch->of(t);
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
        const std::int64_t q0 = b * kVectors, width = std::min<std::int64_t>(kVectors, vectors - q0);
        const std::int64_t k0 = kb * kChannelBlock;
        if (width == kVectors) {
          direct_block<kVectors>(d, planes, weights, n, k0, q0, args.y);
        } else if (width == 2) {
          direct_block<2>(d, planes, weights, n, k0, q0, args.y);
        } else {
          direct_block<1>(d, planes, weights, n, k0, q0, args.y);
        }
      }
    }
  }
}

// Weights [k][c][r][s] -> [k/8][c][r*s][8], zeros past k.
void pack_weights(DirectPlan& d, const float* w) {
  const ConvShape& p = d.p;
  const std::int64_t taps = p.r * p.s;
  for (std::int64_t kb = 0; kb < d.channel_blocks; ++kb)
    for (std::int64_t c = 0; c < p.c; ++c)
      for (std::int64_t t = 0; t < taps; ++t)
        for (std::int64_t kk = 0; kk < kChannelBlock; ++kk) {
          const std::int64_t k = kb * kChannelBlock + kk;
          d.weights[static_cast<std::size_t>(((kb * p.c + c) * taps + t) * kChannelBlock + kk)] =
              k < p.k ? w[(k * p.c + c) * taps + t] : 0.0f;
        }
}

std::shared_ptr<DirectPlan> make_plan(const ConvArgs& args) {
  validate_conv_shape(args.shape);
  auto d = std::make_shared<DirectPlan>();
  const ConvShape& p = d->p = args.shape;
  const std::int64_t st = p.stride;
  d->hq = (p.h + 2 * p.pad + st - 1) / st;
  d->wq = (p.w + 2 * p.pad + st - 1) / st;
  d->positions = round_up(p.oh() * d->wq, simd::kLanes);
  d->channel_blocks = (p.k + kChannelBlock - 1) / kChannelBlock;
  d->whole_rows = p.ow() % simd::kLanes == 0;
  if (d->whole_rows) {
    for (std::int64_t row = 0; row < p.oh(); ++row) {
      for (std::int64_t col = 0; col < p.ow(); col += simd::kLanes) {
        d->vector_start.push_back(row * d->wq + col);
        d->vector_dest.push_back(row * p.ow() + col);
      }
    }
  } else {
    for (std::int64_t j = 0; j < d->positions; j += simd::kLanes) d->vector_start.push_back(j);
  }
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
  // Padded row hp = ih + pad is row hp / stride of row phase hp % stride;
  // input columns iw with (iw + pad) % stride == phase go to column
  // (iw + pad) / stride of that column phase.
  for (std::int64_t ih = 0; ih < p.h; ++ih) {
    const std::int64_t hp = ih + p.pad;
    d->row_start.push_back((hp % st) * st * d->plane + (hp / st) * d->wq);
  }
  for (std::int64_t phase = 0; phase < st; ++phase) {
    const std::int64_t first = ((phase - p.pad) % st + st) % st;
    if (first < p.w)
      d->column_phases.push_back({first, (p.w - first + st - 1) / st, phase * d->plane + (first + p.pad) / st});
  }

  d->scratch = std::make_unique<ThreadScratch>(d->image_floats());
  // Enough items for every thread twice over: split positions when images x
  // channel blocks are too few (batch 1).
  const std::int64_t per_position_part = p.n * d->channel_blocks;
  const std::int64_t wanted = 2 * d->scratch->threads();
  if (per_position_part < wanted)
    d->position_parts = std::min((static_cast<std::int64_t>(d->vector_start.size()) + kVectors - 1) / kVectors,
                                 (wanted + per_position_part - 1) / per_position_part);
  d->weights = HostBuffer<float>(static_cast<std::size_t>(d->channel_blocks * p.c * p.r * p.s * kChannelBlock));
  return d;
}

}  // namespace

Run prepare_conv_direct(const ConvArgs& args, const Exec&) {
  auto d = make_plan(args);
  pack_weights(*d, args.w);
  return [d, args] { run_direct(*d, args); };
}

Run prepare_conv_direct_live(const ConvArgs* args, const Exec&) {
  auto d = make_plan(*args);
  return [d, args] {
    pack_weights(*d, args->w);
    run_direct(*d, *args);
  };
}

}  // namespace dlb
