// fp32 GEMM in Eigen: the expression a user writes, on row-major maps of the
// caller's buffers. Eigen blocks for the caches and, built with OpenMP, runs
// its GEMM on all cores.
// Eigen's AVX-512 GEMM packing inlines intrinsics whose undefined
// pass-through GCC 12 takes for an uninitialized read (GCC bug 105593): a
// false warning inside the library, silenced for its headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "kernels/gemm/gemm.h"

namespace dlb {

void gemm_eigen_f32(const GemmArgs& args) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const RowMajor> a(args.a, args.m, args.k);
  Eigen::Map<const RowMajor> b(args.b, args.k, args.n);
  Eigen::Map<RowMajor> c(args.c, args.m, args.n);
  c.noalias() = a * b;
}

}  // namespace dlb
