// daxpy: every variant of the device this binary covers, over tiny, odd and
// large n, with aligned, unaligned and differently aligned x and y. Exact
// against the reference (see reference/daxpy.h), but for Eigen, whose a*x
// the compiler may or may not contract into an FMA (daxpy.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>
#include <tuple>

#include "bench/cases/daxpy_case.h"
#include "bench/cases/roofline_case.h"
#include "kernels/common/error.h"
#include "kernels/roofline/roofline_memory.h"
#include "tests/test_device.h"

namespace dlb {
namespace {

using Param = std::tuple<const DaxpyVariant*, std::int64_t, std::size_t, std::size_t>;

class DaxpyTest : public ::testing::TestWithParam<Param> {};

TEST_P(DaxpyTest, MatchesReference) {
  const auto& [variant, n, x_offset, y_offset] = GetParam();
  DaxpyCase c(*variant, n, x_offset, y_offset);
  const auto result = c.validate();
  EXPECT_TRUE(result.ok) << variant->name << " n=" << n << ": " << result.summary();
  EXPECT_LE(result.max_rel_err, variant->tolerance);
}

TEST(DaxpyTable, ExactButForEigen) {
  for (const auto* v : usable_variants(daxpy_variants(), test::kDevice)) {
    if (v->name == "cpu_eigen") {
      EXPECT_EQ(v->tolerance, 0x1p-52) << "one rounding of a*x";
    } else {
      EXPECT_EQ(v->tolerance, 0.0) << v->name;
    }
  }
}

std::vector<const DaxpyVariant*> variants() { return usable_variants(daxpy_variants(), test::kDevice); }

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const auto& [variant, n, x_offset, y_offset] = info.param;
  return std::string(variant->name) + "_n" + std::to_string(n) + "_x" + std::to_string(x_offset) + "_y" +
         std::to_string(y_offset);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DaxpyTest,
    ::testing::Combine(::testing::ValuesIn(variants()),
                       ::testing::Values<std::int64_t>(0, 1, 2, 3, 7, 1000, 4097, 1 << 20),
                       ::testing::Values<std::size_t>(0, 1), ::testing::Values<std::size_t>(0, 1, 3)),
    param_name);

TEST(DaxpyTable, HasEveryVariantOfThisDevice) {
  std::vector<std::string> names;
  for (const auto* v : variants()) names.emplace_back(v->name);
  if (test::kDevice == Device::cpu) {
    EXPECT_NE(std::find(names.begin(), names.end(), "cpu_loop"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "cpu_omp"), names.end());
  } else {
    EXPECT_EQ(names.size(), 3u);
  }
}

TEST(DaxpyBadInput, NegativeLengthIsAClearError) {
  for (const auto* v : variants()) {
    try {
      DaxpyCase c(*v, -5);
      FAIL() << "no error for n = -5";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("n must be >= 0"), std::string::npos) << e.what();
    }
  }
}

#if DLB_TEST_GPU
// The GPU memory ceiling daxpy is read against (roofline/gpu_memory): every
// part exact over all of its output (validate() stops at the first that is
// not), and the part chosen the fastest of the choice. A sixth of the
// bench's 1.5 GiB a call; no timing is asserted (the GPU kit runs its test
// binaries side by side on one GPU). Unverified on hardware until the next
// GPU run.
TEST(GpuMemoryCeilingCase, EveryPartIsExactAndTheFastestIsChosen) {
  GpuMemoryCase c(static_cast<double>(std::int64_t{1} << 28));
  const auto result = c.validate();
  ASSERT_TRUE(result.ok) << result.summary();
  const auto& rates = c.part_rates();
  ASSERT_EQ(rates.size(), std::size(kGpuMemoryParts));
  const auto best = std::max_element(rates.begin(), rates.end()) - rates.begin();
  EXPECT_EQ(c.chosen(), kGpuMemoryParts[static_cast<std::size_t>(best)].name);
  for (std::size_t p = 0; p < rates.size(); ++p) EXPECT_GT(rates[p], 0.0) << kGpuMemoryParts[p].name;
  std::printf("gpu memory ceiling: %s", std::string(c.chosen()).c_str());
  for (std::size_t p = 0; p < rates.size(); ++p)
    std::printf("; %s %.0f GB/s", std::string(kGpuMemoryParts[p].name).c_str(), rates[p] * 1e-9);
  std::printf("\n");
}
#endif

}  // namespace
}  // namespace dlb
