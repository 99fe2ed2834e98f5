# LibTorch model targets (xmod_model); owned by the model engineer.
# Included from model/CMakeLists.txt when XMOD_WITH_TORCH is on.
include(XmodTorch)

add_library(xmod_model
  attention.cc
  attention_backend.cc
  autocast.cc
  device.cc
  blocks.cc
  kernel_choice.cc
  cpu/flash_attention.cc
  cpu/kernels.cc
  cpu/loss.cc
  layer_checkpoint.cc
  ffn.cc
  moe.cc
  rms_norm.cc
  rope.cc
  routed_rows.cc
  router.cc
  routing_diagnostics.cc
  transformer.cc)
target_include_directories(xmod_model PUBLIC ${PROJECT_SOURCE_DIR})

# model/cpu/kernels_isa.cc, loss_isa.cc and flash_attention{,_bf16}_isa.cc once per
# instruction set, as ATen builds its own CPU kernels: the variant's CPU_CAPABILITY names its
# namespace and sets at::vec::Vectorized's width.
# -fopenmp: at::parallel_for is inline (ATen/ParallelOpenMP.h) and splits work only where
# _OPENMP is defined; without it every kernel ran on one thread whatever at::set_num_threads
# said. xmod::torch links the wheel's own libgomp, the runtime whose threads LibTorch sizes,
# so there is one thread pool in the process. GCC only: clang lowers OpenMP to libomp's ABI,
# which the wheel does not ship, so a clang build (the fuzzers) keeps the kernels serial.
set(_kernel_isas DEFAULT)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  list(APPEND _kernel_isas AVX2 AVX512)  # kernels.cc picks among them on __x86_64__
endif()
set(_kernel_flags_DEFAULT "")
set(_kernel_flags_AVX2 -mavx2 -mfma)
set(_kernel_flags_AVX512 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma)
foreach(_isa IN LISTS _kernel_isas)
  add_library(xmod_model_kernels_${_isa} OBJECT cpu/kernels_isa.cc cpu/loss_isa.cc
                                             cpu/flash_attention_isa.cc
                                             cpu/flash_attention_bf16_isa.cc)
  target_include_directories(xmod_model_kernels_${_isa} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(xmod_model_kernels_${_isa} PRIVATE xmod::torch)
  target_compile_definitions(xmod_model_kernels_${_isa} PRIVATE CPU_CAPABILITY=${_isa}
                                                                CPU_CAPABILITY_${_isa})
  target_compile_options(xmod_model_kernels_${_isa} PRIVATE ${_kernel_flags_${_isa}}
    $<$<CXX_COMPILER_ID:GNU>:-fopenmp>)
  set_target_properties(xmod_model_kernels_${_isa} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_sources(xmod_model PRIVATE $<TARGET_OBJECTS:xmod_model_kernels_${_isa}>)
endforeach()
target_link_libraries(xmod_model PUBLIC xmod::torch xmod_accounting xmod_proto_messages
  absl::status absl::statusor)
# Per file, not per target: the precompiled header, which the tests reuse, stays the same in
# every build.
if(XMOD_CUDA)
  set_property(SOURCE device.cc APPEND PROPERTY COMPILE_DEFINITIONS XMOD_CUDA)  # the runtime
endif()
# model/cuda: the kernels in .cu files without LibTorch's headers (launch.h), compiled by nvcc
# into their own library; kernels.cc, their LibTorch side, is compiled with the rest of
# xmod_model, and kernel_choice.cc chooses them (XMOD_CUDA_KERNELS).
if(XMOD_CUDA AND XMOD_CUDA_KERNELS)
  add_library(xmod_model_cuda STATIC cuda/elementwise.cu cuda/rms_norm.cu cuda/loss.cu)
  target_include_directories(xmod_model_cuda PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(xmod_model_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON CUDA_STANDARD 17
                                                   CUDA_STANDARD_REQUIRED ON)
  target_sources(xmod_model PRIVATE cuda/kernels.cc)
  set_property(SOURCE kernel_choice.cc APPEND PROPERTY COMPILE_DEFINITIONS XMOD_CUDA_KERNELS)
  target_link_libraries(xmod_model PRIVATE xmod_model_cuda)
endif()
# A translation unit including <torch/torch.h> takes ~15 s; share one precompiled header.
target_precompile_headers(xmod_model PRIVATE <torch/torch.h>)

if(XMOD_BUILD_TESTS)
  xmod_add_test(model_test
    SOURCES sparse_layer_test.cc moe_test.cc transformer_test.cc
            routing_diagnostics_test.cc runtime_test.cc cpu/flash_attention_test.cc
            cpu/loss_test.cc kernel_choice_test.cc
    LIBS xmod_model
    LABELS model)
  target_precompile_headers(model_test REUSE_FROM xmod_model)
  # What the device offers (graphs, capability, SDPA's measured backends): small, so that
  # scripts/gpu-check.sh builds and runs it on a GPU; on a CPU its GPU tests skip.
  xmod_add_test(model_device_test SOURCES device_test.cc attention_backend_test.cc
    LIBS xmod_model LABELS model)
  target_precompile_headers(model_device_test REUSE_FROM xmod_model)
  if(XMOD_CUDA AND XMOD_CUDA_KERNELS)
    # The CUDA kernels against their formulas; skips without a GPU (scripts/gpu-check.sh runs
    # it on one).
    xmod_add_test(cuda_kernels_test SOURCES cuda/kernels_test.cc LIBS xmod_model
      LABELS model cuda)
    target_precompile_headers(cuda_kernels_test REUSE_FROM xmod_model)
  endif()
endif()
