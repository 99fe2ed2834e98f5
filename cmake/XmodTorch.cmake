# LibTorch for model/, xmod-train, bench_model and the checkpoint fuzzers: the one place that
# knows where LibTorch comes from. Defines the target `xmod::torch` (headers, flags, libraries).
#
# The one LibTorch is the PyPI `torch` wheel's (LibTorch 2.x with MKL and oneDNN on CPU, CUDA
# and NCCL inside), installed by scripts/install-libtorch.sh into .cache/torch-venv; the CMake
# cache variable XMOD_TORCH_ROOT may name another copy of the wheel's `torch` package folder.
# The wheel's own CMake config insists on a CUDA toolkit with nvcc even for C++-only
# consumers, so the target is built here from the wheel's files:
#  - headers, less the wheel's private copy of protobuf's headers (`google/`), which would
#    shadow the system protobuf that xmod's generated code is compiled against;
#  - XMOD_CUDA=OFF (the default, every CPU machine): libtorch_cpu and libc10 only. They load
#    without the CUDA wheels except the CUDA runtime and CUPTI, which libtorch_cpu names as
#    NEEDED (its profiler); install-libtorch.sh installs just those two.
#  - XMOD_CUDA=ON (scripts/build-gpu.sh): libtorch_cuda and libc10_cuda too, and the CUDA
#    runtime and NCCL headers from the nvidia-* wheels beside the wheel.
# The wheel ships no Gloo headers, so Debian's libgloo-dev provides them (c10d's
# ProcessGroupGloo only holds Gloo objects by pointer; the code is inside libtorch_cpu).
include_guard(GLOBAL)

option(XMOD_CUDA "Link LibTorch's CUDA libraries (needs the wheel's CUDA dependencies)" OFF)
# xmod's CUDA kernels (model/cuda/*.cu, docs/gpu-training.md "Fused CUDA kernels"), compiled by
# nvcc: the nvidia-cuda-nvcc wheel of the CUDA version the torch wheel pins, installed beside it
# by scripts/install-libtorch.sh --cuda, else CMAKE_CUDA_COMPILER or one CMake finds. Needs
# XMOD_CUDA. Off: CUDA tensors take ATen's composite formulas (model/kernel_choice.h).
option(XMOD_CUDA_KERNELS "Compile xmod's CUDA kernels with nvcc (needs XMOD_CUDA)" ON)
set(XMOD_CUDA_ARCHITECTURES "80;90" CACHE STRING
    "GPU architectures of the CUDA kernels (bfloat16 tensor cores from sm_80; H100/H200 sm_90)")
set(XMOD_TORCH_ROOT "" CACHE PATH
    "The torch package folder of the PyPI torch wheel; empty = the one in .cache/torch-venv")

if(NOT XMOD_TORCH_ROOT)
  file(GLOB _found "${PROJECT_SOURCE_DIR}/.cache/torch-venv/lib/python3*/site-packages/torch")
  list(LENGTH _found _count)
  if(NOT _count EQUAL 1)
    message(FATAL_ERROR "LibTorch: no .cache/torch-venv/lib/python3*/site-packages/torch; "
                        "run scripts/install-libtorch.sh (scripts/setup.sh does) or set "
                        "-DXMOD_TORCH_ROOT=<the torch package folder of the PyPI wheel>")
  endif()
  set(XMOD_TORCH_ROOT "${_found}" CACHE PATH "" FORCE)
endif()
set(_lib "${XMOD_TORCH_ROOT}/lib")
if(NOT EXISTS "${_lib}/libtorch_cpu.so")
  message(FATAL_ERROR "XMOD_TORCH_ROOT=${XMOD_TORCH_ROOT}: no lib/libtorch_cpu.so there")
endif()
get_filename_component(_site "${XMOD_TORCH_ROOT}" DIRECTORY)

add_library(xmod_torch INTERFACE)
add_library(xmod::torch ALIAS xmod_torch)

# Headers: a folder of links to the wheel's include entries, without `google/`.
set(_farm "${CMAKE_BINARY_DIR}/torch-include")
file(GLOB _entries RELATIVE "${XMOD_TORCH_ROOT}/include" "${XMOD_TORCH_ROOT}/include/*")
file(MAKE_DIRECTORY "${_farm}")
foreach(_entry IN LISTS _entries)
  if(NOT _entry STREQUAL "google" AND NOT EXISTS "${_farm}/${_entry}")
    file(CREATE_LINK "${XMOD_TORCH_ROOT}/include/${_entry}" "${_farm}/${_entry}" SYMBOLIC)
  endif()
endforeach()
target_include_directories(xmod_torch SYSTEM INTERFACE
  "${_farm}" "${_farm}/torch/csrc/api/include")
# With them the wheel's OpenMP runtime (libtorch_cpu's NEEDED libgomp.so.1, beside it): code
# of ours compiled with -fopenmp (model/cpu) calls it, never the compiler's, so LibTorch and
# xmod share one thread pool, sized by at::set_num_threads.
if(NOT EXISTS "${_lib}/libgomp.so.1")
  message(FATAL_ERROR "XMOD_TORCH_ROOT=${XMOD_TORCH_ROOT}: no lib/libgomp.so.1 (the wheel's "
                      "OpenMP runtime) there")
endif()
target_link_libraries(xmod_torch INTERFACE "${_lib}/libtorch_cpu.so" "${_lib}/libc10.so"
  "${_lib}/libgomp.so.1" -Wl,-rpath,${_lib})

if(XMOD_CUDA)
  if(NOT EXISTS "${_lib}/libtorch_cuda.so")
    message(FATAL_ERROR "XMOD_CUDA=ON: ${_lib} has no libtorch_cuda.so")
  endif()
  file(GLOB _cudart "${_site}/nvidia/cu*/lib/libcudart.so.*")
  file(GLOB _cuda_includes "${_site}/nvidia/cu*/include")
  if(NOT _cudart OR NOT EXISTS "${_site}/nvidia/nccl/include/nccl.h")
    message(FATAL_ERROR "XMOD_CUDA=ON: the wheel's CUDA dependencies are missing under "
                        "${_site}/nvidia; run scripts/install-libtorch.sh --cuda")
  endif()
  target_include_directories(xmod_torch SYSTEM INTERFACE
    ${_cuda_includes} "${_site}/nvidia/nccl/include")
  # --no-as-needed: libtorch_cuda registers the CUDA kernels when loaded; nothing references
  # it by symbol, so an as-needed link would drop it.
  target_link_libraries(xmod_torch INTERFACE -Wl,--no-as-needed "${_lib}/libtorch_cuda.so"
    "${_lib}/libc10_cuda.so" ${_cudart} -Wl,--as-needed)
endif()
# The CUDA language for model/cuda, enabled here so that it is enabled for the whole project
# when the top-level CMakeLists includes this file (targets in other folders link the kernels).
if(XMOD_CUDA AND XMOD_CUDA_KERNELS)
  if(NOT CMAKE_CUDA_COMPILER)
    file(GLOB _nvcc "${_site}/nvidia/cu*/bin/nvcc")
    if(_nvcc)
      list(GET _nvcc 0 _nvcc)
      set(CMAKE_CUDA_COMPILER "${_nvcc}" CACHE FILEPATH "nvcc for model/cuda" FORCE)
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${XMOD_CUDA_ARCHITECTURES}")
  # No runtime of CMake's choosing (its -lcudart finds no unversioned library in the wheel):
  # xmod::torch links the wheel's libcudart.so.13, which LibTorch loads anyway.
  set(CMAKE_CUDA_RUNTIME_LIBRARY None)
  enable_language(CUDA)
endif()

# The wheel's NEEDED libraries in the nvidia-* wheels (libcudart/libcupti of libtorch_cpu; with
# CUDA also cuBLAS, NCCL, ...), for the linker's check of shared libraries.
file(GLOB _rpath_links "${_site}/nvidia/*/lib")
foreach(_dir IN LISTS _rpath_links)
  target_link_libraries(xmod_torch INTERFACE -Wl,-rpath-link,${_dir})
endforeach()
target_compile_definitions(xmod_torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1)
target_compile_features(xmod_torch INTERFACE cxx_std_20)  # LibTorch 2.x headers need it

message(STATUS "LibTorch: ${XMOD_TORCH_ROOT} (CUDA ${XMOD_CUDA})")
