#include "kernels/common/error.h"

namespace dlb {

void throw_error(const std::string& what, const char* file, int line) {
  // append() rather than operator+: GCC 12 at -O3 warns (-Wrestrict, a false
  // positive) on the chained form.
  std::string message = what;
  message.append(" at ").append(file).append(":").append(std::to_string(line));
  throw Error(message);
}

}  // namespace dlb
