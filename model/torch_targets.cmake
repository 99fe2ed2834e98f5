# LibTorch model targets (xmod_model); owned by the model engineer.
# Included from model/CMakeLists.txt when XMOD_WITH_TORCH is on.
include(XmodTorch)

add_library(xmod_model
  attention.cc
  autocast.cc
  device.cc
  blocks.cc
  layer_checkpoint.cc
  ffn.cc
  moe.cc
  rms_norm.cc
  rope.cc
  router.cc
  routing_diagnostics.cc
  transformer.cc)
target_include_directories(xmod_model PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(xmod_model PUBLIC xmod::torch xmod_accounting xmod_proto_messages
  absl::status absl::statusor)
# A translation unit including <torch/torch.h> takes ~15 s; share one precompiled header.
target_precompile_headers(xmod_model PRIVATE <torch/torch.h>)

if(XMOD_BUILD_TESTS)
  xmod_add_test(model_test
    SOURCES sparse_layer_test.cc moe_test.cc transformer_test.cc
            routing_diagnostics_test.cc runtime_test.cc
    LIBS xmod_model
    LABELS model)
  target_precompile_headers(model_test REUSE_FROM xmod_model)
endif()
