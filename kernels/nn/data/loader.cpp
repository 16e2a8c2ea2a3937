#include "kernels/nn/data/loader.h"

#include <algorithm>
#include <array>
#include <string>

#include "kernels/common/error.h"

namespace dlb::nn {

void load_batch(const Dataset& data, std::span<const std::int64_t> indices, const BatchFormat& f,
                const Augment& augment, std::uint64_t seed, int threads, float* out, std::uint8_t* labels) {
  DLB_REQUIRE(augment.pad >= 0, "load_batch: negative pad");
  DLB_REQUIRE(threads >= 0, "load_batch: negative thread count");
  DLB_REQUIRE(f.h >= data.h && f.w >= data.w, "load_batch: the network input is smaller than the images");
  DLB_REQUIRE(data.c == 1 || data.c == f.c, "load_batch: channel counts that cannot be matched");
  for (std::size_t i = 0; i < indices.size(); ++i)
    if (indices[i] < 0 || indices[i] >= data.n)
      throw Error("load_batch: index " + std::to_string(indices[i]) + " (batch position " + std::to_string(i) +
                  ") is outside the data set's " + std::to_string(data.n) + " images (" + data.source + ")");
  // The 256 normalized values, as network_input computes them.
  std::array<float, 256> value{};
  for (int p = 0; p < 256; ++p) value[static_cast<std::size_t>(p)] = (static_cast<float>(p) / 255.0f - f.mean) / f.std_dev;
  const std::int64_t top = (f.h - data.h) / 2, left = (f.w - data.w) / 2, n = static_cast<std::int64_t>(indices.size());
#pragma omp parallel for schedule(static) num_threads(std::max(threads, 1)) if (threads > 0)
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t index = indices[static_cast<std::size_t>(i)];
    const ImageAugment a = augment_of(seed, index, augment);
    labels[i] = data.labels[static_cast<std::size_t>(index)];
    for (std::int64_t ch = 0; ch < f.c; ++ch) {
      const std::uint8_t* src = data.pixels.data() + (index * data.c + (data.c == 1 ? 0 : ch)) * data.h * data.w;
      float* dst = out + (i * f.c + ch) * f.h * f.w;
      for (std::int64_t y = 0; y < f.h; ++y) {
        // Row y of the crop is row y + dy - pad of the centred image, row
        // y + dy - pad - top of the data set's.
        const std::int64_t sy = y + a.dy - augment.pad - top;
        float* row = dst + y * f.w;
        if (sy < 0 || sy >= data.h) {
          std::fill(row, row + f.w, 0.0f);
          continue;
        }
        const std::uint8_t* line = src + sy * data.w;
        const std::int64_t shift = a.dx - augment.pad - left;  // column x of the crop reads sx = x + shift
        for (std::int64_t x = 0; x < f.w; ++x) {
          const std::int64_t sx = (a.flip ? f.w - 1 - x : x) + shift;
          row[x] = sx >= 0 && sx < data.w ? value[line[sx]] : 0.0f;
        }
      }
    }
  }
}

}  // namespace dlb::nn
