#include "reference/conv.h"

#include <cstdint>

#include "kernels/common/error.h"

namespace dlb::ref {

void conv(const ConvShape& p, std::span<const float> x, std::span<const float> w, std::span<double> y) {
  DLB_REQUIRE(static_cast<std::int64_t>(x.size()) == p.x_size() &&
                  static_cast<std::int64_t>(w.size()) == p.w_size() &&
                  static_cast<std::int64_t>(y.size()) == p.y_size(),
              "reference conv: buffer sizes do not match the shape " + p.descriptor());
  const std::int64_t oh = p.oh(), ow = p.ow();
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t n = 0; n < p.n; ++n) {
    for (std::int64_t k = 0; k < p.k; ++k) {
      double* out = &y[static_cast<std::size_t>((n * p.k + k) * oh * ow)];
      for (std::int64_t i = 0; i < oh * ow; ++i) out[i] = 0.0;
      for (std::int64_t c = 0; c < p.c; ++c) {
        const float* in = &x[static_cast<std::size_t>((n * p.c + c) * p.h * p.w)];
        const float* filter = &w[static_cast<std::size_t>((k * p.c + c) * p.r * p.s)];
        for (std::int64_t r = 0; r < p.r; ++r) {
          for (std::int64_t s = 0; s < p.s; ++s) {
            const double weight = filter[r * p.s + s];
            for (std::int64_t i = 0; i < oh; ++i) {
              const std::int64_t row = i * p.stride + r - p.pad;
              if (row < 0 || row >= p.h) continue;
              for (std::int64_t j = 0; j < ow; ++j) {
                const std::int64_t col = j * p.stride + s - p.pad;
                if (col >= 0 && col < p.w) out[i * ow + j] += weight * in[row * p.w + col];
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace dlb::ref
