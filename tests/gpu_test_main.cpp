// main() for the GPU test binaries. Without a CUDA device they exit 77, which
// ctest (SKIP_RETURN_CODE 77) reports as skipped: never as passed; with
// DLB_REQUIRE_GPU=1 they fail instead.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <exception>

#include "kernels/common/gpu.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing needs no device: the GPU kit checks on a CPU machine that each
  // of its sanitizer filters selects the tests it names.
  if (::testing::GTEST_FLAG(list_tests)) return RUN_ALL_TESTS();
  // DLB_REQUIRE_GPU=1 (the GPU kit on a GPU machine): a missing device is a
  // failure, not a skip.
  const char* require = std::getenv("DLB_REQUIRE_GPU");
  const bool required = require != nullptr && std::string(require) == "1";
  try {
    if (dlb::gpu_count() == 0) {
      if (required) {
        std::fprintf(stderr, "no CUDA device, and DLB_REQUIRE_GPU=1 requires one: GPU tests failed\n");
        return 1;
      }
      std::printf("no CUDA device: GPU tests skipped\n");
      return 77;
    }
  } catch (const std::exception& e) {  // a GPU that cannot be used fails, it is not skipped
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return RUN_ALL_TESTS();
}
