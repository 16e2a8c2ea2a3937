// Whether this test binary is the sanitizer build's (scripts/test --sanitize:
// AddressSanitizer and UndefinedBehaviorSanitizer), and the one way a test
// leaves its volume out of that build.
//
// The sanitizers look for invalid memory accesses and undefined behaviour in
// the code a test runs, not for wrong numbers: running the same kernels on
// 2,000 images instead of 17, or resnet20's step beside the small nets' and
// mnist_cnn's, finds nothing the short run does not, and costs minutes each
// at the sanitizers' 5-15x slowdown. Such a test skips there (shown as
// skipped, with the test that covers its code under the sanitizers named),
// and runs in full in the Release build, which CI runs first.
#pragma once

#include <gtest/gtest.h>

namespace dlb::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizer = true;
#else
inline constexpr bool kSanitizer = false;
#endif

}  // namespace dlb::test

// In a test body or SetUp: skips under the sanitizers, naming what covers
// the same code there.
#define DLB_SKIP_VOLUME_UNDER_SANITIZERS(covered_by)                                             \
  if (::dlb::test::kSanitizer)                                                                    \
  GTEST_SKIP() << "volume, run in the Release build; under the sanitizers the same code runs in " \
               << (covered_by)
