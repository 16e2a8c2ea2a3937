// The fp32 GEMM ceiling through cuBLAS, strict fp32 (CUBLAS_PEDANTIC_MATH: no
// TF32 tensor cores, whatever the environment says).
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/roofline/roofline.h"

namespace dlb {

Run prepare_sgemm_cublas(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b,
                         float* c, const Exec& exec) {
  auto handle = std::make_shared<CublasHandle>(exec.stream);
  DLB_CUBLAS_CHECK(cublasSetMathMode(handle->get(), CUBLAS_PEDANTIC_MATH));
  return [=] {
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major C = A*B is column-major C^T = B^T * A^T: swap the operands.
    DLB_CUBLAS_CHECK(cublasSgemm_64(handle->get(), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, n, a, k,
                                    &beta, c, n));
  };
}

}  // namespace dlb
