// Which device a test binary covers: test sources are compiled once for the
// CPU variants and, in CUDA builds, once more for the GPU variants (the GPU
// binary defines DLB_TEST_GPU and is skipped, exit 77, without a device).
#pragma once

#include <string>

#include "kernels/common/variant.h"

#ifndef DLB_TEST_GPU
#define DLB_TEST_GPU 0
#endif

namespace dlb::test {

inline constexpr Device kDevice = DLB_TEST_GPU ? Device::gpu : Device::cpu;

// Test-name-safe variant names for parametrized tests.
template <class Args>
std::string variant_param_name(const Variant<Args>* v) {
  return std::string(v->name);
}

}  // namespace dlb::test
