// GEMM through cuBLAS: strict fp32, TF32 tensor cores, fp16 tensor cores with
// fp32 accumulation. Row-major C = A*B is column-major C^T = B^T * A^T, so
// each call passes B first (the swap trick): no data is transposed.
// Device pointers; the timed call enqueues one cuBLAS call on the stream.
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/gemm/gemm.h"
#include "kernels/roofline/roofline.h"

namespace dlb {
namespace {

// C = A*B through cublasGemmEx with fp32 alpha, beta and C.
Run prepare_gemm_ex(const GemmArgs& args, const Exec& exec, const void* a, const void* b, cudaDataType input_type,
                    cublasComputeType_t compute) {
  auto handle = std::make_shared<CublasHandle>(exec.stream);
  return [args, a, b, input_type, compute, handle] {
    const float alpha = 1.0f, beta = 0.0f;
    // Column-major: C^T [n,m] (ld n) = B^T [n,k] (ld n) * A^T [k,m] (ld k).
    DLB_CUBLAS_CHECK(cublasGemmEx_64(handle->get(), CUBLAS_OP_N, CUBLAS_OP_N, args.n, args.m, args.k, &alpha, b,
                                     input_type, args.n, a, input_type, args.k, &beta, args.c, CUDA_R_32F, args.n,
                                     compute, CUBLAS_GEMM_DEFAULT));
  };
}

}  // namespace

// The roofline's fp32 GEMM ceiling is this very call (CUBLAS_PEDANTIC_MATH).
Run prepare_gemm_cublas_f32(const GemmArgs& args, const Exec& exec) {
  return prepare_sgemm_cublas(args.m, args.n, args.k, args.a, args.b, args.c, exec);
}

Run prepare_gemm_cublas_tf32(const GemmArgs& args, const Exec& exec) {
  return prepare_gemm_ex(args, exec, args.a, args.b, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32);
}

Run prepare_gemm_cublas_f16(const GemmArgs& args, const Exec& exec) {
  return prepare_gemm_ex(args, exec, args.a16, args.b16, CUDA_R_16F, CUBLAS_COMPUTE_32F);
}

}  // namespace dlb
