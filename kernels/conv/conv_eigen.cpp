// cpu_im2col: the classic lowering. Per image, im2col writes the patches as
// a matrix col[c*r*s][oh*ow] (row (c, r, s) holds, for every output
// position, the input element under that tap, or 0 in the padding), and
// one GEMM gives the image's whole output, already NCHW:
//     y[n] [k, oh*ow] = w [k, c*r*s] * col [c*r*s, oh*ow]     (Eigen, row-major maps)
// At batch >= threads every thread takes whole images with its own col
// buffer and Eigen runs single-threaded inside the parallel region (Eigen
// does not nest its OpenMP threads); at smaller batches images go one by
// one, im2col split over channels and Eigen's GEMM on all threads.
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsics
// (_mm512_undefined_ps, GCC bug 105593) when Eigen's GEMM kernels inline
// them; a false positive, kept quiet for this file only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include <algorithm>
#include <memory>

#include "kernels/conv/conv.h"
#include "kernels/conv/conv_threads.h"

namespace dlb {
namespace {

// Rows [c_begin, c_end) * r * s of col for image `image` ([c, h, w]).
void im2col(const ConvShape& p, const float* image, std::int64_t c_begin, std::int64_t c_end, float* col) {
  const std::int64_t oh = p.oh(), ow = p.ow(), positions = oh * ow;
  for (std::int64_t c = c_begin; c < c_end; ++c) {
    for (std::int64_t r = 0; r < p.r; ++r) {
      for (std::int64_t s = 0; s < p.s; ++s) {
        float* dst = col + ((c * p.r + r) * p.s + s) * positions;
        // Output columns whose input column ow*stride + s - pad is inside [0, w).
        const std::int64_t lead = p.pad - s;  // input column = ow*stride - lead
        const std::int64_t ow_begin = std::clamp<std::int64_t>(lead > 0 ? (lead + p.stride - 1) / p.stride : 0, 0, ow);
        const std::int64_t last = p.w - 1 + lead;  // ow*stride <= last
        const std::int64_t ow_end = std::clamp<std::int64_t>(last < 0 ? 0 : last / p.stride + 1, ow_begin, ow);
        for (std::int64_t i = 0; i < oh; ++i, dst += ow) {
          const std::int64_t ih = i * p.stride + r - p.pad;
          if (ih < 0 || ih >= p.h) {
            std::fill(dst, dst + ow, 0.0f);
            continue;
          }
          const float* src = image + (c * p.h + ih) * p.w;
          std::fill(dst, dst + ow_begin, 0.0f);
          for (std::int64_t j = ow_begin; j < ow_end; ++j) dst[j] = src[j * p.stride - lead];
          std::fill(dst + ow_end, dst + ow, 0.0f);
        }
      }
    }
  }
}

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

void gemm(const ConvShape& p, const float* w, const float* col, float* y_image) {
  const std::int64_t taps = p.c * p.r * p.s, positions = p.oh() * p.ow();
  Eigen::Map<const RowMajor> weights(w, p.k, taps);
  Eigen::Map<const RowMajor> patches(col, taps, positions);
  Eigen::Map<RowMajor> out(y_image, p.k, positions);
  out.noalias() = weights * patches;
}

struct Im2colPlan {
  ConvShape p;
  std::unique_ptr<ThreadScratch> col;  // [c*r*s][oh*ow] per thread
};

void run_im2col(Im2colPlan& plan, const ConvArgs& args) {
  const ConvShape& p = plan.p;
  const std::int64_t image_in = p.c * p.h * p.w, image_out = p.k * p.oh() * p.ow();
  const int threads = plan.col->threads();
  if (p.n >= threads) {
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      const auto [first, last] = thread_range(p.n, t, omp_get_num_threads());
      for (std::int64_t n = first; n < last; ++n) {
        im2col(p, args.x + n * image_in, 0, p.c, plan.col->of(t));
        gemm(p, args.w, plan.col->of(t), args.y + n * image_out);
      }
    }
    return;
  }
  float* col = plan.col->of(0);
  for (std::int64_t n = 0; n < p.n; ++n) {
#pragma omp parallel num_threads(threads)
    {
      const auto [first, last] = thread_range(p.c, omp_get_thread_num(), omp_get_num_threads());
      im2col(p, args.x + n * image_in, first, last, col);
    }
    gemm(p, args.w, col, args.y + n * image_out);
  }
}

}  // namespace

Run prepare_conv_im2col(const ConvArgs& args, const Exec&) {
  validate_conv_shape(args.shape);
  auto plan = std::make_shared<Im2colPlan>();
  plan->p = args.shape;
  plan->col = std::make_unique<ThreadScratch>(args.shape.c * args.shape.r * args.shape.s * args.shape.oh() *
                                              args.shape.ow());
  return [plan, args] { run_im2col(*plan, args); };
}

}  // namespace dlb

#pragma GCC diagnostic pop
