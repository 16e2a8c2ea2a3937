// The fp32 GEMM ceiling through oneDNN's sgemm (its JIT kernels, all cores).
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "kernels/common/error.h"
#include "kernels/roofline/roofline.h"

namespace dlb {

void sgemm_onednn(std::int64_t m, std::int64_t n, std::int64_t k, const float* a, const float* b, float* c) {
  const dnnl_status_t status = dnnl_sgemm('N', 'N', m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
  if (status != dnnl_success)
    throw_error("dnnl_sgemm failed with status " + std::to_string(static_cast<int>(status)), __FILE__, __LINE__);
}

}  // namespace dlb
