// See sweep_validation.h.
#include "coordinator/spec/sweep_validation.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_path.h"
#include "coordinator/spec/data_roots.h"
#include "coordinator/spec/request_limits.h"
#include "google/protobuf/message.h"
#include "model/accounting/accounting.h"
#include "model/eval/tasks.h"

namespace xmod {
namespace {

using xmod::v1::GridSpec;
using xmod::v1::SweepSpec;

absl::Status CheckGlob(const std::string& path, const std::string& pattern,
                       const ExpansionOptions& options) {
  if (options.check_data_paths && pattern.empty()) {
    return InvalidField(path, "required (a glob of llm.c token shards)");
  }
  return CheckDataGlob(path, pattern, options.data_roots, options.check_data_paths);
}

// The optimizer and its schedule: batch, optimizer, learning rates, warm-up, decay, clipping.
absl::Status ValidateOptimization(const xmod::v1::TrainingSpec& t) {
  if (t.batch_tokens() < 1) {
    return InvalidField("training.batch_tokens", "tokens per optimizer step must be >= 1");
  }
  if (!t.optimizer().empty() && t.optimizer() != "muon" && t.optimizer() != "adamw") {
    return InvalidField("training.optimizer",
                        absl::StrCat("unknown optimizer \"", t.optimizer(), "\" (muon or adamw)"));
  }
  if (!(t.lr() >= 0)) return InvalidField("training.lr", "must be >= 0");
  if (!(t.adamw_lr() >= 0)) return InvalidField("training.adamw_lr", "must be >= 0");
  if (!(t.warmup_fraction() >= 0 && t.warmup_fraction() < 1)) {
    return InvalidField("training.warmup_fraction", "must be in [0, 1)");
  }
  if (!(t.min_lr_ratio() >= 0 && t.min_lr_ratio() <= 1)) {
    return InvalidField("training.min_lr_ratio", "must be in [0, 1]");
  }
  if (!(t.weight_decay() >= 0)) return InvalidField("training.weight_decay", "must be >= 0");
  if (!(t.grad_clip() >= 0)) return InvalidField("training.grad_clip", "must be >= 0");
  return absl::OkStatus();
}

// The counts: evaluation marks and tokens, checkpoint interval, threads, ranks, and the FLOP
// multiplier.
absl::Status ValidateCounts(const xmod::v1::TrainingSpec& t) {
  if (t.eval_marks() < 0) return InvalidField("training.eval_marks", "must be >= 0");
  if (t.eval_tokens() < 0) return InvalidField("training.eval_tokens", "must be >= 0");
  if (t.checkpoint_every_steps() < 0) {
    return InvalidField("training.checkpoint_every_steps", "must be >= 0");
  }
  if (t.threads() < 0) return InvalidField("training.threads", "must be >= 0");
  if (t.ranks() < 0) return InvalidField("training.ranks", "must be >= 0 (0 = 1 rank)");
  if (t.ranks_per_worker() < 0) {
    return InvalidField("training.ranks_per_worker", "must be >= 0 (0 = every rank on one worker)");
  }
  if (t.ranks_per_worker() > 0 && std::max(1, t.ranks()) % t.ranks_per_worker() != 0) {
    return InvalidField("training.ranks_per_worker",
                        absl::StrCat("training.ranks ", std::max(1, t.ranks()),
                                     " must divide by it (", t.ranks_per_worker(), ")"));
  }
  if (!(t.train_flops_multiplier() >= 0) || !std::isfinite(t.train_flops_multiplier())) {
    return InvalidField("training.train_flops_multiplier",
                        "must be finite and > 0 (0 = default 3)");
  }
  return absl::OkStatus();
}

absl::Status ValidateEvalTasks(const xmod::v1::TrainingSpec& t) {
  for (int i = 0; i < t.eval_tasks_size(); ++i) {
    const xmod::v1::EvalTask& task = t.eval_tasks(i);
    if (!IsEvalTask(task.task())) {
      return InvalidField(absl::StrCat("training.eval_tasks[", i, "].task"),
                          absl::StrCat("unknown task \"", task.task(), "\" (",
                                       absl::StrJoin(EvalTaskNames(), ", "), ")"));
    }
    if (task.data().empty()) {
      return InvalidField(absl::StrCat("training.eval_tasks[", i, "].data"),
                          "required (the task's JSONL file on the workers)");
    }
  }
  return absl::OkStatus();
}

// The first invalid training field, in the order the fields are listed above.
absl::Status ValidateTraining(const xmod::v1::TrainingSpec& t) {
  if (absl::Status s = ValidateOptimization(t); !s.ok()) return s;
  if (absl::Status s = ValidateCounts(t); !s.ok()) return s;
  return ValidateEvalTasks(t);
}

// Every repeated field of `message` has at most limits.max_values entries and every string at
// most limits.max_string_bytes bytes; the error names the field path.
absl::Status CheckSizes(const google::protobuf::Message& message, const std::string& prefix,
                        const SpecLimits& limits) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string path = prefix + field->name();
    if (field->is_repeated()) {
      const int n = reflection->FieldSize(message, field);
      if (n > limits.max_values) {
        return InvalidField(path, absl::StrCat(n, " values, at most ", limits.max_values));
      }
      for (int i = 0; i < n; ++i) {
        const std::string item = absl::StrCat(path, "[", i, "]");
        if (field->type() == FieldDescriptor::TYPE_STRING) {
          const size_t bytes =
              reflection->GetRepeatedStringReference(message, field, i, nullptr).size();
          if (bytes > static_cast<size_t>(limits.max_string_bytes)) {
            return InvalidField(item,
                                absl::StrCat(bytes, " bytes, at most ", limits.max_string_bytes));
          }
        } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
          if (absl::Status s =
                  CheckSizes(reflection->GetRepeatedMessage(message, field, i), item + ".", limits);
              !s.ok()) {
            return s;
          }
        }
      }
    } else if (field->type() == FieldDescriptor::TYPE_STRING) {
      std::string scratch;
      const size_t bytes = reflection->GetStringReference(message, field, &scratch).size();
      if (bytes > static_cast<size_t>(limits.max_string_bytes)) {
        return InvalidField(path, absl::StrCat(bytes, " bytes, at most ", limits.max_string_bytes));
      }
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (absl::Status s = CheckSizes(reflection->GetMessage(message, field), path + ".", limits);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckLimits(const SweepSpec& spec, const SpecLimits& limits) {
  if (absl::Status s = CheckSizes(spec, "", limits); !s.ok()) return s;
  const int samples = spec.fit().bootstrap_samples();
  if (samples < 0) return InvalidField("fit.bootstrap_samples", "must be >= 0 (0 = no bootstrap)");
  if (samples > limits.max_bootstrap_samples) {
    return InvalidField("fit.bootstrap_samples",
                        absl::StrCat(samples, " refits, at most ", limits.max_bootstrap_samples));
  }
  if (absl::Status s = CheckRange("adaptive.bootstrap_samples", spec.adaptive().bootstrap_samples(),
                                  0, limits.max_ensemble_size);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckRange("adaptive.max_in_flight", spec.adaptive().max_in_flight(), 0, kMaxProposals);
      !s.ok()) {
    return s;
  }
  int64_t total = 0;
  for (int g = 0; g < spec.grids_size(); ++g) {
    const GridSpec& grid = spec.grids(g);
    int64_t combos = 1;
    for (int n :
         {grid.archs_size(), grid.backbones_size(), grid.seq_lens_size(), grid.ks_size(),
          grid.as_size(), grid.flop_budgets_size(), grid.moe_experts_size(), grid.seeds_size()}) {
      combos *= std::max(n, 1);  // clamped below, so never past (max_runs + 1) * 1000
      combos = std::min(combos, limits.max_runs + 1);
    }
    total += combos;
    if (total > limits.max_runs) {
      return InvalidField(absl::StrCat("grids[", g, "]"),
                          absl::StrCat("the grids expand to more than ", limits.max_runs,
                                       " runs, the most one sweep may have"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateSweepFields(const SweepSpec& spec, const ExpansionOptions& options) {
  if (spec.name().empty()) return InvalidField("name", "a sweep needs a name");
  if (spec.grids_size() == 0) return InvalidField("grids", "at least one grid is required");
  if (spec.max_attempts() < 0) return InvalidField("max_attempts", "must be >= 0 (0 = default 5)");
  if (absl::Status s = ValidateTraining(spec.training()); !s.ok()) return s;
  if (absl::Status s = CheckGlob("data.train_glob", spec.data().train_glob(), options); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckGlob("data.val_glob", spec.data().val_glob(), options); !s.ok()) {
    return s;
  }
  const std::vector<std::string> presets = BackbonePresetNames();
  for (int i = 0; i < spec.fit().held_out_backbones_size(); ++i) {
    const std::string& backbone = spec.fit().held_out_backbones(i);
    if (std::find(presets.begin(), presets.end(), backbone) == presets.end()) {
      return InvalidField(absl::StrCat("fit.held_out_backbones[", i, "]"),
                          absl::StrCat("unknown backbone \"", backbone, "\""));
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
