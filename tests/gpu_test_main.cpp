// main() for the GPU test binaries. Without a CUDA device they exit 77, which
// ctest (SKIP_RETURN_CODE 77) reports as skipped: never as passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <exception>

#include "kernels/common/gpu.h"

int main(int argc, char** argv) {
  try {
    if (dlb::gpu_count() == 0) {
      std::printf("no CUDA device: GPU tests skipped\n");
      return 77;
    }
  } catch (const std::exception& e) {  // a GPU that cannot be used fails, it is not skipped
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
