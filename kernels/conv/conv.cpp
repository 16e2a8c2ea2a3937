#include "kernels/conv/conv.h"

#include "kernels/common/error.h"

#if DLB_HAVE_CUDNN
#include "kernels/conv/conv_cudnn.h"
#endif

namespace dlb {

void validate_conv_shape(const ConvShape& p) {
  const std::string where = "conv shape " + p.descriptor() + ": ";
  for (const auto& [name, value] : {std::pair<const char*, std::int64_t>{"n", p.n}, {"c", p.c}, {"h", p.h},
                                    {"w", p.w}, {"k", p.k}, {"r", p.r}, {"s", p.s}, {"stride", p.stride}}) {
    if (value < 1) throw Error(where + name + " must be a positive integer, got " + std::to_string(value));
  }
  if (p.pad < 0) throw Error(where + "pad must be >= 0, got " + std::to_string(p.pad));
  if (p.r > p.h + 2 * p.pad || p.s > p.w + 2 * p.pad) {
    throw Error(where + "the " + std::to_string(p.r) + "x" + std::to_string(p.s) +
                " filter is larger than the padded " + std::to_string(p.h + 2 * p.pad) + "x" +
                std::to_string(p.w + 2 * p.pad) + " input: no output");
  }
  // Products in double: the int64 products of absurd inputs could overflow.
  constexpr double kMaxElements = 2147483647.0;  // int32 dimensions and offsets in cuDNN and oneDNN
  const auto product = [](std::initializer_list<std::int64_t> v) {
    double out = 1.0;
    for (auto e : v) out *= static_cast<double>(e);
    return out;
  };
  if (product({p.n, p.c, p.h, p.w}) > kMaxElements || product({p.k, p.c, p.r, p.s}) > kMaxElements ||
      product({p.n, p.k, p.oh(), p.ow()}) > kMaxElements) {
    throw Error(where + "a tensor of 2^31 elements or more (x, w or y): not supported");
  }
}

bool conv_is_3x3_stride1(const ConvArgs& args) {
  return args.shape.r == 3 && args.shape.s == 3 && args.shape.stride == 1;
}

// Tolerances (relative max-norm error, see reference/compare.h). Every row
// accumulates c*r*s products in fp32 (up to 576 in the default shapes);
// 1e-5 is DESIGN.md's bound for fp32 reductions of that length. Winograd
// F(2x2, 3x3) adds a few roundings in its transforms (factors 0.5, 1, -1:
// small, well-conditioned), which stays inside the same bound. GPU rows are
// strict fp32 (CUDNN_FMA_MATH, CUBLAS_PEDANTIC_MATH: no TF32), so the same
// bound applies to them.
static const ConvVariant kConvVariants[] = {
    {"cpu_direct", Device::cpu, prepare_conv_direct, 1e-5},
#if DLB_HAVE_EIGEN
    {"cpu_im2col", Device::cpu, prepare_conv_im2col, 1e-5},
#endif
    {"cpu_winograd", Device::cpu, prepare_conv_winograd, 1e-5, nullptr, conv_is_3x3_stride1},
#if DLB_HAVE_ONEDNN
    {"cpu_onednn_direct", Device::cpu, prepare_conv_onednn_direct, 1e-5},
    {"cpu_onednn_winograd", Device::cpu, prepare_conv_onednn_winograd, 1e-5},
    {"cpu_onednn_auto", Device::cpu, prepare_conv_onednn_auto, 1e-5},
    {"cpu_onednn_auto_blocked", Device::cpu, prepare_conv_onednn_auto_blocked, 1e-5},
#endif
#if DLB_HAVE_CUDNN
    {"gpu_cudnn_implicit_gemm", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM>, 1e-5},
    {"gpu_cudnn_implicit_precomp_gemm", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM>, 1e-5},
    {"gpu_cudnn_gemm", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_GEMM>, 1e-5},
    {"gpu_cudnn_direct", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_DIRECT>, 1e-5},
    {"gpu_cudnn_fft", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_FFT>, 1e-5},
    {"gpu_cudnn_fft_tiling", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING>, 1e-5},
    {"gpu_cudnn_winograd", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD>, 1e-5},
    {"gpu_cudnn_winograd_nonfused", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED>, 1e-5},
    {"gpu_cudnn_heuristic", Device::gpu, prepare_conv_cudnn_heuristic, 1e-5},
    {"gpu_cudnn_find", Device::gpu, prepare_conv_cudnn_find, 1e-5},
#endif
#if DLB_HAVE_CUDA
    {"gpu_im2col_cublas", Device::gpu, prepare_conv_im2col_cublas, 1e-5},
#endif
};

VariantTable<ConvArgs> conv_variants() { return kConvVariants; }

}  // namespace dlb
