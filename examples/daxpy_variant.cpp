// The recipe "A variant" of docs/architecture.md, compiled and run by ctest
// (example_daxpy_variant) so that it cannot drift from the code: the
// function and the table row below are what the recipe tells you to add to
// kernels/daxpy/daxpy_cpu.cpp and to kDaxpyVariants in kernels/daxpy/daxpy.cpp
// (test_docs checks that the recipe's lines are these). Here the row is
// checked the way bench checks every row before timing it (DaxpyCase's
// validate against the fp64 reference), over the sizes test_daxpy uses for
// the table's rows, odd lengths and unaligned pointers included; and a
// planted wrong row must be refused by the same check.
#include <cstdint>
#include <initializer_list>
#include <string>

#include "bench/cases/daxpy_case.h"
#include "examples/example_checks.h"
#include "kernels/daxpy/daxpy.h"

namespace dlb {

void daxpy_unroll4(const DaxpyArgs& args) {
  const std::int64_t n4 = args.n - args.n % 4;
  for (std::int64_t i = 0; i < n4; i += 4) {
    args.y[i] += args.a * args.x[i];
    args.y[i + 1] += args.a * args.x[i + 1];
    args.y[i + 2] += args.a * args.x[i + 2];
    args.y[i + 3] += args.a * args.x[i + 3];
  }
  for (std::int64_t i = n4; i < args.n; ++i) args.y[i] += args.a * args.x[i];
}

// Planted: drops the tail the unrolled loop does not cover.
void daxpy_unroll4_no_tail(const DaxpyArgs& args) {
  for (std::int64_t i = 0; i + 3 < args.n; i += 4)
    for (std::int64_t j = i; j < i + 4; ++j) args.y[j] += args.a * args.x[j];
}

const DaxpyVariant kRows[] = {
    {"cpu_unroll4", Device::cpu, plain<daxpy_unroll4>, 0.0, nullptr, nullptr, 1},
};
const DaxpyVariant kPlanted{"cpu_unroll4_planted", Device::cpu, plain<daxpy_unroll4_no_tail>, 0.0, nullptr, nullptr,
                            1};

}  // namespace dlb

int main() {
  using namespace dlb;
  example::Checks checks;
  for (const DaxpyVariant& row : kRows) {
    for (const std::int64_t n : {1, 3, 7, 1000, 4097, 1 << 20}) {
      for (const std::size_t offset : {0, 1}) {
        DaxpyCase c(row, n, offset, 2 * offset);
        const auto result = c.validate();
        checks.check(result.ok, std::string(row.name) + " n=" + std::to_string(n) +
                                    " offset=" + std::to_string(offset) + ": " + result.summary());
      }
    }
  }
  // The check must be able to fail: the planted row misses n % 4 elements.
  checks.planted(DaxpyCase(kPlanted, 7).validate().ok, "no tail");
  return checks.finish("example_daxpy_variant",
                       std::to_string(checks.checked()) + " problems checked and the planted row refused");
}
