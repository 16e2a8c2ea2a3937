// softmax through cuDNN: cudnnSoftmaxForward over an NCHW [rows, cols, 1, 1]
// tensor in mode INSTANCE (over C, H, W for each N: one row), algorithm
// ACCURATE (max subtracted first) or LOG. Handle and descriptor are made once.
#include <climits>
#include <memory>

#include "kernels/common/cuda_resources.h"
#include "kernels/common/cudnn_resources.h"
#include "kernels/softmax/softmax.h"

namespace dlb {

template <SoftmaxKind K>
Run prepare_softmax_cudnn(const SoftmaxArgs& args, const Exec& exec) {
  if (args.rows > INT_MAX || args.cols > INT_MAX) throw Unsupported("cuDNN takes int tensor dimensions");
  auto handle = std::make_shared<CudnnHandle>(exec.stream);
  auto desc = std::make_shared<CudnnTensorDesc>(static_cast<int>(args.rows), static_cast<int>(args.cols), 1, 1);
  constexpr cudnnSoftmaxAlgorithm_t algorithm =
      K == SoftmaxKind::softmax ? CUDNN_SOFTMAX_ACCURATE : CUDNN_SOFTMAX_LOG;
  return [args, handle, desc] {
    // beta = 0: y is not read (it holds NaN before the checked run).
    const float alpha = 1.0f, beta = 0.0f;
    DLB_CUDNN_CHECK(cudnnSoftmaxForward(handle->get(), algorithm, CUDNN_SOFTMAX_MODE_INSTANCE, &alpha, desc->get(),
                                        args.x, &beta, desc->get(), args.y));
  };
}

template Run prepare_softmax_cudnn<SoftmaxKind::softmax>(const SoftmaxArgs&, const Exec&);
template Run prepare_softmax_cudnn<SoftmaxKind::log_softmax>(const SoftmaxArgs&, const Exec&);

}  // namespace dlb
