// cpu_winograd_nhwc: see conv_winograd_nhwc.h for the kernel. The conv
// family's row is that kernel as a framework keeping NHWC activations runs
// it: x transposed into NHWC once in prepare (as if the layer before had left
// it so), the timed call the kernel alone (ConvReport::timed_call), and the
// validated call the kernel plus the transpose of its output into NCHW y.
#include "kernels/conv/conv_winograd_nhwc.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "kernels/common/error.h"
#include "kernels/conv/conv.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/conv_threads.h"
#include "kernels/conv/conv_winograd_s2_nhwc.h"
#include "kernels/conv/winograd_f43.h"
#include "kernels/conv/winograd_gemm.h"

namespace dlb {
namespace {

// The kernels below use most of conv_simd.h: its whole namespace, not a list.
using namespace simd;
using winograd::output_transform6;
using winograd::tiles_gemm;

constexpr int kXi = 36;  // elements of a transformed 6x6 tile
// Tiles per block: the GEMM's accumulators in registers (see block_gemm).
constexpr int kTiles = kRegisters == 1 ? 8 : 6;
// Two register groups of tiles a block where U is large: AVX2's only (see
// run()); the scratch is sized for them only there.
constexpr bool kTwoGroups = kRegisters == 2;
constexpr int kMaxTiles = kTwoGroups ? 2 * kTiles : kTiles;  // tiles per block at most
// V[xi] and M[xi] of a block start a line more than their rows apart
// where the input has more than 16 channels (Geometry::v_row, m_row): at
// 32 and 64 they were 1 and 2 KB apart (8 tiles, AVX-512), so that the 36
// rows of a tile's input transform and GEMM fell on 4 or 2 sets of the
// 8-way L1 (as in the weight gradient, conv_winograd_wgrad.cpp).
// 64x32x16x16 and 64x64x8x8 forwards in 515-540 and 419-442 us against
// 548-574 and 446-462 (every one of 32 pairs each, alternated in one
// process, either one first; NHWC, batch 64, 2-core Zen 4 VM). At 16
// channels (512 bytes apart) it was no faster (1-3% slower in three runs
// of 10-12 pairs), so none there.
constexpr std::int64_t kXiPad = 16;
std::int64_t row_pad(std::int64_t c) { return c > kLanes ? kXiPad : 0; }
// Floats of a thread's scratch for c input channels: V of kMaxTiles tiles,
// then M of two channel blocks, their rows padded (row_pad).
std::int64_t scratch_floats(std::int64_t c) {
  return kXi * (kMaxTiles * c + row_pad(c) + 2 * (kMaxTiles * kLanes + row_pad(c)));
}

struct Geometry {
  std::int64_t n, h, w, c, k, pad, oh, ow, th, tw;
  std::int64_t ts;  // tiles per block: a multiple of kTiles
  Blocked16 x_at, y_at;  // the input's layout, the output's (the pooled output's with pool)
  std::int64_t tiles() const { return n * th * tw; }
  std::int64_t v_row = 0, m_row = 0;  // V[xi] to V[xi + 1], M[xi] to M[xi + 1], in floats (kXiPad)
  std::int64_t m_block() const { return kXi * m_row; }  // one channel block's M
};

// V[xi][t][c] of block slot t: the input tile of tile `tile`, with zeros
// where it lies in the padding. (Slots past the last tile are left as they
// are: their GEMM results are never stored.)
void transform_input(const Geometry& g, const float* x, std::int64_t tile, int t, float* v) {
  const std::int64_t image = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
  winograd::input_tile(x + image * g.x_at.image, g.x_at, g.h, g.w, g.c, 4 * ty - g.pad, 4 * tx - g.pad, v + t * g.c,
                       g.v_row);
}

// G groups of T tiles from block slot t0 on (T = kTiles, or 4 for the last
// few; G = 2 only for a block of two full groups), xi by xi, so that each
// U[xi] channel block serves the groups from L1. Its own function, T, B and
// G fixed: inlined into the parallel loop's body (a GEMM call for each xi
// and group, the group's size tested at run time, as from fd4b180 to
// 1803b9c) the 64x16x32x32 forward took 777-1,355 us against 726-1,230
// this way (11 of 12 pairs slower, alternated in one process; nChw16c,
// batch 64, 2-core Zen 4 VM, AVX-512; the same floats). As before fd4b180.
template <int T, int B, int G>
[[gnu::noinline]] void groups_gemm(const Geometry& g, const float* v, const float* u, std::int64_t kb, int t0,
                                   float* m) {
  const std::int64_t kblocks = g.k / kLanes, c = g.c, mblock = g.m_block();
  for (int xi = 0; xi < kXi; ++xi) {
    const float* ux = u + (xi * kblocks + kb) * c * kLanes;
    for (int group = 0; group < G; ++group) {
      const std::int64_t t = t0 + group * T;
      tiles_gemm<T, B>(v + xi * g.v_row + t * c, ux, c, m + xi * g.m_row + t * kLanes, mblock);
    }
  }
}

// The block's `present` tiles: two groups in one pass where the block
// holds two full ones, else kTiles at a time (4 where at most 4 are left).
template <int B>
void block_gemm(const Geometry& g, const float* v, const float* u, std::int64_t kb, int present, float* m) {
  if constexpr (kTwoGroups)
    if (present == 2 * kTiles) {
      groups_gemm<kTiles, B, 2>(g, v, u, kb, 0, m);
      return;
    }
  for (int t0 = 0; t0 < present; t0 += kTiles)
    if (present - t0 > 4)
      groups_gemm<kTiles, B, 1>(g, v, u, kb, t0, m);
    else
      groups_gemm<4, B, 1>(g, v, u, kb, t0, m);
}

// The 4x4 outputs of tile `tile` for output channels [16 kb, 16 kb + 16)
// from M, with the epilogue, stored where they lie inside the output; with
// kPool, each 2x2 quad's maximum instead, where the quad lies inside the
// output, at its place in the pooled output [n][oh / 2][ow / 2][k]. The
// maximum is taken before the bias and ReLU: both are monotonic and the
// bias is one value per channel, so max(relu(o + b)) = relu(max(o) + b),
// the same float as pooling the epilogued outputs. The epilogue's choices
// are template arguments, so that the loops over the 16 outputs hold no
// tests but the edge's, and a tile inside the output (most) has none.
//
// With kMoments (no pool, no residual sum), each value stored, less
// shift[channel], is added to sums[0] and its square to sums[1].
template <bool kAccumulate, bool kRelu, bool kPool, bool kMoments>
void transform_output(const Geometry& g, const float* m, std::int64_t tile, int t, std::int64_t kb,
                      const float* bias, float* y, const float* shift, vfloat* sums) {
  const std::int64_t image = tile / (g.th * g.tw), ty = tile / g.tw % g.th, tx = tile % g.tw;
  vfloat rows[6][4];
  for (int a = 0; a < 6; ++a) {
    vfloat row[6];
    for (int b = 0; b < 6; ++b) row[b] = load(m + (a * 6 + b) * g.m_row + t * kLanes);
    output_transform6(row, rows[a]);
  }
  const vfloat b = bias != nullptr ? load(bias + kb * kLanes) : vfloat{};
  float* const out = y + image * g.y_at.image + kb * g.y_at.block;
  const std::int64_t pixel = g.y_at.pixel, half = g.y_at.half;
  if constexpr (kPool) {
    vfloat o[4][4];  // [column][row]
    for (int j = 0; j < 4; ++j) {
      const vfloat column[6] = {rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j], rows[5][j]};
      output_transform6(column, o[j]);
    }
    for (int i = 0; i < 4; i += 2)
      for (int j = 0; j < 4; j += 2) {
        const std::int64_t oy = 4 * ty + i, ox = 4 * tx + j;
        if (oy + 1 >= g.oh || ox + 1 >= g.ow) continue;
        vfloat r = max(max(o[j][i], o[j + 1][i]), max(o[j][i + 1], o[j + 1][i + 1])) + b;
        if constexpr (kRelu) r = simd::relu(r);
        store(out + (oy / 2 * (g.ow / 2) + ox / 2) * pixel, r, half);
      }
    return;
  }
  const bool inside = 4 * ty + 4 <= g.oh && 4 * tx + 4 <= g.ow;
  [[maybe_unused]] const vfloat about = kMoments ? load(shift + kb * kLanes) : vfloat{};
  [[maybe_unused]] vfloat sum{}, squares{};
  for (int j = 0; j < 4; ++j) {
    const std::int64_t ox = 4 * tx + j;
    const vfloat column[6] = {rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j], rows[5][j]};
    vfloat o[4];
    output_transform6(column, o);
    float* p = out + (4 * ty * g.ow + ox) * pixel;
    for (int i = 0; i < 4; ++i, p += g.ow * pixel) {
      if (!inside && (4 * ty + i >= g.oh || ox >= g.ow)) continue;
      vfloat r = o[i] + b;
      if constexpr (kAccumulate) r += load(p, half);
      if constexpr (kRelu) r = simd::relu(r);
      store(p, r, half);
      if constexpr (kMoments) {
        const vfloat d = r - about;
        sum += d;
        squares = fmadd(d, d, squares);
      }
    }
  }
  if constexpr (kMoments) sums[0] += sum, sums[1] += squares;
}

using TransformOutput = void (*)(const Geometry&, const float*, std::int64_t, int, std::int64_t, const float*, float*,
                                 const float*, vfloat*);
// transform_output for these epilogue choices (pool takes no accumulate,
// moments neither).
TransformOutput transform_output_for(bool accumulate, bool relu, bool pool, bool moments) {
  if (moments) return relu ? transform_output<false, true, false, true> : transform_output<false, false, false, true>;
  if (pool) return relu ? transform_output<false, true, true, false> : transform_output<false, false, true, false>;
  if (accumulate) return relu ? transform_output<true, true, false, false> : transform_output<true, false, false, false>;
  return relu ? transform_output<false, true, false, false> : transform_output<false, false, false, false>;
}

}  // namespace

bool WinogradNhwc::accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t s, std::int64_t stride) {
  return r == 3 && s == 3 && stride == 1 && c > 0 && k > 0 && c % kLanes == 0 && k % kLanes == 0;
}

WinogradNhwc::WinogradNhwc(const float* w, std::int64_t k, std::int64_t c, std::shared_ptr<ThreadScratch> scratch)
    : k_(k), c_(c), u_(static_cast<std::size_t>(kXi * k * c)), scratch_(std::move(scratch)) {
  if (!accepts(c, k, 3, 3, 1))
    throw Unsupported("Winograd F(4x4, 3x3) on NHWC needs input and output channels in multiples of 16");
  if (!scratch_) scratch_ = std::make_shared<ThreadScratch>();
  scratch_->reserve(scratch_floats(c));
  set_weights(w);
}

void WinogradNhwc::set_weights(const float* w) {
  // U = G g G^T per (output, input) channel pair, in double, rounded once.
  //   G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6; 1/24 -1/12 1/6; 0 0 1]
  static constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                                     {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                     {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                     {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                     {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                     {0, 0, 1}};
  // A register of output channels at a time (vdouble: 4 with AVX2, 8 with
  // AVX-512), a lane each, the pairs split among the threads: the training
  // step calls this every step (one pair at a time, it took 310 us for
  // 64 x 64 channels; 8 a time, 48 us).
  using vfloats = float __attribute__((vector_size(kDoubles * sizeof(float))));
  const std::int64_t k = k_, c = c_, kblocks = k / kLanes;
#pragma omp parallel for num_threads(scratch_->threads()) schedule(static)
  for (std::int64_t pair = 0; pair < k / kDoubles * c; ++pair) {
    const std::int64_t o0 = pair / c * kDoubles, i = pair % c;
    vdouble g[9];
    for (int t = 0; t < 9; ++t)
      for (int lane = 0; lane < kDoubles; ++lane) g[t][lane] = w[((o0 + lane) * c + i) * 9 + t];
    vdouble gg[6][3];  // G g
    for (int a = 0; a < 6; ++a)
      for (int s = 0; s < 3; ++s) gg[a][s] = G[a][0] * g[s] + G[a][1] * g[3 + s] + G[a][2] * g[6 + s];
    for (int a = 0; a < 6; ++a)
      for (int b = 0; b < 6; ++b) {
        const vdouble value = gg[a][0] * G[b][0] + gg[a][1] * G[b][1] + gg[a][2] * G[b][2];
        const vfloats rounded = __builtin_convertvector(value, vfloats);
        std::memcpy(&u_[static_cast<std::size_t>((((a * 6 + b) * kblocks + o0 / kLanes) * c + i) * kLanes + o0 % kLanes)],
                    &rounded, sizeof rounded);
      }
  }
}

std::int64_t WinogradNhwc::workspace_bytes() const {
  return static_cast<std::int64_t>(scratch_->threads()) * scratch_floats(c_) * static_cast<std::int64_t>(sizeof(float));
}

WinogradNhwc::~WinogradNhwc() = default;

void WinogradNhwc::operator()(const float* x, std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t pad,
                              const float* bias, bool accumulate, bool relu, bool pool, float* y) const {
  const std::int64_t oh = h + 2 * pad - 2, ow = w + 2 * pad - 2;
  (*this)(x, Blocked16::nhwc(c_, h, w), n, h, w, pad, bias, accumulate, relu, pool, y,
          pool ? Blocked16::nhwc(k_, oh / 2, ow / 2) : Blocked16::nhwc(k_, oh, ow));
}

void WinogradNhwc::operator()(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t h, std::int64_t w,
                              std::int64_t pad, const float* bias, bool accumulate, bool relu, bool pool, float* y,
                              const Blocked16& y_at) const {
  run(x, x_at, n, h, w, pad, bias, accumulate, relu, pool, y, y_at, nullptr);
}

void WinogradNhwc::operator()(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t h, std::int64_t w,
                              std::int64_t pad, const float* bias, bool relu, float* y, const Blocked16& y_at,
                              const ChannelMoments& moments) const {
  DLB_REQUIRE(moments.shift != nullptr && moments.mean != nullptr && moments.variance != nullptr,
              "Winograd NHWC: the moments need a shift, a mean and a variance");
  run(x, x_at, n, h, w, pad, bias, false, relu, false, y, y_at, &moments);
}

void WinogradNhwc::run(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t h, std::int64_t w,
                       std::int64_t pad, const float* bias, bool accumulate, bool relu, bool pool, float* y,
                       const Blocked16& y_at, const ChannelMoments* moments) const {
  Geometry g{n, h, w, c_, k_, pad, h + 2 * pad - 2, w + 2 * pad - 2, 0, 0, kTiles, x_at, y_at};
  DLB_REQUIRE(n > 0 && g.oh > 0 && g.ow > 0 && pad >= 0, "Winograd NHWC: no output for this input and padding");
  DLB_REQUIRE(!pool || (!accumulate && g.oh >= 2 && g.ow >= 2),
              "Winograd NHWC: a 2x2 max pool takes no residual sum and an output of at least 2x2");
  g.th = (g.oh + 3) / 4;
  g.tw = (g.ow + 3) / 4;
  const int threads = scratch_->threads();
  // With AVX2, two register blocks of tiles a block where the transformed
  // filters U (36 k c floats) outgrow a quarter of a 512 KB L2 (32
  // channels in and out and up): each U[xi] then serves both from L1, and
  // U streams from L3 half as often (on Zen 3, 590 KB at 64 channels: the
  // 64x64x8x8 forward 3-5% faster at batch 64, the 32x32x16x16 one 1-9%;
  // at 16 channels no change), where that leaves 4 blocks a thread. With
  // AVX-512 (8-tile groups) one group was faster on the Zen 4 VM (1 MB of
  // L2): 64x32x16x16 543-865 us against 557-908, 64x64x8x8 435-489
  // against 447-510 (10 and 9 of 12 pairs, alternated in one process).
  if (kTwoGroups && kXi * k_ * c_ * static_cast<std::int64_t>(sizeof(float)) > 128 * 1024 &&
      g.tiles() >= 4 * threads * 2 * kTiles)
    g.ts = 2 * kTiles;
  g.v_row = g.ts * c_ + row_pad(c_);
  g.m_row = g.ts * kLanes + row_pad(c_);
  const TransformOutput epilogue = transform_output_for(accumulate, relu, pool, moments != nullptr);
  const float* shift = moments != nullptr ? moments->shift : nullptr;
  if (moments != nullptr) moment_parts_.assign(static_cast<std::size_t>(threads * 2 * k_), 0.0);
  const float* const u = u_.data();
  winograd::for_each_block(
      *scratch_, g.tiles(), g.ts, k_ / kLanes, kXi * g.v_row,
      [&](std::int64_t tile, int t, float* v) { transform_input(g, x, tile, t, v); },
      [&](auto blocks, const float* v, std::int64_t kb, int present, float* m) {
        block_gemm<decltype(blocks)::value>(g, v, u, kb, present, m);
      },
      [&](const float* m, std::int64_t first, int present, std::int64_t kb, std::int64_t count) {
        for (std::int64_t j = 0; j < count; ++j) {
          vfloat sums[2] = {};
          for (int t = 0; t < present; ++t)
            epilogue(g, m + j * g.m_block(), first + t, t, kb + j, bias, y, shift, sums);
          if (moments != nullptr) {
            double* part = moment_parts_.data() + omp_get_thread_num() * 2 * k_ + (kb + j) * kLanes;
            alignas(64) float lanes[2][kLanes];
            store(lanes[0], sums[0]);
            store(lanes[1], sums[1]);
            for (int lane = 0; lane < kLanes; ++lane) part[lane] += lanes[0][lane], part[k_ + lane] += lanes[1][lane];
          }
        }
      });
  if (moments == nullptr) return;
  const double count = static_cast<double>(n * g.oh * g.ow);
  for (std::int64_t o = 0; o < k_; ++o) {
    double s1 = 0.0, s2 = 0.0;
    for (int thread = 0; thread < threads; ++thread) {
      s1 += moment_parts_[static_cast<std::size_t>(thread * 2 * k_ + o)];
      s2 += moment_parts_[static_cast<std::size_t>(thread * 2 * k_ + k_ + o)];
    }
    const double d = s1 / count;
    moments->mean[o] = static_cast<float>(moments->shift[o] + d);
    moments->variance[o] = static_cast<float>(std::max(s2 / count - d * d, 0.0));
  }
}

namespace {

// x and y of a conv family problem in NHWC, the kernel's call, and the
// transposes: the conv family's rows of both own NHWC Winograd kernels.
struct NhwcConv {
  ConvShape p;
  std::function<void(const float*, float*)> kernel;  // x NHWC to y NHWC
  HostBuffer<float> x, y;
  float* user_y = nullptr;
  void convolve() { kernel(x.data(), y.data()); }
  void run() {
    convolve();
    const std::int64_t plane = p.oh() * p.ow();
#pragma omp parallel for schedule(static)
    for (std::int64_t nk = 0; nk < p.n * p.k; ++nk) {
      const std::int64_t image = nk / p.k, o = nk % p.k;
      for (std::int64_t i = 0; i < plane; ++i)
        user_y[nk * plane + i] = y[static_cast<std::size_t>((image * plane + i) * p.k + o)];
    }
  }
};

// The row: x transposed into NHWC once, here; a Kernel made from the
// weights, which `call` runs on the NHWC x and y; the timed call the
// kernel alone.
template <class Kernel, class Call>
Run prepare_nhwc(const ConvArgs& args, const char* row, const char* implementation, Call call) {
  const ConvShape& p = args.shape;
  DLB_REQUIRE(args.report != nullptr, std::string(row) + " reports the call to time through ConvArgs::report");
  auto c = std::make_shared<NhwcConv>();
  c->p = p;
  c->kernel = [kernel = std::make_shared<Kernel>(args.w, p.k, p.c), p, call](const float* x, float* y) {
    call(*kernel, x, p, y);
  };
  c->x = HostBuffer<float>(static_cast<std::size_t>(p.x_size()));
  c->y = HostBuffer<float>(static_cast<std::size_t>(p.y_size()));
  c->user_y = args.y;
  const std::int64_t plane = p.h * p.w;
  for (std::int64_t image = 0; image < p.n; ++image)
    for (std::int64_t ch = 0; ch < p.c; ++ch)
      for (std::int64_t i = 0; i < plane; ++i)
        c->x[static_cast<std::size_t>((image * plane + i) * p.c + ch)] = args.x[(image * p.c + ch) * plane + i];
  args.report->timed_call = [c] { c->convolve(); };
  args.report->implementation = implementation;
  return [c] { c->run(); };
}

}  // namespace

bool conv_winograd_nhwc_accepts(const ConvArgs& args) {
  const ConvShape& p = args.shape;
  return WinogradNhwc::accepts(p.c, p.k, p.r, p.s, p.stride);
}

Run prepare_conv_winograd_nhwc(const ConvArgs& args, const Exec&) {
  validate_conv_shape(args.shape);
  if (!conv_winograd_nhwc_accepts(args))
    throw Unsupported("Winograd F(4x4, 3x3) on NHWC needs a 3x3 filter at stride 1 and channels in multiples of 16");
  return prepare_nhwc<WinogradNhwc>(
      args, "cpu_winograd_nhwc", "F(4x4, 3x3), NHWC, no transposes timed",
      [](const WinogradNhwc& kernel, const float* x, const ConvShape& p, float* y) {
        kernel(x, p.n, p.h, p.w, p.pad, nullptr, false, false, false, y);
      });
}

bool conv_winograd_s2_nhwc_accepts(const ConvArgs& args) {
  const ConvShape& p = args.shape;
  return WinogradStride2Nhwc::accepts(p.c, p.k, p.r, p.s, p.stride);
}

Run prepare_conv_winograd_s2_nhwc(const ConvArgs& args, const Exec&) {
  validate_conv_shape(args.shape);
  if (!conv_winograd_s2_nhwc_accepts(args))
    throw Unsupported("Winograd stride 2 on NHWC needs a 3x3 filter at stride 2 and channels in multiples of 16");
  return prepare_nhwc<WinogradStride2Nhwc>(
      args, "cpu_winograd_s2_nhwc", "F(4x4, 2x2) on the four parity phases, NHWC, no transposes timed",
      [](const WinogradStride2Nhwc& kernel, const float* x, const ConvShape& p, float* y) {
        kernel(x, p.n, p.h, p.w, p.pad, nullptr, false, false, y);
      });
}

}  // namespace dlb
