# The libFuzzer targets of fuzz/ (every parser of outside input), built with
# clang as an external project into <build>/fuzz/, and a short run of each
# from its committed seed corpus as a ctest test.
#   DLB_FUZZ=AUTO (default): when a clang++ that links -fsanitize=fuzzer is
#   found (scripts/setup installs clang and libclang-rt-dev); ON: required;
#   OFF: never.
set(DLB_FUZZ AUTO CACHE STRING "Build the libFuzzer targets of fuzz/ with clang: AUTO, ON or OFF")
set_property(CACHE DLB_FUZZ PROPERTY STRINGS AUTO ON OFF)
set(DLB_FUZZ_RUNS 4000 CACHE STRING "Executions of each fuzz target in its ctest test")

set(DLB_HAVE_FUZZ OFF)
if(NOT DLB_FUZZ STREQUAL "OFF")
  find_program(DLB_CLANGXX NAMES clang++ clang++-16 clang++-15 clang++-14)
  if(DLB_CLANGXX)
    set(_probe ${CMAKE_BINARY_DIR}/CMakeFiles/dlb_fuzz_probe.cpp)
    file(WRITE ${_probe} "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }\n")
    execute_process(COMMAND ${DLB_CLANGXX} -fsanitize=fuzzer ${_probe} -o ${CMAKE_BINARY_DIR}/CMakeFiles/dlb_fuzz_probe
                    RESULT_VARIABLE _probe_result OUTPUT_QUIET ERROR_QUIET)
    if(_probe_result EQUAL 0)
      set(DLB_HAVE_FUZZ ON)
    endif()
  endif()
  if(NOT DLB_HAVE_FUZZ)
    set(_why "no clang++ that links -fsanitize=fuzzer (install clang and libclang-rt-dev; scripts/setup does)")
    if(DLB_FUZZ STREQUAL "ON")
      message(FATAL_ERROR "DLB_FUZZ=ON: ${_why}")
    endif()
    message(STATUS "dlbench: fuzz targets not built: ${_why}")
  endif()
endif()

if(DLB_HAVE_FUZZ)
  include(ExternalProject)
  ExternalProject_Add(dlb_fuzzers
    SOURCE_DIR ${PROJECT_SOURCE_DIR}/fuzz
    BINARY_DIR ${CMAKE_BINARY_DIR}/fuzz
    CMAKE_ARGS -DCMAKE_CXX_COMPILER=${DLB_CLANGXX} -DCMAKE_BUILD_TYPE=RelWithDebInfo
    INSTALL_COMMAND ""
    BUILD_ALWAYS ON)  # its sources are the parsers' own files: let its build decide what changed
endif()

# dlb_add_fuzz_test(<target>): <target> from fuzz/corpus/<name>/ (read only:
# new inputs go to a scratch directory), a fixed seed and DLB_FUZZ_RUNS
# executions; any crash or sanitizer report fails the test.
function(dlb_add_fuzz_test target)
  string(REGEX REPLACE "^fuzz_" "" name ${target})
  add_test(NAME ${target}
           COMMAND sh -c "d=$(mktemp -d) && \"$0\" -runs=${DLB_FUZZ_RUNS} -seed=1 -max_len=8192 -artifact_prefix=\"$d/\" \"$d\" \"$1\"; r=$?; for f in \"$d\"/crash-* \"$d\"/leak-* \"$d\"/timeout-*; do [ -e \"$f\" ] && cp \"$f\" . && echo \"kept $f in $(pwd)\"; done; rm -rf \"$d\"; exit $r"
                   ${CMAKE_BINARY_DIR}/fuzz/${target} ${PROJECT_SOURCE_DIR}/fuzz/corpus/${name}
           WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
endfunction()
