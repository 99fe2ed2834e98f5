// See training_config.h.
#include "model/train/training_config.h"

#include <array>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

constexpr double kDefaultLr = 3.2e-3;  // paper Table 5

void SetOptimizerDefaults(xmod::v1::TrainingSpec& t) {
  if (t.optimizer().empty()) t.set_optimizer("muon");
  if (t.lr() == 0) t.set_lr(kDefaultLr);
  if (t.adamw_lr() == 0) t.set_adamw_lr(t.lr());
  if (!t.has_warmup_fraction()) t.set_warmup_fraction(0.02);
  if (!t.has_min_lr_ratio()) t.set_min_lr_ratio(0.1);
  if (!t.has_weight_decay()) t.set_weight_decay(0.1);  // paper Table 5
  if (!t.has_grad_clip()) t.set_grad_clip(1.0);
}

void SetRunDefaults(xmod::v1::TrainingSpec& t) {
  if (t.eval_marks() == 0) t.set_eval_marks(8);
  if (t.eval_tokens() == 0) t.set_eval_tokens(t.batch_tokens());
  if (t.precision().empty()) t.set_precision("auto");
  if (t.attention().empty()) t.set_attention("auto");
  if (t.cuda_graphs().empty()) t.set_cuda_graphs("auto");
  if (!t.has_overlap_grad_reduce()) t.set_overlap_grad_reduce(true);
  if (t.log_every_steps() == 0) t.set_log_every_steps(10);
}

absl::Status ValidateBatch(const xmod::v1::TrainingSpec& t) {
  if (t.seq_len() < 1) return absl::InvalidArgumentError("training.seq_len: must be >= 1");
  if (t.batch_tokens() < t.seq_len() || t.batch_tokens() % t.seq_len() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("training.batch_tokens: ", t.batch_tokens(),
                                                   " is not a positive multiple of seq_len ",
                                                   t.seq_len()));
  }
  if (!(t.flop_budget() > 0)) {
    return absl::InvalidArgumentError("training.flop_budget: must be > 0");
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimizer(const xmod::v1::TrainingSpec& t) {
  if (t.optimizer() != "muon" && t.optimizer() != "adamw") {
    return absl::InvalidArgumentError(
        absl::StrCat("training.optimizer: \"", t.optimizer(), "\" is not \"muon\" or \"adamw\""));
  }
  if (!(t.lr() > 0)) return absl::InvalidArgumentError("training.lr: must be > 0");
  if (!(t.adamw_lr() > 0)) return absl::InvalidArgumentError("training.adamw_lr: must be > 0");
  if (!(t.warmup_fraction() >= 0 && t.warmup_fraction() < 1)) {
    return absl::InvalidArgumentError("training.warmup_fraction: must be in [0, 1)");
  }
  if (!(t.min_lr_ratio() >= 0 && t.min_lr_ratio() <= 1)) {
    return absl::InvalidArgumentError("training.min_lr_ratio: must be in [0, 1]");
  }
  if (!(t.weight_decay() >= 0)) {
    return absl::InvalidArgumentError("training.weight_decay: must be >= 0");
  }
  if (!(t.grad_clip() >= 0)) return absl::InvalidArgumentError("training.grad_clip: must be >= 0");
  return absl::OkStatus();
}

absl::Status ValidateEvaluation(const xmod::v1::TrainingSpec& t) {
  if (t.eval_marks() < 1) return absl::InvalidArgumentError("training.eval_marks: must be >= 1");
  if (t.eval_tokens() < t.seq_len()) {
    return absl::InvalidArgumentError(absl::StrCat("training.eval_tokens: ", t.eval_tokens(),
                                                   " is less than one window of seq_len ",
                                                   t.seq_len()));
  }
  return absl::OkStatus();
}

// INVALID_ARGUMENT "training.<field>: "<value>" is not "a", "b" or "c"" unless value is one
// of the three.
absl::Status ValidateMode(const char* field, const std::string& value,
                          const std::array<const char*, 3>& modes) {
  for (const char* mode : modes) {
    if (value == mode) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("training.", field, ": \"", value, "\" is not \"",
                                                 modes[0], "\", \"", modes[1], "\" or \"", modes[2],
                                                 "\""));
}

absl::Status ValidateModes(const xmod::v1::TrainingSpec& t) {
  const struct {
    const char* field;
    const std::string& value;
    std::array<const char*, 3> modes;
  } checks[] = {
      {"precision", t.precision(), {"auto", "fp32", "bf16"}},
      {"attention", t.attention(), {"auto", "fused", "manual"}},
      {"cuda_graphs", t.cuda_graphs(), {"auto", "on", "off"}},
  };
  for (const auto& mode : checks) {
    if (absl::Status s = ValidateMode(mode.field, mode.value, mode.modes); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateSchedule(const xmod::v1::TrainingSpec& t) {
  if (t.micro_batch_tokens() < 0 || t.micro_batch_tokens() % t.seq_len() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("training.micro_batch_tokens: ", t.micro_batch_tokens(),
                     " is not 0 or a positive multiple of seq_len ", t.seq_len()));
  }
  if (t.log_every_steps() < 1) {
    return absl::InvalidArgumentError("training.log_every_steps: must be >= 0");
  }
  if (t.checkpoint_every_steps() < 0) {
    return absl::InvalidArgumentError("training.checkpoint_every_steps: must be >= 0");
  }
  if (!(t.train_flops_multiplier() >= 0) || !std::isfinite(t.train_flops_multiplier())) {
    return absl::InvalidArgumentError(
        "training.train_flops_multiplier: must be finite and > 0 (0 = default 3)");
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<xmod::v1::TrainingSpec> ResolveTraining(const xmod::v1::TrainingSpec& training) {
  xmod::v1::TrainingSpec t = training;
  SetOptimizerDefaults(t);
  SetRunDefaults(t);
  for (absl::Status (*check)(const xmod::v1::TrainingSpec&) :
       {ValidateBatch, ValidateOptimizer, ValidateEvaluation, ValidateModes, ValidateSchedule}) {
    if (absl::Status s = check(t); !s.ok()) return s;
  }
  return t;
}

}  // namespace xmod
