// daxpy in Eigen: the expression a user would write. Eigen vectorizes it with
// the ISA the build targets and uses FMA where the build has it.
#include <Eigen/Core>

#include "kernels/daxpy/daxpy.h"

namespace dlb {

void daxpy_eigen(const DaxpyArgs& args) {
  Eigen::Map<const Eigen::VectorXd> x(args.x, args.n);
  Eigen::Map<Eigen::VectorXd> y(args.y, args.n);
  y += args.a * x;
}

}  // namespace dlb
