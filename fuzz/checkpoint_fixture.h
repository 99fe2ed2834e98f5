// The trainer state the checkpoint fuzzers restore into: a tiny module with a matrix (Muon),
// a bias (AdamW) and a buffer, with both optimizers, built the same way every time so that
// the seed checkpoint written by xmod-fuzz-seeds matches it. Constructing one also turns off
// the stack traces of c10::Error for the process. Not thread-safe.
#ifndef XMOD_FUZZ_CHECKPOINT_FIXTURE_H_
#define XMOD_FUZZ_CHECKPOINT_FIXTURE_H_

#include <torch/torch.h>

#include <memory>

#include "model/train/adamw.h"
#include "model/train/checkpoint.h"
#include "model/train/muon.h"

namespace xmod::fuzz {

struct CheckpointFixture {
  CheckpointFixture();

  std::shared_ptr<torch::nn::Module> model;  // parameters "w" (3, 4), "b" (3); buffer "scale"
  std::unique_ptr<Muon> muon;                // over "w"
  std::unique_ptr<AdamW> adamw;              // over "b"
  TrainState state;                          // step 7, a few tokens, FLOPs and a data position
};

}  // namespace xmod::fuzz

#endif  // XMOD_FUZZ_CHECKPOINT_FIXTURE_H_
