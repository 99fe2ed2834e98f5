# LibTorch for model/, xmod-train and bench_model: the one place that knows where LibTorch
# comes from and which of its APIs exist. Defines the target `xmod::torch` (headers, flags,
# libraries) and the generated header <xmod/torch_features.h>, included only by
# model/torch_compat.cc (the model's APIs) and model/train/communicator.cc (c10d's).
#
# Two sources:
#  - Debian's libtorch-dev (LibTorch 1.13, CPU): the default, through its CMake config.
#  - LibTorch 2.x from the PyPI `torch` wheel (CUDA + NCCL inside), when XMOD_TORCH_ROOT
#    names the wheel's `torch` package folder (scripts/build-torch2.sh sets it). The wheel's
#    CMake config insists on a CUDA toolkit with nvcc even for C++-only consumers, so the
#    target is built here from the wheel's files instead: headers (less the wheel's private
#    copy of protobuf's headers, which would shadow the system protobuf that xmod's
#    generated code is compiled against), libtorch{,_cpu,_cuda}, libc10{,_cuda}, and the CUDA
#    runtime and NCCL headers from the nvidia-* wheels beside it. The wheel ships no Gloo
#    headers, so Debian's libgloo-dev provides them (c10d's ProcessGroupGloo only holds Gloo
#    objects by pointer).
include_guard(GLOBAL)
include(CheckCXXSourceCompiles)

set(XMOD_TORCH_ROOT "" CACHE PATH
    "The torch package folder of a PyPI torch wheel (LibTorch 2.x); empty = Debian's LibTorch")

add_library(xmod_torch INTERFACE)
add_library(xmod::torch ALIAS xmod_torch)

if(XMOD_TORCH_ROOT)
  if(NOT EXISTS "${XMOD_TORCH_ROOT}/lib/libtorch_cpu.so")
    message(FATAL_ERROR "XMOD_TORCH_ROOT=${XMOD_TORCH_ROOT}: no lib/libtorch_cpu.so there")
  endif()
  # Headers: a folder of links to the wheel's include entries, without `google/`.
  set(_farm "${CMAKE_BINARY_DIR}/torch-include")
  file(GLOB _entries RELATIVE "${XMOD_TORCH_ROOT}/include" "${XMOD_TORCH_ROOT}/include/*")
  file(MAKE_DIRECTORY "${_farm}")
  foreach(_entry IN LISTS _entries)
    if(NOT _entry STREQUAL "google" AND NOT EXISTS "${_farm}/${_entry}")
      file(CREATE_LINK "${XMOD_TORCH_ROOT}/include/${_entry}" "${_farm}/${_entry}" SYMBOLIC)
    endif()
  endforeach()
  get_filename_component(_site "${XMOD_TORCH_ROOT}" DIRECTORY)
  file(GLOB _cuda_includes "${_site}/nvidia/cu*/include" "${_site}/nvidia/cuda_runtime/include")
  file(GLOB _cudart "${_site}/nvidia/cu*/lib/libcudart.so.*" "${_site}/nvidia/cuda_runtime/lib/libcudart.so.*")
  target_include_directories(xmod_torch SYSTEM INTERFACE
    "${_farm}" "${_farm}/torch/csrc/api/include" ${_cuda_includes} "${_site}/nvidia/nccl/include")
  set(_lib "${XMOD_TORCH_ROOT}/lib")
  set(XMOD_TORCH_HAS_CUDA OFF)
  if(EXISTS "${_lib}/libtorch_cuda.so")
    set(XMOD_TORCH_HAS_CUDA ON)
  endif()
  # --no-as-needed: libtorch_cuda registers the CUDA kernels when loaded; nothing references
  # it by symbol, so an as-needed link would drop it.
  target_link_libraries(xmod_torch INTERFACE -Wl,--no-as-needed "${_lib}/libtorch.so"
    "${_lib}/libtorch_cpu.so" "${_lib}/libc10.so")
  if(XMOD_TORCH_HAS_CUDA)
    target_link_libraries(xmod_torch INTERFACE "${_lib}/libtorch_cuda.so"
      "${_lib}/libc10_cuda.so" ${_cudart})
  endif()
  target_link_libraries(xmod_torch INTERFACE -Wl,--as-needed
    -Wl,-rpath,${_lib} -Wl,-rpath-link,${_site}/nvidia/nccl/lib)
  file(GLOB _rpath_links "${_site}/nvidia/*/lib")
  foreach(_dir IN LISTS _rpath_links)
    target_link_libraries(xmod_torch INTERFACE -Wl,-rpath-link,${_dir})
  endforeach()
  target_compile_definitions(xmod_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
  target_compile_features(xmod_torch INTERFACE cxx_std_20)  # LibTorch 2.x headers need it
  set(_check_includes "${_farm}" "${_farm}/torch/csrc/api/include")
  set(_check_flags "-std=c++20")
else()
  find_package(Torch REQUIRED)
  set(XMOD_TORCH_HAS_CUDA OFF)
  if(TARGET torch_cuda)
    set(XMOD_TORCH_HAS_CUDA ON)
  endif()
  target_link_libraries(xmod_torch INTERFACE ${TORCH_LIBRARIES})
  separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(xmod_torch INTERFACE ${_torch_flags})
  set(_check_includes ${TORCH_INCLUDE_DIRS})
  set(_check_flags "${TORCH_CXX_FLAGS}")
endif()

# Feature checks: compile-only probes of the APIs that differ between LibTorch versions.
set(CMAKE_REQUIRED_INCLUDES ${_check_includes})
set(CMAKE_REQUIRED_FLAGS "${_check_flags}")
set(CMAKE_REQUIRED_QUIET ON)
set(_saved_standard ${CMAKE_CXX_STANDARD})
if(XMOD_TORCH_ROOT)
  set(CMAKE_CXX_STANDARD 20)
endif()
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
# Fused scaled-dot-product attention with grouped-query heads (LibTorch >= 2.5).
check_cxx_source_compiles([[
#include <ATen/ATen.h>
at::Tensor f(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, true, std::nullopt, true);
}]] XMOD_TORCH_HAS_SDPA_GQA)
# Autocast switched per device type (LibTorch >= 2.4); 1.13 has set_enabled/set_cpu_enabled.
check_cxx_source_compiles([[
#include <ATen/autocast_mode.h>
void f() {
  at::autocast::set_autocast_enabled(at::kCPU, true);
  at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
}]] XMOD_TORCH_HAS_DEVICE_AUTOCAST)
# c10d's process groups are Backends under a ProcessGroup (LibTorch >= 2.0); in 1.13
# ProcessGroupGloo/NCCL are ProcessGroups themselves.
check_cxx_source_compiles([[
#define USE_C10D_GLOO
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <type_traits>
static_assert(std::is_base_of_v<c10d::Backend, c10d::ProcessGroupGloo>);
]] XMOD_TORCH_HAS_C10D_BACKEND)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_FLAGS)
unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
set(CMAKE_CXX_STANDARD ${_saved_standard})

foreach(_feature XMOD_TORCH_HAS_SDPA_GQA XMOD_TORCH_HAS_DEVICE_AUTOCAST XMOD_TORCH_HAS_CUDA
                 XMOD_TORCH_HAS_C10D_BACKEND)
  if(${_feature})
    set(${_feature} 1)
  else()
    set(${_feature} 0)
  endif()
endforeach()
configure_file("${CMAKE_CURRENT_LIST_DIR}/torch_features.h.in"
               "${CMAKE_BINARY_DIR}/generated/xmod/torch_features.h" @ONLY)
target_include_directories(xmod_torch INTERFACE "${CMAKE_BINARY_DIR}/generated")
if(NOT XMOD_TORCH_ROOT)
  set(_from "${Torch_DIR}")
else()
  set(_from "${XMOD_TORCH_ROOT}")
endif()
message(STATUS "LibTorch: ${_from} (CUDA ${XMOD_TORCH_HAS_CUDA}, "
               "fused attention ${XMOD_TORCH_HAS_SDPA_GQA}, "
               "per-device autocast ${XMOD_TORCH_HAS_DEVICE_AUTOCAST})")
