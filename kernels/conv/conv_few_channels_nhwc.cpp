#include "kernels/conv/conv_few_channels_nhwc.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/common/error.h"
#include "kernels/conv/conv_simd.h"
#include "kernels/conv/conv_threads.h"

namespace dlb {
namespace {

using simd::vfloat;
constexpr int kPixels = 8;  // output pixels a register block holds at most
// The pixels a block takes: 8 with AVX-512 (8 of 32 zmm registers), 4 with
// AVX2 (8 of 16 ymm registers: 8 pixels' 16 ymm accumulators spilled).
constexpr int kStep = simd::kRegisters == 1 ? kPixels : kPixels / 2;
constexpr std::int64_t kMaxTaps = 64;

// acc[t] for P pixels of one output row (P <= kPixels) and one block of 16
// output channels: the sum over the taps of plane[c][oy + ky][ox + t + kx]
// times the tap's 16 weights.
template <int P>
inline void block(std::int64_t plane, std::int64_t pw, std::int64_t c, std::int64_t r, const float* w,
                  const float* row, vfloat (&acc)[kPixels]) {
  for (int t = 0; t < P; ++t) acc[t] = vfloat{};
  for (std::int64_t ch = 0; ch < c; ++ch)
    for (std::int64_t ky = 0; ky < r; ++ky) {
      const float* in = row + ch * plane + ky * pw;
      for (std::int64_t kx = 0; kx < r; ++kx, w += simd::kLanes) {
        vfloat wv = simd::load(w);
        simd::in_registers(wv);  // once, not a load per pixel (conv_simd.h)
#pragma GCC unroll 8
        for (int t = 0; t < P; ++t) acc[t] = simd::fmadd(simd::splat(in[t + kx]), wv, acc[t]);
      }
    }
}

}  // namespace

bool FewChannelsNhwc::accepts(std::int64_t c, std::int64_t k, std::int64_t r, std::int64_t stride) {
  return stride == 1 && c >= 1 && r >= 1 && k >= 16 && k % 16 == 0 && c * r * r <= kMaxTaps;
}

FewChannelsNhwc::FewChannelsNhwc(const float* w, std::int64_t k, std::int64_t c, std::int64_t r, std::int64_t h,
                                 std::int64_t width, std::int64_t pad)
    : k_(k), c_(c), r_(r), h_(h), w_(width), pad_(pad), weights_(static_cast<std::size_t>(k * c * r * r)) {
  if (!accepts(c, k, r, 1)) throw Unsupported("few-channel NHWC conv: needs k a multiple of 16 and c r r <= 64");
  DLB_REQUIRE(h >= 1 && width >= 1 && pad >= 0 && out_h() >= 1 && out_w() >= 1,
              "few-channel NHWC conv: the input is smaller than the filter");
  const std::int64_t taps = c * r * r;
  for (std::int64_t o = 0; o < k; ++o)
    for (std::int64_t t = 0; t < taps; ++t)
      weights_.data()[((o / 16) * taps + t) * 16 + o % 16] = w[o * taps + t];
  scratch_ = std::make_unique<ThreadScratch>(c * (h + 2 * pad) * (width + 2 * pad) + kPixels);
}

FewChannelsNhwc::~FewChannelsNhwc() = default;

void FewChannelsNhwc::operator()(const float* x, std::int64_t n, const float* bias, bool relu, float* y) const {
  const std::int64_t ph = h_ + 2 * pad_, pw = w_ + 2 * pad_, plane = ph * pw, oh = out_h(), ow = out_w();
  const std::int64_t blocks = k_ / 16, taps = c_ * r_ * r_;
  const int threads = scratch_->threads();
  // Each thread keeps the padded planes of the image it is on (its items
  // are contiguous: an image's rows, then the next image's).
#pragma omp parallel num_threads(threads)
  {
    const auto [first, last] = thread_range(n * oh, omp_get_thread_num(), threads);
    float* planes = scratch_->of(omp_get_thread_num());
    std::int64_t image = -1;
    for (std::int64_t item = first; item < last; ++item) {
      const std::int64_t i = item / oh, oy = item % oh;
      if (i != image) {
        image = i;
        // The padding is zero from the scratch's allocation: only the
        // interior is written, every time.
        for (std::int64_t ch = 0; ch < c_; ++ch)
          for (std::int64_t row = 0; row < h_; ++row)
            std::memcpy(planes + ch * plane + (row + pad_) * pw + pad_, x + ((i * c_ + ch) * h_ + row) * w_,
                        static_cast<std::size_t>(w_) * sizeof(float));
      }
      float* out_row = y + (i * oh + oy) * ow * k_;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const float* w = weights_.data() + b * taps * 16;
        vfloat bv{};
        if (bias != nullptr) bv = simd::load(bias + b * 16);
        for (std::int64_t ox = 0; ox < ow; ox += kStep) {
          const int p = static_cast<int>(std::min<std::int64_t>(kStep, ow - ox));
          vfloat acc[kPixels];
          const float* row = planes + oy * pw + ox;
          if (p == kStep)
            block<kStep>(plane, pw, c_, r_, w, row, acc);
          else
            switch (p) {
              case 1: block<1>(plane, pw, c_, r_, w, row, acc); break;
              case 2: block<2>(plane, pw, c_, r_, w, row, acc); break;
              case 3: block<3>(plane, pw, c_, r_, w, row, acc); break;
              case 4: block<4>(plane, pw, c_, r_, w, row, acc); break;
              case 5: block<5>(plane, pw, c_, r_, w, row, acc); break;
              case 6: block<6>(plane, pw, c_, r_, w, row, acc); break;
              default: block<7>(plane, pw, c_, r_, w, row, acc); break;
            }
          for (int t = 0; t < p; ++t) {
            vfloat v = acc[t] + bv;
            if (relu) v = simd::relu(v);
            simd::store(out_row + (ox + t) * k_ + b * 16, v);
          }
        }
      }
    }
  }
}

}  // namespace dlb
