// The suites' patterns on case names (bench/suites.cpp): what the gpu-quick
// suite leaves out at quick scale stays in the full suite. The names are the
// H200 run's (2026-11-27), without bench's time suffix, as suite_includes
// sees them; a GPU case is registered only on a GPU machine, so the
// patterns are checked here directly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/suites.h"
#include "kernels/common/error.h"

namespace dlb::bench {

// suites.cpp declares its --suite flag for bench --help through the
// harness's registry; the rest of the harness (timing, ceilings) is not
// what this test is about, so the registry is this one function here.
bool add_flag_help(const FlagHelp&) { return true; }

namespace {

const std::vector<std::string> kLeftOutOfGpuQuick = {
    "resnet20/gpu_hybrid_first_conv/batch:1024",  "resnet20/gpu_own/batch:1024",
    "mnist_cnn/gpu_own/batch:1024",               "mnist_lenet/gpu_own/batch:1024",
    "resnet20/gpu_cudnn_fused/batch:1024",        "mnist_cnn/gpu_cudnn_fused/batch:1024",
    // fp32 gpu_cudnn_fused at every batch (7.6x slower than gpu_cudnn_graph on the H200)
    "resnet20/gpu_cudnn_fused/batch:64",          "resnet20/gpu_cudnn_fused/batch:1",
    "mnist_lenet/gpu_cudnn_fused/batch:64",
    "copy/gpu_h2d_pageable_sync/bytes:1073741824", "copy/gpu_h2d_pageable_async/bytes:1073741824",
    "copy/gpu_d2h_pageable_sync/bytes:1073741824", "copy/gpu_d2h_pageable_async/bytes:1073741824",
};

const std::vector<std::string> kInGpuQuick = {
    "resnet20/gpu_hybrid_first_conv/batch:64",    "resnet20/gpu_hybrid_first_conv/batch:1",
    "resnet20/gpu_own/batch:64",                  "resnet20/gpu_own_s8/batch:1024",
    "resnet20/gpu_own_mma_s8/batch:1024",         "resnet20/gpu_cudnn_fused_f16/batch:64",
    "mnist_cnn/gpu_cudnn_fused_f16/batch:1",
    "resnet20/gpu_cudnn_fused_f16/batch:1024",    "mnist_lenet/gpu_cudnn_fused_f16/batch:1024",
    "resnet20/gpu_cudnn/batch:1024",              "resnet20/gpu_onekernel/batch:1",
    "copy/gpu_h2d_pageable_sync/bytes:268435456", "copy/gpu_h2d_pinned_sync/bytes:1073741824",
    "copy/gpu_d2h_registered_async/bytes:1073741824", "copy/gpu_h2d_wc_async/bytes:1073741824",
    "copy/gpu_d2d/bytes:1073741824",              "copy/gpu_register_cost/bytes:1073741824",
    "copy/gpu_serial_pageable/chunks:16/bytes:67108864",
    // issue 44's TF32 row, at the batches its target is measured at
    "resnet20/gpu_cudnn_graph_tf32/batch:1",      "resnet20/gpu_cudnn_graph_tf32/batch:64",
    "resnet20/gpu_cudnn_graph_tf32/batch:1024",
};

TEST(Suites, GpuQuickLeavesOutTheSlowestCasesAtQuickScale) {
  select_suite("gpu-quick");
  for (const auto& name : kLeftOutOfGpuQuick) EXPECT_FALSE(suite_includes(name)) << name;
  for (const auto& name : kInGpuQuick) EXPECT_TRUE(suite_includes(name)) << name;
  EXPECT_FALSE(suite_includes("resnet20/gpu_onekernel/batch:1024"));
  EXPECT_FALSE(suite_includes("resnet20/cpu_onednn/batch:64"));
}

TEST(Suites, TheFullSuiteKeepsWhatGpuQuickLeavesOut) {
  select_suite("full");
  for (const auto& name : kLeftOutOfGpuQuick) EXPECT_TRUE(suite_includes(name)) << name;
  select_suite("default");
  for (const auto& name : kInGpuQuick) EXPECT_TRUE(suite_includes(name)) << name;
}

TEST(Suites, AnUnknownSuiteNamesTheKnownOnes) {
  try {
    select_suite("gpu-fast");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu-quick"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dlb::bench
