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
#include <cstdio>
#include <initializer_list>

#include "bench/cases/daxpy_case.h"
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
  int failures = 0, checked = 0;
  for (const DaxpyVariant& row : kRows) {
    for (const std::int64_t n : {1, 3, 7, 1000, 4097, 1 << 20}) {
      for (const std::size_t offset : {0, 1}) {
        DaxpyCase c(row, n, offset, 2 * offset);
        const auto result = c.validate();
        ++checked;
        if (!result.ok) {
          std::printf("FAIL: %s n=%lld offset=%zu: %s\n", std::string(row.name).c_str(), static_cast<long long>(n),
                      offset, result.summary().c_str());
          ++failures;
        }
      }
    }
  }
  // The check must be able to fail: the planted row misses n % 4 elements.
  DaxpyCase planted(kPlanted, 7);
  if (planted.validate().ok) {
    std::printf("FAIL: the planted row (no tail) passed validation\n");
    ++failures;
  }
  std::printf("example_daxpy_variant: %d problems checked and the planted row refused: %s\n", checked,
              failures == 0 ? "passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
