# Small helpers so that an operator folder, a test or a benchmark file needs
# one line, not a copied block.

# dlb_kernel_sources(<target> [CPU f...] [EIGEN f...] [ONEDNN f...] [CUDA f...] [CUDNN f...])
# Adds an operator's files to <target>, each group only when the build has
# that backend (CUDA covers own kernels, cuBLAS and cuBLASLt).
function(dlb_kernel_sources target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "CPU;EIGEN;ONEDNN;CUDA;CUDNN")
  target_sources(${target} PRIVATE ${arg_CPU})
  foreach(backend EIGEN ONEDNN CUDA CUDNN)
    if(DLB_HAVE_${backend})
      target_sources(${target} PRIVATE ${arg_${backend}})
    endif()
  endforeach()
endfunction()

# dlb_add_test(<name> <sources...> [PROPERTIES <ctest properties...>]): a CPU
# GoogleTest binary; each TEST is its own ctest entry, with those properties.
function(dlb_add_test name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "PROPERTIES")
  add_executable(${name} ${arg_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE dlb_cases GTest::gtest_main)
  if(arg_PROPERTIES)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES PROPERTIES ${arg_PROPERTIES})
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES)
  endif()
endfunction()

# dlb_add_gpu_test(<name> <sources...>): a GoogleTest binary for GPU code. Its
# main exits 77 without a CUDA device, which ctest reports as skipped, never
# as passed. Built only when the build has CUDA.
function(dlb_add_gpu_test name)
  if(NOT DLB_HAVE_CUDA)
    return()
  endif()
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE dlb_cases dlb_gpu_test_main)
  # A test source can serve both binaries: DLB_TEST_GPU says which it is.
  target_compile_definitions(${name} PRIVATE DLB_TEST_GPU=1)
  add_test(NAME ${name} COMMAND ${name})
  # One GPU test binary at a time: two on one GPU would share its memory and
  # SMs, and their results would depend on which others ran beside them.
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS gpu RESOURCE_LOCK gpu)
endfunction()
