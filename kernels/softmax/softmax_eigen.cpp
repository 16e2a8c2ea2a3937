// softmax in Eigen: the expression a user would write, with the row max and
// row sum evaluated once into vectors. Eigen vectorizes each step (its own
// exp) but runs them on one thread and one after another: three passes.
#include <Eigen/Core>

#include "kernels/softmax/softmax.h"

namespace dlb {

// GCC 12 warns (falsely, GCC bug 105593) that the _mm512_undefined_ps
// inside Eigen's AVX-512 max may be used uninitialized, once it is inlined
// here through rowwise().maxCoeff().
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
void softmax_eigen(const SoftmaxArgs& args) {
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const Matrix> x(args.x, args.rows, args.cols);
  Eigen::Map<Matrix> y(args.y, args.rows, args.cols);
  const Eigen::VectorXf row_max = x.rowwise().maxCoeff();
  y = (x.colwise() - row_max).array().exp();
  const Eigen::VectorXf row_sum = y.rowwise().sum();
  y.array().colwise() /= row_sum.array();
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace dlb
