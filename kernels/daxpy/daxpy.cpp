#include "kernels/daxpy/daxpy.h"

namespace dlb {

// Tolerance 0 (bit-exact): every element is one fused multiply-add, see
// reference/daxpy.h. Eigen writes no fma: it evaluates a*x, then + y. Where
// the build targets FMA hardware (-march=native on any x86 since 2013) the
// compiler fuses the two and Eigen is bit-exact too; otherwise the product
// is rounded on its own, an error of at most 2^-53 |a*x_i|, which for the
// seeded data (|a*x| < max|y_out|) is under 2^-52 of max|y_out|.
#if defined(__FMA__)
constexpr double kEigenTolerance = 0.0;
#else
constexpr double kEigenTolerance = 0x1p-52;
#endif

static const DaxpyVariant kDaxpyVariants[] = {
    {"cpu_loop", Device::cpu, plain<daxpy_loop>, 0.0},
    {"cpu_omp", Device::cpu, plain<daxpy_omp>, 0.0},
#if DLB_HAVE_EIGEN
    {"cpu_eigen", Device::cpu, plain<daxpy_eigen>, kEigenTolerance},
#endif
#if DLB_HAVE_CUDA
    {"gpu_naive", Device::gpu, on_stream<launch_daxpy_naive>, 0.0},
    {"gpu_vec", Device::gpu, on_stream<launch_daxpy_vec>, 0.0},
    {"gpu_cublas", Device::gpu, prepare_daxpy_cublas, 0.0},
#endif
};

VariantTable<DaxpyArgs> daxpy_variants() { return kDaxpyVariants; }

}  // namespace dlb
