// A trained model rebuilt from its checkpoint for evaluation (xmod-eval, eval_main.cc): the
// run's spec (the checkpoint's own, or a RunSpec file), its accounting, and the weights, on a
// device, in evaluation mode. Here, beside the checkpoints, so that model/eval (the scoring,
// which the trainer also runs) depends on nothing of model/train.
#ifndef XMOD_MODEL_TRAIN_EVAL_MODEL_H_
#define XMOD_MODEL_TRAIN_EVAL_MODEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "model/transformer.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// A model rebuilt from a checkpoint, on `device`, in evaluation mode.
struct EvalModel {
  xmod::v1::RunSpec spec;
  Transformer model{nullptr};
  int seq_len = 0;  // the run's training.seq_len: the longest window scored
  int vocab = 0;
};
// `spec_override` non-empty: a RunSpec file (run_spec_file.h) to use instead of the one in
// the checkpoint. Errors of ReadCheckpointSpec / LoadModelWeights / Account, and
// INVALID_ARGUMENT for a bad device.
absl::StatusOr<EvalModel> LoadEvalModel(const std::string& checkpoint,
                                        const std::string& spec_override,
                                        const std::string& device);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_EVAL_MODEL_H_
