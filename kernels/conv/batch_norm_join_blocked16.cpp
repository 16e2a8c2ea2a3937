// See batch_norm_join_blocked16.h.
#include "kernels/conv/batch_norm_join_blocked16.h"

#include <cmath>
#include <cstring>

#include "kernels/common/error.h"

namespace dlb {
namespace {

constexpr int kLanes = 16;

// Half a 16-channel group: 8 floats (a ymm register), GCC's vector extension.
using v8 = float __attribute__((vector_size(32)));
inline v8 read(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void write(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }

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

}  // namespace dlb
