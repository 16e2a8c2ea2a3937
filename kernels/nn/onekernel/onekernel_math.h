// gpu_onekernel's arithmetic (nn_onekernel.h): the per-layer descriptors of
// its device program and what one warp computes for one output element,
// compiled for the kernel (nn_gpu_onekernel.cu) and for its host twin
// (nn_onekernel_host.cpp), which runs the same functions over the same work
// items so that the CPU tests check the indexing without a GPU.
//
// Work item = one output element (NCHW, or one row of log-softmax). A warp
// takes an item: lane l sums the products j = l, l + 32, ... of the item's
// reduction (conv: c x r x r, fc: the input row, pools: the window / plane)
// with explicit fmaf, the 32 partial values are combined by a butterfly
// (xor 16, 8, 4, 2, 1: add, or max for max-pool), and lane 0 adds bias and
// residual, applies ReLU and stores. The host twin runs the same butterfly
// on an array of 32, so both compute the same bits (log-softmax's expf /
// logf aside).
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
inline constexpr int kLanes = 32;

struct Layer {
  Kind kind = Kind::conv;
  std::int32_t relu = 0;
  std::int64_t batch = 0;
  std::int64_t c = 0, h = 0, w = 0, k = 0, oh = 0, ow = 0;
  std::int64_t window = 1, stride = 1, pad = 0;
  std::int64_t weight = -1, bias = -1;  // offsets into the parameter buffer (conv, fc), or -1
  std::int64_t in = kNone, residual = kNone, out = kNone;
  std::int64_t items = 0;  // work items: batch x k x oh x ow (log-softmax: batch rows)
  // 1: a grid-wide barrier before this layer (it reads an output written
  // since the last one); 0: it runs in the same phase as the layer before
  // (ResNet's downsample conv beside its block's first conv: both read the
  // block's input). No region is written twice, so reads are the only hazard.
  std::int32_t barrier = 1;
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

// The length of an item's reduction.
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

DLB_OK_HD inline float identity(const Layer& d) { return d.kind == Kind::max_pool ? -INFINITY : 0.0f; }

DLB_OK_HD inline float combine(const Layer& d, float a, float b) {
  return d.kind == Kind::max_pool ? fmaxf(a, b) : a + b;
}

// Lane `lane`'s partial value of item `item` (item < d.items, not
// log-softmax). Indices in 32 bits (the program builder checks that every
// tensor fits): 64-bit division is a long software sequence on a GPU.
DLB_OK_HD inline float partial(const Layer& d, const Buffers& b, std::int64_t item64, int lane) {
  const float* x = at(b, d.in);
  const int item = static_cast<int>(item64), total = static_cast<int>(reduction(d));
  const int c = static_cast<int>(d.c), h = static_cast<int>(d.h), w = static_cast<int>(d.w);
  const int k = static_cast<int>(d.k), oh = static_cast<int>(d.oh), ow = static_cast<int>(d.ow);
  const int r = static_cast<int>(d.window), stride = static_cast<int>(d.stride), pad = static_cast<int>(d.pad);
  float acc = identity(d);
  switch (d.kind) {
    case Kind::conv: {
      const int ox = item % ow, oy = (item / ow) % oh, o = (item / (ow * oh)) % k, n = item / (ow * oh * k);
      const float* wt = b.params + d.weight + static_cast<std::int64_t>(o) * total;
      const float* image = x + static_cast<std::int64_t>(n) * c * h * w;
      const int rr = r * r;
      for (int j = lane; j < total; j += kLanes) {
        const int ci = j / rr, a = (j % rr) / r, s = j % r;
        const int iy = oy * stride - pad + a, ix = ox * stride - pad + s;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
        acc = fmaf(image[(ci * h + iy) * w + ix], wt[j], acc);
      }
      break;
    }
    case Kind::fc: {
      const int o = item % k, n = item / k;
      const float* wt = b.params + d.weight + static_cast<std::int64_t>(o) * total;
      const float* row = x + static_cast<std::int64_t>(n) * total;
      for (int j = lane; j < total; j += kLanes) acc = fmaf(row[j], wt[j], acc);
      break;
    }
    case Kind::max_pool: {
      const int ox = item % ow, oy = (item / ow) % oh, plane = item / (ow * oh);  // plane: n * c + channel
      const float* p = x + static_cast<std::int64_t>(plane) * h * w;
      for (int j = lane; j < total; j += kLanes) {
        const int iy = oy * stride - pad + j / r, ix = ox * stride - pad + j % r;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
        acc = fmaxf(acc, p[iy * w + ix]);
      }
      break;
    }
    case Kind::global_avg_pool: {
      const float* p = x + static_cast<std::int64_t>(item) * total;  // item = n * c + channel
      for (int j = lane; j < total; j += kLanes) acc += p[j];
      break;
    }
    case Kind::log_softmax: break;
  }
  return acc;
}

// Lane 0's store of the combined value v: bias, residual, ReLU (conv, fc),
// the mean (global average pool).
DLB_OK_HD inline void store(const Layer& d, const Buffers& b, std::int64_t item, float v) {
  if (d.kind == Kind::conv || d.kind == Kind::fc) {
    const std::int64_t o = d.kind == Kind::fc ? item % d.k : (item / (d.ow * d.oh)) % d.k;  // once per item
    v += b.params[d.bias + o];
    if (d.residual != kNone) v += at(b, d.residual)[item];
    if (d.relu != 0) v = fmaxf(v, 0.0f);
  } else if (d.kind == Kind::global_avg_pool) {
    v = v / static_cast<float>(d.h * d.w);
  }
  out_at(b, d.out)[item] = v;
}

// Log-softmax of row `item` (k values), by one thread.
DLB_OK_HD inline void log_softmax_row(const Layer& d, const Buffers& b, std::int64_t item) {
  const float* x = at(b, d.in) + item * d.k;
  float* y = out_at(b, d.out) + item * d.k;
  float m = -INFINITY;
  for (std::int64_t j = 0; j < d.k; ++j) m = fmaxf(m, x[j]);
  float s = 0.0f;
  for (std::int64_t j = 0; j < d.k; ++j) s += expf(x[j] - m);
  const float lse = logf(s);
  for (std::int64_t j = 0; j < d.k; ++j) y[j] = (x[j] - m) - lse;
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
