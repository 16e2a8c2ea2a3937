// See max_pool_blocked16.h.
#include "kernels/conv/max_pool_blocked16.h"

#include "kernels/common/error.h"

namespace dlb {
namespace {

constexpr int kLanes = 16;

// A 16-channel group is two halves of 8 lanes (`half` floats apart): each
// half one 8-float vector (blocked16.h's half8), so that the masks below
// compile to compares and ands.
using half8::read;
using half8::v8;
using half8::write;
using m8 = int __attribute__((vector_size(32)));
// The forward's maximum, and the backward's: the same operations.
inline v8 larger(v8 a, v8 b) { return a > b ? a : b; }
inline v8 window_max(v8 a, v8 b, v8 c, v8 d) { return larger(larger(a, b), larger(c, d)); }
inline v8 keep(v8 v, m8 mask) { return reinterpret_cast<v8>(reinterpret_cast<m8>(v) & mask); }

// body(image, group, oy) for every output row of every 16-channel group,
// the rows split among the threads, after the shape's check.
template <class Body>
void for_each_row(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, int threads, Body body) {
  DLB_REQUIRE(max_pool2x2_accepts(c, h, w),
              "2x2 max pool on 16-channel groups: needs channels in multiples of 16 and an input of at least 2x2");
  const std::int64_t oh = h / 2, groups = c / kLanes;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t row = 0; row < n * groups * oh; ++row) body(row / (groups * oh), row / oh % groups, row % oh);
}

}  // namespace

bool max_pool2x2_accepts(std::int64_t c, std::int64_t h, std::int64_t w) {
  return c > 0 && c % kLanes == 0 && h >= 2 && w >= 2;
}

void max_pool2x2_forward(const float* x, const Blocked16& x_at, std::int64_t n, std::int64_t c, std::int64_t h,
                         std::int64_t w, float* y, const Blocked16& y_at, int threads) {
  const std::int64_t ow = w / 2;
  for_each_row(n, c, h, w, threads, [&](std::int64_t i, std::int64_t group, std::int64_t oy) {
    const float* in = x + i * x_at.image + x_at.channel(group * kLanes);
    float* out = y + i * y_at.image + y_at.channel(group * kLanes);
    for (std::int64_t ox = 0; ox < ow; ++ox)
      for (int part = 0; part < 2; ++part) {
        const float* p = in + (2 * oy * w + 2 * ox) * x_at.pixel + part * x_at.half;
        write(out + (oy * ow + ox) * y_at.pixel + part * y_at.half,
              window_max(read(p), read(p + x_at.pixel), read(p + w * x_at.pixel), read(p + (w + 1) * x_at.pixel)));
      }
  });
}

void max_pool2x2_backward(const float* x, const Blocked16& x_at, const float* dy, const Blocked16& dy_at,
                          std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, float* dx,
                          const Blocked16& dx_at, int threads) {
  const std::int64_t oh = h / 2, ow = w / 2;
  for_each_row(n, c, h, w, threads, [&](std::int64_t i, std::int64_t group, std::int64_t oy) {
    const float* in = x + i * x_at.image + x_at.channel(group * kLanes);
    const float* grad = dy + i * dy_at.image + dy_at.channel(group * kLanes);
    float* out = dx + i * dx_at.image + dx_at.channel(group * kLanes);
    for (std::int64_t ox = 0; ox < ow; ++ox)
      for (int part = 0; part < 2; ++part) {
        const std::int64_t at = 2 * oy * w + 2 * ox, xh = part * x_at.half, dh = part * dx_at.half;
        const float* p = in + at * x_at.pixel + xh;
        // The window's four, row-major, and their output's gradient.
        const v8 e0 = read(p), e1 = read(p + x_at.pixel), e2 = read(p + w * x_at.pixel),
                 e3 = read(p + (w + 1) * x_at.pixel), m = window_max(e0, e1, e2, e3),
                 dm = read(grad + (oy * ow + ox) * dy_at.pixel + part * dy_at.half);
        // The first element equal to the maximum.
        const m8 t0 = e0 == m, t1 = (e1 == m) & ~t0, t2 = (e2 == m) & ~t0 & ~t1, t3 = ~(t0 | t1 | t2);
        float* q = out + at * dx_at.pixel + dh;
        write(q, keep(dm, t0));
        write(q + dx_at.pixel, keep(dm, t1));
        write(q + w * dx_at.pixel, keep(dm, t2));
        write(q + (w + 1) * dx_at.pixel, keep(dm, t3));
      }
    // The column past 2 ow and, on the last output row, the row past 2 oh:
    // read by no window, their gradient zero.
    for (std::int64_t r = 2 * oy; r < (oy + 1 == oh ? h : 2 * oy + 2); ++r)
      for (std::int64_t col = (r < 2 * oh ? 2 * ow : 0); col < w; ++col)
        for (const std::int64_t dh : {std::int64_t{0}, dx_at.half}) write(out + (r * w + col) * dx_at.pixel + dh, v8{});
  });
}

}  // namespace dlb
