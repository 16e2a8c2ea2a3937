// daxpy through cuBLAS (cublasDaxpy, 64-bit length API).
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/daxpy/daxpy.h"

namespace dlb {

Run prepare_daxpy_cublas(const DaxpyArgs& args, const Exec& exec) {
  auto handle = std::make_shared<CublasHandle>(exec.stream);
  DLB_CUBLAS_CHECK(cublasSetPointerMode(handle->get(), CUBLAS_POINTER_MODE_HOST));
  return [args, handle] {
    DLB_CUBLAS_CHECK(cublasDaxpy_64(handle->get(), args.n, &args.a, args.x, 1, args.y, 1));
  };
}

}  // namespace dlb
