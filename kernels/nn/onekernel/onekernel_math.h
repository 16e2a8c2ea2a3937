// gpu_onekernel's arithmetic (nn_onekernel.h): the per-layer descriptors of
// its device program and what one block's threads compute for one tile,
// compiled for the kernel (nn_gpu_onekernel.cu) and for its host twin
// (nn_onekernel_host.cpp), which runs the same functions over the same tiles
// and threads so that the CPU tests check the indexing without a GPU.
//
// A layer is cut into tiles; a block takes a tile and runs its steps in
// order, all kThreads threads of the block calling step(d, b, tile, smem, s,
// t) with their own t and a __syncthreads() after each step. Within a step a
// thread writes only what no other thread of that step reads, so running the
// threads one after another (the host twin) computes the same bits.
//
// - conv: a tile is tile_k output channels x tile_rows output rows x every
//   column of one image. Step 0 stages the tile's input rows (zero-padded,
//   every input channel) and its channels' weights in shared memory. Step 1:
//   thread t computes per_thread channels at one output pixel over one of
//   `slices` slices of the input channels (a chain of explicit fmaf per
//   output, in input channel, row, column order). With one slice it adds bias
//   and residual, applies ReLU and stores; otherwise it leaves its partial
//   sums in shared memory and step 2 adds the slices' partials in slice
//   order, then bias, residual, ReLU, store.
// - fc: a tile is one output of up to tile_k images. Step 0: thread t sums
//   the products j = t, t + kThreads, ... of each image's row (explicit
//   fmaf, in order) into shared memory; steps 1-8 halve the kThreads partial
//   sums pairwise (a tree: t + stride into t); step 9 adds bias, ReLU, stores.
// - max pool, global average pool, log-softmax: a tile is kThreads outputs
//   (rows), one a thread, each window (plane, row) in order.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define DLB_OK_HD __host__ __device__
#else
#define DLB_OK_HD
#endif

namespace dlb::nn::ok {

enum class Kind : std::int32_t { conv, fc, max_pool, global_avg_pool, log_softmax };

// Where an activation lives: >= 0 an offset (in floats) into the arena, or
// the network input x / output y.
inline constexpr std::int64_t kInput = -1, kOutput = -2, kNone = -3;
// The threads of a block: every step runs on exactly these.
inline constexpr int kThreads = 256;
// The fc's tree: log2(kThreads) halvings.
inline constexpr int kTreeSteps = 8;
static_assert(kThreads == 1 << kTreeSteps);
// The most images an fc tile reduces at once (kThreads floats of shared memory each).
inline constexpr int kFcImages = 16;
// Shared memory a tile may use, in floats (48 KiB: no opt-in needed).
inline constexpr std::int64_t kSharedFloats = 12 * 1024;

struct Layer {
  Kind kind = Kind::conv;
  std::int32_t relu = 0;
  std::int64_t batch = 0;
  std::int64_t c = 0, h = 0, w = 0, k = 0, oh = 0, ow = 0;
  std::int64_t window = 1, stride = 1, pad = 0;
  std::int64_t weight = -1, bias = -1;  // offsets into the parameter buffer (conv, fc), or -1
  std::int64_t in = kNone, residual = kNone, out = kNone;
  std::int64_t items = 0;  // output elements: batch x k x oh x ow (log-softmax: batch rows)
  // 1: a grid-wide barrier before this layer (it reads an output written
  // since the last one); 0: it runs in the same phase as the layer before
  // (ResNet's downsample conv beside its block's first conv: both read the
  // block's input). No region is written twice, so reads are the only hazard.
  std::int32_t barrier = 1;
  // The tiling (chosen by the program builder from the shape and batch
  // alone, never from the device, so the host twin sums in the same order):
  // conv: tile_k output channels and tile_rows output rows a tile,
  // per_thread channels a thread, `slices` slices of the input channels.
  // fc: tile_k images a tile. Every tiling keeps tile_k x ... x slices
  // threads' work inside kThreads and smem inside kSharedFloats.
  std::int32_t tile_k = 1, tile_rows = 1, per_thread = 1, slices = 1;
  std::int64_t tiles = 0;  // tiles of the layer
  std::int64_t smem = 0;   // floats of shared memory a tile uses
};

struct Buffers {
  const float* params = nullptr;
  const float* x = nullptr;
  float* arena = nullptr;
  float* y = nullptr;
};

DLB_OK_HD inline const float* at(const Buffers& b, std::int64_t where) {
  return where == kInput ? b.x : where == kOutput ? b.y : b.arena + where;
}
DLB_OK_HD inline float* out_at(const Buffers& b, std::int64_t where) {
  return where == kOutput ? b.y : b.arena + where;
}

// The length of an output's reduction.
DLB_OK_HD inline std::int64_t reduction(const Layer& d) {
  switch (d.kind) {
    case Kind::conv: return d.c * d.window * d.window;
    case Kind::fc: return d.c * d.h * d.w;
    case Kind::max_pool: return d.window * d.window;
    case Kind::global_avg_pool: return d.h * d.w;
    case Kind::log_softmax: return 0;
  }
  return 0;
}

// ---- conv: the tile's geometry. Indices in 32 bits (the program builder
// checks that every tensor fits): 64-bit division is a long software
// sequence on a GPU.
struct ConvTile {
  int n = 0, k0 = 0, y0 = 0;    // image, first channel, first output row
  int rows_in = 0, cols_in = 0;  // the staged input: rows and columns (padding included)
  int pixels = 0, slots = 0;     // output pixels a tile (tile_rows x ow); threads a slice
  int in_floats = 0, w_floats = 0;
};

DLB_OK_HD inline int conv_bands(const Layer& d) {
  return static_cast<int>((d.oh + d.tile_rows - 1) / d.tile_rows);
}

DLB_OK_HD inline ConvTile conv_tile(const Layer& d, std::int64_t tile64) {
  const int tile = static_cast<int>(tile64), bands = conv_bands(d);
  const int groups = static_cast<int>(d.k) / d.tile_k;
  ConvTile g;
  g.y0 = (tile % bands) * d.tile_rows;
  g.k0 = ((tile / bands) % groups) * d.tile_k;
  g.n = tile / (bands * groups);
  const int stride = static_cast<int>(d.stride), r = static_cast<int>(d.window);
  g.rows_in = (d.tile_rows - 1) * stride + r;
  g.cols_in = static_cast<int>(d.ow - 1) * stride + r;
  g.pixels = d.tile_rows * static_cast<int>(d.ow);
  g.slots = d.tile_k / d.per_thread * g.pixels;
  g.in_floats = static_cast<int>(d.c) * g.rows_in * g.cols_in;
  g.w_floats = d.tile_k * static_cast<int>(d.c) * r * r;
  return g;
}

// Shared memory of a conv tile: the staged input, the weights, the slices' partial sums.
DLB_OK_HD inline std::int64_t conv_smem(const Layer& d) {
  const ConvTile g = conv_tile(d, 0);
  const std::int64_t partials = d.slices > 1 ? static_cast<std::int64_t>(g.slots) * d.slices * d.per_thread : 0;
  return g.in_floats + g.w_floats + partials;
}

// Step 0, thread t of the block: its share of the input rows (every input
// channel; zeros where the window leaves the image, so the sums below need no
// bounds test) and of the weights, stored [ci][a][s][channel of the tile] so
// that a thread's per_thread weights of one tap are adjacent.
DLB_OK_HD inline void conv_stage(const Layer& d, const Buffers& b, const ConvTile& g, float* smem, int t) {
  const float* x = at(b, d.in);
  const int c = static_cast<int>(d.c), h = static_cast<int>(d.h), w = static_cast<int>(d.w);
  const int stride = static_cast<int>(d.stride), pad = static_cast<int>(d.pad), r = static_cast<int>(d.window);
  const float* image = x + static_cast<std::int64_t>(g.n) * c * h * w;
  // e = (ci x rows_in + row) x cols_in + col, stepped by kThreads: the column
  // and the line (ci x rows_in + row) carried forward, one division an
  // element left (the line's channel) where three would cost more issue
  // slots than the load.
  const int step_line = kThreads / g.cols_in, step_col = kThreads % g.cols_in;
  for (int e = t, line = t / g.cols_in, col = t % g.cols_in; e < g.in_floats; e += kThreads) {
    const int ci = line / g.rows_in, row = line - ci * g.rows_in;
    const int iy = g.y0 * stride - pad + row, ix = col - pad;
    smem[e] = iy < 0 || iy >= h || ix < 0 || ix >= w ? 0.0f : image[(ci * h + iy) * w + ix];
    line += step_line, col += step_col;
    if (col >= g.cols_in) col -= g.cols_in, ++line;
  }
  const int per_k = c * r * r;
  const float* wt = b.params + d.weight + static_cast<std::int64_t>(g.k0) * per_k;
  float* ws = smem + g.in_floats;
  for (int e = t; e < g.w_floats; e += kThreads) {
    const int kt = e / per_k, q = e % per_k;
    ws[q * d.tile_k + kt] = wt[e];
  }
}

// Bias, residual, ReLU and the store of output channel o at (n, oy, ox).
DLB_OK_HD inline void conv_store(const Layer& d, const Buffers& b, int n, int o, int oy, int ox, float v) {
  const std::int64_t index = ((static_cast<std::int64_t>(n) * d.k + o) * d.oh + oy) * d.ow + ox;
  v += b.params[d.bias + o];
  if (d.residual != kNone) v += at(b, d.residual)[index];
  if (d.relu != 0) v = fmaxf(v, 0.0f);
  out_at(b, d.out)[index] = v;
}

// Step 1, thread t: KP output channels at one pixel over one slice of the
// input channels. R: the window when known at compile time (0: d.window).
template <int KP, int R>
DLB_OK_HD inline void conv_sum(const Layer& d, const Buffers& b, const ConvTile& g, float* smem, int t) {
  if (t >= g.slots * d.slices) return;
  const int slice = t / g.slots, slot = t % g.slots;
  const int group = slot / g.pixels, pixel = slot % g.pixels;
  const int ow = static_cast<int>(d.ow), row = pixel / ow, ox = pixel % ow, oy = g.y0 + row;
  if (oy >= d.oh) return;  // the last band's rows past the output
  const int c = static_cast<int>(d.c), stride = static_cast<int>(d.stride);
  const int r = R > 0 ? R : static_cast<int>(d.window), tk = d.tile_k;
  const int per_slice = (c + d.slices - 1) / d.slices;
  const int c0 = slice * per_slice, c1 = c0 + per_slice < c ? c0 + per_slice : c;
  const float* in = smem + row * stride * g.cols_in + ox * stride;
  const float* ws = smem + g.in_floats + group * KP;
  float acc[KP];
  for (int j = 0; j < KP; ++j) acc[j] = 0.0f;
  for (int ci = c0; ci < c1; ++ci) {
    const float* xi = in + ci * g.rows_in * g.cols_in;
    const float* wi = ws + ci * r * r * tk;
    // The rows rolled (the registers of a fully unrolled 5 x 5 window of 8
    // channels spill), each row's taps unrolled.
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
    for (int a = 0; a < r; ++a) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int s = 0; s < r; ++s) {
        const float xv = xi[a * g.cols_in + s];
        const float* wv = wi + (a * r + s) * tk;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int j = 0; j < KP; ++j) acc[j] = fmaf(xv, wv[j], acc[j]);
      }
    }
  }
  if (d.slices == 1) {
    for (int j = 0; j < KP; ++j) conv_store(d, b, g.n, g.k0 + group * KP + j, oy, ox, acc[j]);
  } else {
    float* part = smem + g.in_floats + g.w_floats + (static_cast<std::int64_t>(slice) * g.slots + slot) * KP;
    for (int j = 0; j < KP; ++j) part[j] = acc[j];
  }
}

template <int KP>
DLB_OK_HD inline void conv_sum_r(const Layer& d, const Buffers& b, const ConvTile& g, float* smem, int t) {
  switch (d.window) {
    case 1: conv_sum<KP, 1>(d, b, g, smem, t); return;
    case 3: conv_sum<KP, 3>(d, b, g, smem, t); return;
    case 5: conv_sum<KP, 5>(d, b, g, smem, t); return;
    default: conv_sum<KP, 0>(d, b, g, smem, t); return;
  }
}

// Step 2 (slices > 1), thread t < slots: the slices' partials of its KP
// outputs in slice order, then bias, residual, ReLU, store.
DLB_OK_HD inline void conv_join(const Layer& d, const Buffers& b, const ConvTile& g, const float* smem, int t) {
  if (t >= g.slots) return;
  const int group = t / g.pixels, pixel = t % g.pixels, ow = static_cast<int>(d.ow);
  const int oy = g.y0 + pixel / ow, ox = pixel % ow;
  if (oy >= d.oh) return;
  const float* part = smem + g.in_floats + g.w_floats;
  const int kp = d.per_thread;
  for (int j = 0; j < kp; ++j) {
    float v = part[t * kp + j];
    for (int slice = 1; slice < d.slices; ++slice) v += part[(slice * g.slots + t) * kp + j];
    conv_store(d, b, g.n, g.k0 + group * kp + j, oy, ox, v);
  }
}

// ---- fc: tile = output o of images [n0, n0 + tile_k).
DLB_OK_HD inline void fc_step(const Layer& d, const Buffers& b, std::int64_t tile64, float* smem, int s, int t) {
  const int tile = static_cast<int>(tile64), k = static_cast<int>(d.k), batch = static_cast<int>(d.batch);
  const int o = tile % k, n0 = (tile / k) * d.tile_k;
  const int images = batch - n0 < d.tile_k ? batch - n0 : d.tile_k;
  const int total = static_cast<int>(reduction(d));
  if (s == 0) {
    const float* wt = b.params + d.weight + static_cast<std::int64_t>(o) * total;
    for (int i = 0; i < images; ++i) {
      const float* row = at(b, d.in) + static_cast<std::int64_t>(n0 + i) * total;
      float acc = 0.0f;
      // Unrolled so that a thread's loads (independent of the chain) are in
      // flight together: mnist_cnn's fc1 is 36 products a thread, three
      // L2 round trips rather than 36.
#if defined(__CUDA_ARCH__)
#pragma unroll 16
#endif
      for (int j = t; j < total; j += kThreads) acc = fmaf(row[j], wt[j], acc);
      smem[i * kThreads + t] = acc;
    }
  } else if (s <= kTreeSteps) {
    const int stride = kThreads >> s;
    if (t < stride)
      for (int i = 0; i < images; ++i) smem[i * kThreads + t] += smem[i * kThreads + t + stride];
  } else if (t < images) {
    float v = smem[t * kThreads] + b.params[d.bias + o];
    if (d.relu != 0) v = fmaxf(v, 0.0f);
    out_at(b, d.out)[static_cast<std::int64_t>(n0 + t) * k + o] = v;
  }
}

// ---- the element layers: one output (row) a thread.
DLB_OK_HD inline void element(const Layer& d, const Buffers& b, std::int64_t item64) {
  const float* x = at(b, d.in);
  const int item = static_cast<int>(item64);
  const int h = static_cast<int>(d.h), w = static_cast<int>(d.w);
  float v = 0.0f;
  switch (d.kind) {
    case Kind::max_pool: {
      const int oh = static_cast<int>(d.oh), ow = static_cast<int>(d.ow);
      const int r = static_cast<int>(d.window), stride = static_cast<int>(d.stride), pad = static_cast<int>(d.pad);
      const int ox = item % ow, oy = (item / ow) % oh, plane = item / (ow * oh);  // plane: n * c + channel
      const float* p = x + static_cast<std::int64_t>(plane) * h * w;
      v = -INFINITY;
      for (int a = 0; a < r; ++a)
        for (int s = 0; s < r; ++s) {
          const int iy = oy * stride - pad + a, ix = ox * stride - pad + s;
          if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
          v = fmaxf(v, p[iy * w + ix]);
        }
      break;
    }
    case Kind::global_avg_pool: {
      const float* p = x + static_cast<std::int64_t>(item) * h * w;  // item = n * c + channel
#if defined(__CUDA_ARCH__)
#pragma unroll 16
#endif
      for (int j = 0; j < h * w; ++j) v += p[j];
      v = v / static_cast<float>(h * w);
      break;
    }
    case Kind::log_softmax: {
      const float* row = x + item64 * d.k;
      float* y = out_at(b, d.out) + item64 * d.k;
      float m = -INFINITY;
      for (std::int64_t j = 0; j < d.k; ++j) m = fmaxf(m, row[j]);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < d.k; ++j) sum += expf(row[j] - m);
      const float lse = logf(sum);
      for (std::int64_t j = 0; j < d.k; ++j) y[j] = (row[j] - m) - lse;
      return;
    }
    default: return;
  }
  out_at(b, d.out)[item] = v;
}

// ---- every kind: the steps of a tile, and step s of thread t.
DLB_OK_HD inline int steps(const Layer& d) {
  switch (d.kind) {
    case Kind::conv: return d.slices > 1 ? 3 : 2;
    case Kind::fc: return kTreeSteps + 2;
    default: return 1;
  }
}

DLB_OK_HD inline void step(const Layer& d, const Buffers& b, std::int64_t tile, float* smem, int s, int t) {
  switch (d.kind) {
    case Kind::conv: {
      const ConvTile g = conv_tile(d, tile);
      if (s == 0) {
        conv_stage(d, b, g, smem, t);
      } else if (s == 1) {
        switch (d.per_thread) {
          case 1: conv_sum_r<1>(d, b, g, smem, t); return;
          case 2: conv_sum_r<2>(d, b, g, smem, t); return;
          case 4: conv_sum_r<4>(d, b, g, smem, t); return;
          default: conv_sum_r<8>(d, b, g, smem, t); return;
        }
      } else {
        conv_join(d, b, g, smem, t);
      }
      return;
    }
    case Kind::fc: fc_step(d, b, tile, smem, s, t); return;
    default: {
      const std::int64_t item = tile * kThreads + t;
      if (item < d.items) element(d, b, item);
      return;
    }
  }
}

// The walk over layers [first, last) of one launch, shared by the kernel and
// the host twin so that both stamp the same points: before each layer that
// needs a grid-wide barrier, sync(slot) with the stamp slot it fills (1 for
// the first barrier, 2 for the next, ...; slot 0 is the launch's start),
// then run(i). The launch's first layer needs none: the kernel boundary
// orders it. Returns the number of barriers; the launch's end is slot
// barriers + 1, so a pass records barriers + 2 stamps and its phases (the
// layers between two stamps) are barriers + 1.
template <class Sync, class RunLayer>
DLB_OK_HD inline int walk(const Layer* layers, int first, int last, Sync&& sync, RunLayer&& run) {
  int slot = 0;
  for (int i = first; i < last; ++i) {
    if (i > first && layers[i].barrier != 0) sync(++slot);
    run(i);
  }
  return slot;
}

}  // namespace dlb::nn::ok
