#include "kernels/daxpy/daxpy.h"

namespace dlb {

// Tolerance 0 (bit-exact) for every row: see reference/daxpy.h.
static const DaxpyVariant kDaxpyVariants[] = {
    {"cpu_loop", Device::cpu, plain<daxpy_loop>, 0.0},
    {"cpu_omp", Device::cpu, plain<daxpy_omp>, 0.0},
#if DLB_HAVE_EIGEN
    {"cpu_eigen", Device::cpu, plain<daxpy_eigen>, 0.0},
#endif
#if DLB_HAVE_CUDA
    {"gpu_naive", Device::gpu, on_stream<launch_daxpy_naive>, 0.0},
    {"gpu_vec", Device::gpu, on_stream<launch_daxpy_vec>, 0.0},
    {"gpu_cublas", Device::gpu, prepare_daxpy_cublas, 0.0},
#endif
};

VariantTable<DaxpyArgs> daxpy_variants() { return kDaxpyVariants; }

}  // namespace dlb
