// A model rebuilt from a checkpoint: see eval_model.h.
#include "model/train/eval_model.h"

#include "absl/strings/str_cat.h"
#include "model/accounting/accounting.h"
#include "model/train/checkpoint.h"
#include "model/train/run_spec_file.h"

namespace xmod {

absl::StatusOr<EvalModel> LoadEvalModel(const std::string& checkpoint,
                                        const std::string& spec_override,
                                        const std::string& device) {
  EvalModel out;
  absl::StatusOr<xmod::v1::RunSpec> spec =
      spec_override.empty() ? ReadCheckpointSpec(checkpoint) : ReadRunSpec(spec_override);
  if (!spec.ok()) return spec.status();
  out.spec = *std::move(spec);
  out.seq_len = out.spec.training().seq_len();
  if (out.seq_len < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(checkpoint, ": training.seq_len ", out.seq_len, " must be >= 1"));
  }
  absl::StatusOr<Accounting> accounting = Account(out.spec.model(), out.seq_len);
  if (!accounting.ok()) {
    return absl::Status(accounting.status().code(),
                        absl::StrCat("model.", accounting.status().message()));
  }
  out.vocab = accounting->backbone.vocab_size;
  try {
    const torch::Device target(device);
    out.model = Transformer(out.spec.model(), *accounting, out.seq_len);
    absl::Status loaded = LoadModelWeights(checkpoint, out.model.get());
    if (!loaded.ok()) return loaded;
    out.model->to(target);
    out.model->eval();
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("model on \"", device, "\": ", e.what_without_backtrace()));
  }
  return out;
}

}  // namespace xmod
