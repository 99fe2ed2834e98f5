// See checkpoint_fixture.h.
#include "fuzz/checkpoint_fixture.h"

#include <c10/util/Logging.h>

#include <string>

namespace xmod::fuzz {

CheckpointFixture::CheckpointFixture() : model(std::make_shared<torch::nn::Module>()) {
  // A c10::Error symbolizes a stack trace when thrown (tens of milliseconds); most fuzz
  // inputs make the loader throw one, so the fuzzers skip the trace.
  c10::SetStackTraceFetcher([] { return std::string(); });
  torch::manual_seed(1);
  torch::Tensor w = model->register_parameter("w", torch::randn({3, 4}));
  torch::Tensor b = model->register_parameter("b", torch::randn({3}));
  model->register_buffer("scale", torch::ones({1}));
  muon = std::make_unique<Muon>(std::vector<torch::Tensor>{w}, MuonOptions{});
  adamw = std::make_unique<AdamW>(std::vector<torch::Tensor>{b}, AdamWOptions{});
  state.step = 7;
  state.tokens = 7 * 512;
  state.flops = 1.5e9;
  state.data.epoch = 0;
  state.data.shard = 1;
  state.data.offset = 96;
}

}  // namespace xmod::fuzz
