#include "kernels/softmax/softmax.h"

namespace dlb {

// Tolerance 1e-5 for every row, on the row-wise max-norm relative error (see
// bench/cases/softmax_case.h): outputs are in [0, 1] and each is
// exp(x - max) / sum with an fp32 exp (a few ulp, ~3e-7) and an fp32 sum of
// cols terms, the fp32 bound of docs/architecture.md for reductions of moderate length.
// The sums decide: cpu_fused's is compensated and cpu_naive's in double
// (both <= 4e-7 in the default suite), Eigen and oneDNN sum in vector lanes
// (up to 3.4e-6 and 6.4e-6 there, at cols 4096), the GPU kernels in
// per-thread runs of at most ~1000 terms and then trees.
static const SoftmaxVariant kSoftmaxVariants[] = {
    {"cpu_naive", Device::cpu, prepare_softmax_naive, 1e-5},
    {"cpu_fused", Device::cpu, plain<softmax_fused<SoftmaxKind::softmax>>, 1e-5},
#if DLB_HAVE_EIGEN
    {"cpu_eigen", Device::cpu, plain<softmax_eigen>, 1e-5, nullptr, nullptr, 1},
#endif
#if DLB_HAVE_ONEDNN
    {"cpu_onednn", Device::cpu, prepare_softmax_onednn<SoftmaxKind::softmax>, 1e-5},
#endif
#if DLB_HAVE_CUDA
    {"gpu_naive", Device::gpu, prepare_softmax_naive_gpu, 1e-5},
    {"gpu_fused", Device::gpu, on_stream<launch_softmax_fused<SoftmaxKind::softmax>>, 1e-5},
    {"gpu_online", Device::gpu, on_stream<launch_softmax_online<SoftmaxKind::softmax>>, 1e-5},
#endif
#if DLB_HAVE_CUDNN
    {"gpu_cudnn", Device::gpu, prepare_softmax_cudnn<SoftmaxKind::softmax>, 1e-5},
#endif
};

// Same bound: log-softmax is (x - max) - log(sum), whose error is the sum's
// relative error (absolute in log space) plus one rounding, measured against
// the row's largest |output|.
static const SoftmaxVariant kLogSoftmaxVariants[] = {
    {"cpu_fused", Device::cpu, plain<softmax_fused<SoftmaxKind::log_softmax>>, 1e-5},
#if DLB_HAVE_ONEDNN
    {"cpu_onednn", Device::cpu, prepare_softmax_onednn<SoftmaxKind::log_softmax>, 1e-5},
#endif
#if DLB_HAVE_CUDA
    {"gpu_fused", Device::gpu, on_stream<launch_softmax_fused<SoftmaxKind::log_softmax>>, 1e-5},
    {"gpu_online", Device::gpu, on_stream<launch_softmax_online<SoftmaxKind::log_softmax>>, 1e-5},
#endif
#if DLB_HAVE_CUDNN
    {"gpu_cudnn", Device::gpu, prepare_softmax_cudnn<SoftmaxKind::log_softmax>, 1e-5},
#endif
};

const char* softmax_op_name(SoftmaxKind kind) {
  return kind == SoftmaxKind::softmax ? "softmax" : "log_softmax";
}

VariantTable<SoftmaxArgs> softmax_variants(SoftmaxKind kind) {
  if (kind == SoftmaxKind::softmax) return kSoftmaxVariants;
  return kLogSoftmaxVariants;
}

}  // namespace dlb
