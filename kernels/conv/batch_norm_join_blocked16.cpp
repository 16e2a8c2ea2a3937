// See batch_norm_join_blocked16.h.
#include "kernels/conv/batch_norm_join_blocked16.h"

#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/common/error.h"
#include "kernels/conv/conv_threads.h"

namespace dlb {
namespace {

constexpr int kLanes = 16;

// Half a 16-channel group at a time (blocked16.h's half8).
using half8::read;
using half8::v8;
using half8::write;

}  // namespace

void batch_norm_join_forward(const float* z, const Blocked16& z_at, const float* r, const Blocked16& r_at,
                             std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, const BatchNormJoin& p,
                             float* y, const Blocked16& y_at, int threads) {
  DLB_REQUIRE(n > 0 && h > 0 && w > 0 && c > 0 && c % kLanes == 0,
              "batch-norm join on 16-channel groups: needs channels in multiples of 16 and a non-empty input");
  DLB_REQUIRE(z != nullptr && r != nullptr && y != nullptr && p.mean != nullptr && p.variance != nullptr &&
                  p.gamma != nullptr && p.beta != nullptr,
              "batch-norm join: an input, the output, the statistics, gamma and beta are all needed");
  const std::int64_t halves = c / 8, pixels = h * w;
  // Per image and 8 channels (half a group), a run over the pixels.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t item = 0; item < n * halves; ++item) {
    const std::int64_t i = item / halves, ch = item % halves * 8;
    v8 mean, scale, beta;
    for (int lane = 0; lane < 8; ++lane) {
      mean[lane] = p.mean[ch + lane];
      scale[lane] = p.gamma[ch + lane] / std::sqrt(p.variance[ch + lane] + p.eps);
      beta[lane] = p.beta[ch + lane];
    }
    const float* zp = z + i * z_at.image + z_at.channel(ch);
    const float* rp = r + i * r_at.image + r_at.channel(ch);
    float* yp = y + i * y_at.image + y_at.channel(ch);
    const v8 zero{};
    for (std::int64_t px = 0; px < pixels; ++px) {
      v8 v = (read(zp + px * z_at.pixel) - mean) * scale + beta + read(rp + px * r_at.pixel);
      if (p.relu) v = v > zero ? v : zero;
      write(yp + px * y_at.pixel, v);
    }
  }
}

void batch_norm_join_backward(const float* dy, const Blocked16& dy_at, const float* y, const Blocked16& y_at,
                              const float* z, const Blocked16& z_at, std::int64_t n, std::int64_t c, std::int64_t h,
                              std::int64_t w, const BatchNormJoin& p, const BatchNormJoinGrads& g,
                              const Blocked16& d_at, const Blocked16& dz_at, int threads, BatchNormJoinWork& work) {
  DLB_REQUIRE(n > 0 && h > 0 && w > 0 && c > 0 && c % kLanes == 0,
              "batch-norm join backward on 16-channel groups: needs channels in multiples of 16 and a non-empty input");
  DLB_REQUIRE(dy != nullptr && y != nullptr && z != nullptr && p.mean != nullptr && p.variance != nullptr &&
                  p.gamma != nullptr && g.d != nullptr && g.dz != nullptr && g.dgamma != nullptr && g.dbeta != nullptr,
              "batch-norm join backward: the gradients, the kept output and input, the statistics and gamma are all "
              "needed");
  const std::int64_t halves = c / 8, pixels = h * w, items = n * halves;
  work.channels.resize(static_cast<std::size_t>(3 * c));
  float* const inv = work.channels.data();  // 1 / sqrt(variance + eps)
  float* const mean_d = inv + c;
  float* const mean_dx = inv + 2 * c;
  for (std::int64_t ch = 0; ch < c; ++ch) inv[ch] = 1.0f / std::sqrt(p.variance[ch] + p.eps);
  // Per thread, per channel: sum d, then sum d xhat (double).
  std::vector<double>& sums = work.sums;
  sums.assign(static_cast<std::size_t>(threads * 2 * c), 0.0);
  int team = 1;
  const auto at = [](const Blocked16& a, std::int64_t i, std::int64_t ch) { return i * a.image + a.channel(ch); };
#pragma omp parallel num_threads(threads)
  {
    const int thread = omp_get_thread_num();
    if (thread == 0) team = omp_get_num_threads();
    double* mine = sums.data() + thread * 2 * c;
    const auto [first, last] = thread_range(items, thread, omp_get_num_threads());
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t i = item / halves, ch = item % halves * 8;
      const v8 mean = read(p.mean + ch), s = read(inv + ch), zero{};
      const float* dyp = dy + at(dy_at, i, ch);
      const float* yp = y + at(y_at, i, ch);
      const float* zp = z + at(z_at, i, ch);
      float* dp = g.d + at(d_at, i, ch);
      v8 sd{}, sdx{};
      for (std::int64_t px = 0; px < pixels; ++px) {
        const v8 d = read(yp + px * y_at.pixel) > zero ? read(dyp + px * dy_at.pixel) : zero;
        write(dp + px * d_at.pixel, d);
        sd += d;
        sdx += d * ((read(zp + px * z_at.pixel) - mean) * s);
      }
      for (int lane = 0; lane < 8; ++lane) mine[ch + lane] += sd[lane], mine[c + ch + lane] += sdx[lane];
    }
  }
  const double m = static_cast<double>(n * pixels);
  for (std::int64_t ch = 0; ch < c; ++ch) {
    double sd = 0, sdx = 0;
    for (int t = 0; t < team; ++t) sd += sums[static_cast<std::size_t>(t * 2 * c + ch)], sdx += sums[static_cast<std::size_t>(t * 2 * c + c + ch)];
    g.dbeta[ch] = static_cast<float>(sd);
    g.dgamma[ch] = static_cast<float>(sdx);
    mean_d[ch] = static_cast<float>(sd / m);
    mean_dx[ch] = static_cast<float>(sdx / m);
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t item = 0; item < items; ++item) {
    const std::int64_t i = item / halves, ch = item % halves * 8;
    const v8 mean = read(p.mean + ch), s = read(inv + ch), md = read(mean_d + ch),
             mdx = read(mean_dx + ch);
    v8 gs;
    for (int lane = 0; lane < 8; ++lane) gs[lane] = p.gamma[ch + lane] * inv[ch + lane];
    const float* dp = g.d + at(d_at, i, ch);
    const float* zp = z + at(z_at, i, ch);
    float* out = g.dz + at(dz_at, i, ch);
    for (std::int64_t px = 0; px < pixels; ++px) {
      const v8 xhat = (read(zp + px * z_at.pixel) - mean) * s;
      write(out + px * dz_at.pixel, gs * (read(dp + px * d_at.pixel) - md - xhat * mdx));
    }
  }
}

}  // namespace dlb
