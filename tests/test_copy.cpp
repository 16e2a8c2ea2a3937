// copy. Both binaries (no GPU needed): the variant table and every bad
// argument, which the cases reject before any CUDA call. The GPU binary
// (skipped, exit 77, without a device): every single-copy variant over tiny,
// odd and page-crossing sizes, byte for byte; register_cost; the chunk
// pipeline over odd lengths, chunk and stream counts; out of memory.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "bench/cases/copy_case.h"
#include "kernels/common/error.h"
#include "tests/test_device.h"

namespace dlb {
namespace {

const CopyVariant& variant_named(std::string_view name) {
  for (const auto& v : copy_variants())
    if (v.name == name) return v;
  throw Error("no copy variant " + std::string(name));
}

// Expects `body` to throw dlb::Error with `text` in its message.
template <class F>
void expect_error(F body, const std::string& text) {
  try {
    body();
    ADD_FAILURE() << "no error; expected one saying: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(CopyTable, IsTheProductOfKindsCallsAndDirectionsPlusD2d) {
  std::set<std::string> expected = {"gpu_d2d"};
  for (const Direction direction : {Direction::h2d, Direction::d2h}) {
    for (const auto& kind : host_kinds()) {
      if (kind.h2d_only && direction == Direction::d2h) continue;
      for (const auto& call : copy_calls()) {
        std::string name = "gpu_";
        name.append(direction_name(direction)).append("_").append(kind.name).append("_").append(call.name);
        expected.insert(name);
      }
    }
  }
  std::set<std::string> names;
  for (const auto& v : copy_variants()) {
    names.insert(v.name);
    EXPECT_EQ(v.host == nullptr, v.direction == Direction::d2d) << v.name;
    if (v.host != nullptr) {
      std::string composed = "gpu_";
      composed.append(direction_name(v.direction)).append("_").append(v.host->name).append("_").append(v.call->name);
      EXPECT_EQ(v.name, composed) << "the row's fields and its name disagree";
    }
  }
  EXPECT_EQ(names.size(), copy_variants().size()) << "duplicate names";
  EXPECT_EQ(names, expected);
  // What the tables hold today: h2d 4 kinds x 2 calls, d2h 3 kinds (no wc) x 2 calls, d2d.
  EXPECT_EQ(copy_variants().size(), 15u);
  for (const char* name : {"gpu_h2d_pageable_sync", "gpu_h2d_pinned_async", "gpu_h2d_wc_async",
                           "gpu_d2h_registered_sync", "gpu_d2h_pageable_async"})
    EXPECT_EQ(names.count(name), 1u) << name;
  EXPECT_EQ(names.count("gpu_d2h_wc_sync"), 0u);
}

TEST(CopyTable, UnknownHostKindIsAClearError) {
  EXPECT_EQ(host_kind("pinned").name, "pinned");
  expect_error([] { host_kind("huge"); }, "no host memory kind 'huge' (pageable, pinned, registered, wc)");
}

TEST(CopyBadInput, SizesAreCheckedBeforeAnything) {
  const auto& v = variant_named("gpu_h2d_pinned_sync");
  expect_error([&] { CopyCase c(v, 0); }, "copy: bytes must be >= 1, got 0");
  expect_error([&] { CopyCase c(v, -4096); }, "copy: bytes must be >= 1, got -4096");
  expect_error([] { RegisterCostCase c(0); }, "register_cost: bytes must be >= 1, got 0");
  const auto& pinned = host_kind("pinned");
  expect_error([&] { PipelineCase c(pinned, 2, 16, 4097); }, "multiple of 4 (fp32 elements), got 4097");
  expect_error([&] { PipelineCase c(pinned, 2, 16, 0); }, "multiple of 4 (fp32 elements), got 0");
  expect_error([] { PipelineCase c(host_kind("wc"), 2, 16, 4096); }, "'wc' is for h2d only");
}

#if DLB_TEST_GPU

// ------------------------------------------------------------ single copies

using CopyParam = std::tuple<const CopyVariant*, std::int64_t>;

class CopyTest : public ::testing::TestWithParam<CopyParam> {};

TEST_P(CopyTest, DataBackEqualsDataIn) {
  const auto& [variant, bytes] = GetParam();
  if (!variant->usable()) GTEST_SKIP() << variant->name << ": not available on this device";
  CopyCase c(*variant, bytes);
  auto result = c.validate();
  EXPECT_TRUE(result.ok) << variant->name << " bytes=" << bytes << ": " << result.summary();
  EXPECT_EQ(result.checked, static_cast<std::size_t>(bytes));
  EXPECT_EQ(result.max_rel_err, 0.0);
  // As timed: calls back to back on the same buffers, then checked again.
  for (int i = 0; i < 3; ++i) c.run();
  result = c.validate();
  EXPECT_TRUE(result.ok) << variant->name << " bytes=" << bytes << " after repeated calls: " << result.summary();
}

std::vector<const CopyVariant*> variant_pointers() {
  std::vector<const CopyVariant*> out;
  for (const auto& v : copy_variants()) out.push_back(&v);
  return out;
}

std::string copy_param_name(const ::testing::TestParamInfo<CopyParam>& info) {
  const auto& [variant, bytes] = info.param;
  return variant->name + "_bytes" + std::to_string(bytes);
}

// Sizes: tiny, odd, one page and one byte past it, and the two
// sizes off the 4 KiB grid (4097, 1 MiB + 3), up to 4 MiB + 1.
INSTANTIATE_TEST_SUITE_P(Sizes, CopyTest,
                         ::testing::Combine(::testing::ValuesIn(variant_pointers()),
                                            ::testing::Values<std::int64_t>(1, 7, 33, 1000, 4096, 4097, 65537,
                                                                            (1 << 20) + 3, (4 << 20) + 1)),
                         copy_param_name);

// ------------------------------------------------------------ register cost

TEST(RegisterCost, RegistersCopiesAndUnregisters) {
  if (!host_register_supported()) GTEST_SKIP() << "cudaHostRegister not supported on this device";
  for (const std::int64_t bytes : {std::int64_t{1}, std::int64_t{4097}, std::int64_t{(1 << 20) + 3}}) {
    RegisterCostCase c(bytes);
    EXPECT_TRUE(c.validate().ok) << "bytes=" << bytes;
    c.run();
    c.run();  // registering again after unregistering works
    const auto again = c.validate();
    EXPECT_TRUE(again.ok) << "bytes=" << bytes << ": " << again.summary();
  }
}

// ------------------------------------------------------------ the chunk pipeline

using PipelineParam = std::tuple<std::string, int, int, std::int64_t>;  // kind, streams, chunks, floats

class PipelineTest : public ::testing::TestWithParam<PipelineParam> {};

TEST_P(PipelineTest, OutputMatchesTheReference) {
  const auto& [kind, streams, chunks, floats] = GetParam();
  const auto& host = host_kind(kind);
  if (host.available != nullptr && !host.available()) GTEST_SKIP() << kind << ": not available on this device";
  PipelineCase c(host, streams, chunks, 4 * floats);
  auto result = c.validate();
  EXPECT_TRUE(result.ok) << result.summary();
  EXPECT_LE(result.max_rel_err, 1e-6);
  // As timed: calls back to back (each copies in afresh), then checked again.
  for (int i = 0; i < 3; ++i) c.run();
  result = c.validate();
  EXPECT_TRUE(result.ok) << "after repeated calls: " << result.summary();
}

std::string pipeline_param_name(const ::testing::TestParamInfo<PipelineParam>& info) {
  const auto& [kind, streams, chunks, floats] = info.param;
  return kind + "_streams" + std::to_string(streams) + "_chunks" + std::to_string(chunks) + "_n" +
         std::to_string(floats);
}

// Lengths below, at and above the chunk count, and not divisible by it.
INSTANTIATE_TEST_SUITE_P(Shapes, PipelineTest,
                         ::testing::Combine(::testing::Values("pageable", "pinned", "registered"),
                                            ::testing::Values(1, 2, 4), ::testing::Values(1, 3, 16),
                                            ::testing::Values<std::int64_t>(1, 7, 33, 1000, 4097, 1 << 20)),
                         pipeline_param_name);

TEST(PipelineBadInput, StreamsAndChunksAreChecked) {
  const auto& pinned = host_kind("pinned");
  expect_error([&] { PipelineCase c(pinned, 0, 16, 4096); }, "pipeline: streams must be >= 1, got 0");
  expect_error([&] { PipelineCase c(pinned, 2, 0, 4096); }, "pipeline: chunks must be >= 1, got 0");
}

// Not a performance test: the fraction must come out of the measured times
// as a number, measured once per case. Pinned memory on a GPU with a copy
// engine per direction overlaps: a fraction in a plausible range around 1.
// Pageable memory does not overlap, and its fraction has no lower bound:
// its denominator, t_serial - t_bound, is the small time of the stages
// other than the staged copy, so a pipeline a few percent slower than the
// serial schedule gives a large negative number (-0.61 on the H200 on
// 2026-11-28, the test binary alone on the GPU). It must not claim overlap.
TEST(PipelineOverlap, IsAFractionOfTheMeasuredTimes) {
  for (const char* kind : {"pageable", "pinned"}) {
    PipelineCase c(host_kind(kind), 4, 16, 16 << 20);
    ASSERT_TRUE(c.validate().ok) << kind;
    const double fraction = c.overlap_fraction();
    EXPECT_TRUE(std::isfinite(fraction)) << kind;
    EXPECT_LT(fraction, 1.5) << kind;
    if (std::string_view(kind) == "pinned") {
      EXPECT_GT(fraction, -0.5) << kind;
    } else {
      EXPECT_LT(fraction, 0.5) << kind << ": pageable copies are staged by the driver and do not overlap";
    }
    EXPECT_EQ(c.overlap_fraction(), fraction) << kind << ": measured once per case";
  }
}

// ------------------------------------------------------------ out of memory

// A size the GPU cannot hold is a dlb::Error with CUDA's own words (the
// benchmark skips the case with it), taken before any host memory; and it
// leaves no "last error" behind for the next launch check to report.
TEST(CopyOutOfMemory, IsAClearErrorAndLeavesNothingBehind) {
  std::size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  const auto huge = static_cast<std::int64_t>(2 * total);
  expect_error([&] { CopyCase c(variant_named("gpu_h2d_pinned_sync"), huge); }, "cudaErrorMemoryAllocation");
  expect_error([&] { PipelineCase c(host_kind("pinned"), 2, 16, huge); }, "cudaErrorMemoryAllocation");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  PipelineCase after(host_kind("pinned"), 2, 3, 4 * 4097);  // launches a kernel, checked
  EXPECT_TRUE(after.validate().ok);
}

#endif  // DLB_TEST_GPU

}  // namespace
}  // namespace dlb
