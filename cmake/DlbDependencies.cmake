# Every external dependency of dlbench, found once, as imported targets.
# Result: the INTERFACE target dlb_config (compile definitions DLB_HAVE_*,
# warnings, -march=native) that every dlbench target links, and the variables
# DLB_HAVE_CUDA, DLB_HAVE_CUDNN, DLB_HAVE_ONEDNN, DLB_HAVE_EIGEN.

find_package(benchmark CONFIG REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)
# The networks: safetensors headers (nlohmann-json), gzip'd IDX data sets (zlib).
find_package(nlohmann_json 3 CONFIG REQUIRED)
find_package(ZLIB REQUIRED)
if(DLB_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()

set(_dlb_hint "run scripts/setup (installs the distribution packages) or switch the backend off")

set(DLB_HAVE_EIGEN OFF)
if(DLB_EIGEN)
  find_package(Eigen3 3.3 CONFIG)
  if(NOT Eigen3_FOUND)
    message(FATAL_ERROR "DLB_EIGEN=ON but Eigen 3 was not found: ${_dlb_hint} with -DDLB_EIGEN=OFF")
  endif()
  set(DLB_HAVE_EIGEN ON)
endif()

set(DLB_HAVE_ONEDNN OFF)
if(DLB_ONEDNN)
  # Debian's libdnnl-dev ships its CMake config as `dnnl` (target DNNL::dnnl);
  # the config also looks for OpenCL (ocl-icd-opencl-dev).
  find_package(dnnl CONFIG)
  if(NOT dnnl_FOUND)
    message(FATAL_ERROR "DLB_ONEDNN=ON but oneDNN (dnnl) was not found: ${_dlb_hint} with -DDLB_ONEDNN=OFF")
  endif()
  set(DLB_HAVE_ONEDNN ON)
endif()

# ---------------------------------------------------------------- CUDA
set(DLB_HAVE_CUDA OFF)
set(DLB_HAVE_CUDNN OFF)
if(NOT DLB_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE _smi_rc
                      OUTPUT_VARIABLE _smi_out ERROR_QUIET)
      if(_smi_rc EQUAL 0 AND _smi_out MATCHES "GPU [0-9]")
        set(CMAKE_CUDA_ARCHITECTURES native)
      else()
        set(CMAKE_CUDA_ARCHITECTURES "80;90")
      endif()
    endif()
    enable_language(CUDA)
    # CUDA_STANDARD falls back to CXX_STANDARD (20), which CMake 3.25 cannot
    # spell for nvcc although nvcc 12+ accepts it: keep that fallback from
    # being an error and pass -std=c++20 ourselves (dlb_config below).
    set(CMAKE_CUDA_STANDARD_REQUIRED OFF)
    find_package(CUDAToolkit REQUIRED)
    set(DLB_HAVE_CUDA ON)

    # cuDNN has no imported target in CMake's FindCUDAToolkit. It lives in the
    # toolkit here, and inside the PyTorch install (site-packages/nvidia/cudnn)
    # on the GPU machines: point CUDNN_ROOT there.
    find_path(CUDNN_INCLUDE_DIR cudnn.h
              HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ${CUDAToolkit_INCLUDE_DIRS}
              PATH_SUFFIXES include)
    find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
                 HINTS ${CUDNN_ROOT} ENV CUDNN_ROOT ${CUDAToolkit_LIBRARY_DIR}
                 PATH_SUFFIXES lib lib64)
    if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
      add_library(CUDNN::cudnn SHARED IMPORTED)
      set_target_properties(CUDNN::cudnn PROPERTIES
        IMPORTED_LOCATION "${CUDNN_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
      set(DLB_HAVE_CUDNN ON)
    else()
      message(STATUS "dlbench: cuDNN not found (set CUDNN_ROOT); cuDNN variants are not built")
    endif()
  elseif(DLB_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DLB_CUDA=ON but no CUDA compiler was found (put nvcc on PATH or set CMAKE_CUDA_COMPILER)")
  endif()
endif()

# ---------------------------------------------------------------- dlb_config
add_library(dlb_config INTERFACE)
target_compile_definitions(dlb_config INTERFACE
  DLB_HAVE_CUDA=$<BOOL:${DLB_HAVE_CUDA}>
  DLB_HAVE_CUDNN=$<BOOL:${DLB_HAVE_CUDNN}>
  DLB_HAVE_ONEDNN=$<BOOL:${DLB_HAVE_ONEDNN}>
  DLB_HAVE_EIGEN=$<BOOL:${DLB_HAVE_EIGEN}>)
target_compile_options(dlb_config INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
  $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20 -Xcompiler=-Wall,-Wextra -lineinfo>)
if(DLB_NATIVE)
  target_compile_options(dlb_config INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
endif()
target_include_directories(dlb_config INTERFACE ${PROJECT_SOURCE_DIR})
target_link_libraries(dlb_config INTERFACE OpenMP::OpenMP_CXX)
