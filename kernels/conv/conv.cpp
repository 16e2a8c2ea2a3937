#include "kernels/conv/conv.h"

#include "kernels/common/error.h"

#if DLB_HAVE_CUDNN
#include "kernels/conv/conv_cudnn.h"
#endif

namespace dlb {

bool conv_is_3x3_stride1(const ConvArgs& args) {
  return args.shape.r == 3 && args.shape.s == 3 && args.shape.stride == 1;
}

// Tolerances (relative max-norm error, see reference/compare.h). Every row
// accumulates c*r*s products in fp32 (up to 576 in the default shapes);
// 1e-5 is docs/architecture.md's bound for fp32 reductions of that length. Winograd
// F(2x2, 3x3) adds a few roundings in its transforms (factors 0.5, 1, -1:
// small, well-conditioned), which stays inside the same bound. F(4x4, 3x3)
// (cpu_winograd_nhwc) has larger factors (up to 8 and 1/24) and rounds more:
// measured at most 4.2e-6 (mnist conv2, 288 products per output), inside
// the bound with a margin of 2.4x. The stride-2 kernel
// (cpu_winograd_s2_nhwc: F(4, 2) per axis, factors up to 8 and 1/6, sums
// over 4c at most of its elements) measured at most 5.1e-6 with FMA (AVX2
// and AVX-512 builds) and 6.5e-6 without (more roundings), on uniform
// [-1, 1] data with up to 48 input channels (432 products per output),
// bias, residual sum and ReLU: inside the bound. GPU rows are
// strict fp32 (CUDNN_FMA_MATH, CUBLAS_PEDANTIC_MATH: no TF32), so the same
// bound applies to them.
#if DLB_HAVE_CUDNN
namespace {
// 1e-5 for 3x3, 4e-4 for other filters: cudnn_fp32_tolerance says why.
double winograd_nonfused_tolerance(const ConvArgs& args) {
  return cudnn_fp32_tolerance(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, args.shape.r, args.shape.s);
}
}  // namespace
#endif

static const ConvVariant kConvVariants[] = {
    {"cpu_direct", Device::cpu, prepare_conv_direct, 1e-5},
#if DLB_HAVE_EIGEN
    {"cpu_im2col", Device::cpu, prepare_conv_im2col, 1e-5},
#endif
    {"cpu_winograd", Device::cpu, prepare_conv_winograd, 1e-5, nullptr, conv_is_3x3_stride1},
    {"cpu_winograd_nhwc", Device::cpu, prepare_conv_winograd_nhwc, 1e-5, nullptr, conv_winograd_nhwc_accepts},
    {"cpu_winograd_s2_nhwc", Device::cpu, prepare_conv_winograd_s2_nhwc, 1e-5, nullptr, conv_winograd_s2_nhwc_accepts},
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
    {"gpu_cudnn_winograd_nonfused", Device::gpu, prepare_conv_cudnn_fixed<CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED>,
     1e-5, nullptr, nullptr, 0, winograd_nonfused_tolerance},
    {"gpu_cudnn_heuristic", Device::gpu, prepare_conv_cudnn_heuristic, 1e-5},
    {"gpu_cudnn_find", Device::gpu, prepare_conv_cudnn_find, 1e-5},
#endif
#if DLB_HAVE_CUDA
    {"gpu_im2col_cublas", Device::gpu, prepare_conv_im2col_cublas, 1e-5},
#endif
};

VariantTable<ConvArgs> conv_variants() { return kConvVariants; }

}  // namespace dlb
