// How this binary was built, for the JSON context.
#pragma once

namespace dlb::build {

const char* git_commit();          // "<sha>", "<sha>-dirty" or "unknown"
const char* build_type();          // CMAKE_BUILD_TYPE
const char* cxx_compiler();        // "GNU 12.2.0"
const char* cuda_compiler();       // "NVIDIA 13.0.88", or "none"
const char* cuda_architectures();  // CMAKE_CUDA_ARCHITECTURES, or "none"
bool native();                     // DLB_NATIVE: compiled with -march=native
bool planted_slowdown();           // DLB_PLANTED_SLOWDOWN: a test build with a known regression

}  // namespace dlb::build
