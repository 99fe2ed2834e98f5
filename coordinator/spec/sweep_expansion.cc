// See sweep_expansion.h. Validation first (every list entry, naming its path), then the
// product, accounting per run, the one-step budget check and deduplication.
#include "coordinator/spec/sweep_expansion.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "coordinator/spec/data_roots.h"
#include "coordinator/spec/request_limits.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "model/accounting/accounting.h"
#include "model/eval/tasks.h"

namespace xmod {
namespace {

using xmod::v1::Architecture;
using xmod::v1::GridSpec;
using xmod::v1::ModelSpec;
using xmod::v1::SweepSpec;

absl::Status Invalid(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

// A value and the path of the spec field it came from, for error messages.
template <typename T>
struct Choice {
  T value;
  std::string path;
};

absl::Status CheckGlob(const std::string& path, const std::string& pattern,
                       const ExpansionOptions& options) {
  if (options.check_data_paths && pattern.empty()) {
    return Invalid(path, "required (a glob of llm.c token shards)");
  }
  return CheckDataGlob(path, pattern, options.data_roots, options.check_data_paths);
}

bool UsesK(Architecture arch) { return arch != xmod::v1::DENSE && arch != xmod::v1::MOE; }
bool UsesA(Architecture arch) { return UsesK(arch) && arch != xmod::v1::MOD; }

std::string ArchPrefix(Architecture arch) {
  std::string name = absl::AsciiStrToLower(xmod::v1::Architecture_Name(arch));
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

struct Combo {
  Choice<Architecture> arch;
  Choice<std::string> backbone;
  Choice<int> l;
  Choice<int> k;
  Choice<double> a;
  Choice<double> budget;
  Choice<std::string> moe;  // "" unless arch MOE with moe_experts
  Choice<uint64_t> seed;
};

// Account() names fields relative to ModelSpec; point them at the grid entry that set them.
absl::Status MapModelError(const absl::Status& status, const Combo& c, int g) {
  const std::string message(status.message());
  const std::vector<std::string> parts = absl::StrSplit(message, absl::MaxSplits(": ", 1));
  if (parts.size() < 2) return Invalid(absl::StrCat("grids[", g, "]"), message);
  const std::string& field = parts[0];
  const std::string& rest = parts[1];
  const std::string base = absl::StrCat("grids[", g, "].base.");
  if (field == "k") return Invalid(c.k.path, rest);
  if (field == "a") return Invalid(c.a.path, rest);
  if (field == "seq_len") return Invalid(c.l.path, rest);
  if (field == "arch") return Invalid(c.arch.path, rest);
  if (field == "backbone.name") return Invalid(c.backbone.path, rest);
  if (absl::StartsWith(field, "moe.") && !c.moe.path.empty() &&
      (field == "moe.active_experts" || field == "moe.total_experts" ||
       field == "moe.shared_experts")) {
    return Invalid(c.moe.path, absl::StrCat(field.substr(4), ": ", rest));
  }
  return Invalid(base + field, rest);
}

std::string RunName(const xmod::v1::RunSpec& spec, bool multiple_budgets, bool replicated) {
  const ModelSpec& m = spec.model();
  std::string name =
      absl::StrCat(ArchPrefix(m.arch()), "-", m.backbone().name(), "-L", spec.training().seq_len());
  if (UsesK(m.arch())) absl::StrAppend(&name, "-K", m.k());
  if (UsesA(m.arch())) absl::StrAppend(&name, "-A", m.a());
  if (m.arch() == xmod::v1::MOE) {
    absl::StrAppend(&name, "-E", m.moe().active_experts(), "of", m.moe().total_experts());
    if (m.moe().shared_experts() > 0) absl::StrAppend(&name, "s", m.moe().shared_experts());
  }
  if (m.no_anchors()) absl::StrAppend(&name, "-noanchor");
  if (m.no_gated_scaling()) absl::StrAppend(&name, "-nogate");
  if (m.no_token_choice_bias()) absl::StrAppend(&name, "-notau");
  if (multiple_budgets) absl::StrAppend(&name, "-C", FormatFlops(spec.training().flop_budget()));
  if (replicated) absl::StrAppend(&name, "-s", spec.training().seed());
  return name;
}

absl::Status ValidateTraining(const xmod::v1::TrainingSpec& t) {
  if (t.batch_tokens() < 1) {
    return Invalid("training.batch_tokens", "tokens per optimizer step must be >= 1");
  }
  if (!t.optimizer().empty() && t.optimizer() != "muon" && t.optimizer() != "adamw") {
    return Invalid("training.optimizer",
                   absl::StrCat("unknown optimizer \"", t.optimizer(), "\" (muon or adamw)"));
  }
  if (!(t.lr() >= 0)) return Invalid("training.lr", "must be >= 0");
  if (!(t.adamw_lr() >= 0)) return Invalid("training.adamw_lr", "must be >= 0");
  if (!(t.warmup_fraction() >= 0 && t.warmup_fraction() < 1)) {
    return Invalid("training.warmup_fraction", "must be in [0, 1)");
  }
  if (!(t.min_lr_ratio() >= 0 && t.min_lr_ratio() <= 1)) {
    return Invalid("training.min_lr_ratio", "must be in [0, 1]");
  }
  if (!(t.weight_decay() >= 0)) return Invalid("training.weight_decay", "must be >= 0");
  if (!(t.grad_clip() >= 0)) return Invalid("training.grad_clip", "must be >= 0");
  if (t.eval_marks() < 0) return Invalid("training.eval_marks", "must be >= 0");
  if (t.eval_tokens() < 0) return Invalid("training.eval_tokens", "must be >= 0");
  if (t.checkpoint_every_steps() < 0) {
    return Invalid("training.checkpoint_every_steps", "must be >= 0");
  }
  if (t.threads() < 0) return Invalid("training.threads", "must be >= 0");
  if (t.ranks() < 0) return Invalid("training.ranks", "must be >= 0 (0 = 1 rank)");
  if (t.ranks_per_worker() < 0) {
    return Invalid("training.ranks_per_worker", "must be >= 0 (0 = every rank on one worker)");
  }
  if (t.ranks_per_worker() > 0 && std::max(1, t.ranks()) % t.ranks_per_worker() != 0) {
    return Invalid("training.ranks_per_worker",
                   absl::StrCat("training.ranks ", std::max(1, t.ranks()), " must divide by it (",
                                t.ranks_per_worker(), ")"));
  }
  if (!(t.train_flops_multiplier() >= 0) || !std::isfinite(t.train_flops_multiplier())) {
    return Invalid("training.train_flops_multiplier", "must be finite and > 0 (0 = default 3)");
  }
  for (int i = 0; i < t.eval_tasks_size(); ++i) {
    const xmod::v1::EvalTask& task = t.eval_tasks(i);
    if (!IsEvalTask(task.task())) {
      return Invalid(absl::StrCat("training.eval_tasks[", i, "].task"),
                     absl::StrCat("unknown task \"", task.task(), "\" (",
                                  absl::StrJoin(EvalTaskNames(), ", "), ")"));
    }
    if (task.data().empty()) {
      return Invalid(absl::StrCat("training.eval_tasks[", i, "].data"),
                     "required (the task's JSONL file on the workers)");
    }
  }
  return absl::OkStatus();
}

// The per-grid value lists, validated, each entry with its path.
struct GridChoices {
  std::vector<Choice<Architecture>> archs;
  std::vector<Choice<std::string>> backbones;
  std::vector<Choice<int>> ls;
  std::vector<Choice<int>> ks;
  std::vector<Choice<double>> as;
  std::vector<Choice<double>> budgets;
  std::vector<Choice<std::string>> moes;
  std::vector<Choice<uint64_t>> seeds;
  bool replicated = false;  // the grid lists seeds: run names carry them
};

absl::StatusOr<GridChoices> GridValues(const SweepSpec& spec, int g) {
  const GridSpec& grid = spec.grids(g);
  const std::string p = absl::StrCat("grids[", g, "].");
  GridChoices c;
  for (int i = 0; i < grid.archs_size(); ++i) {
    const Architecture arch = grid.archs(i);
    if (arch == xmod::v1::ARCHITECTURE_UNSPECIFIED || !xmod::v1::Architecture_IsValid(arch)) {
      return Invalid(absl::StrCat(p, "archs[", i, "]"), "architecture must be set");
    }
    c.archs.push_back({arch, absl::StrCat(p, "archs[", i, "]")});
  }
  if (c.archs.empty()) {
    if (grid.base().arch() == xmod::v1::ARCHITECTURE_UNSPECIFIED) {
      return Invalid(p + "archs", "no architecture (give archs or base.arch)");
    }
    c.archs.push_back({grid.base().arch(), p + "base.arch"});
  }

  const std::vector<std::string> presets = BackbonePresetNames();
  const auto check_backbone = [&](const std::string& name, const std::string& path) {
    xmod::v1::BackboneSpec backbone = grid.base().backbone();
    backbone.set_name(name);
    if (!name.empty() && std::find(presets.begin(), presets.end(), name) == presets.end()) {
      return Invalid(path, absl::StrCat("unknown backbone \"", name, "\""));
    }
    absl::StatusOr<Backbone> resolved = ResolveBackbone(backbone);
    if (!resolved.ok()) {
      // "backbone.n_heads: ..." -> "grids[g].base.backbone.n_heads: ..."
      return absl::InvalidArgumentError(absl::StrCat(p, "base.", resolved.status().message()));
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < grid.backbones_size(); ++i) {
    const std::string path = absl::StrCat(p, "backbones[", i, "]");
    if (grid.backbones(i).empty()) return Invalid(path, "backbone name is empty");
    if (absl::Status s = check_backbone(grid.backbones(i), path); !s.ok()) return s;
    c.backbones.push_back({grid.backbones(i), path});
  }
  if (c.backbones.empty()) {
    const std::string path = p + "base.backbone.name";
    if (absl::Status s = check_backbone(grid.base().backbone().name(), path); !s.ok()) return s;
    c.backbones.push_back({grid.base().backbone().name(), path});
  }

  for (int i = 0; i < grid.seq_lens_size(); ++i) {
    const std::string path = absl::StrCat(p, "seq_lens[", i, "]");
    if (grid.seq_lens(i) < 1) {
      return Invalid(path, absl::StrCat("L must be >= 1, got ", grid.seq_lens(i)));
    }
    c.ls.push_back({grid.seq_lens(i), path});
  }
  if (c.ls.empty()) {
    if (spec.training().seq_len() < 1) {
      return Invalid("training.seq_len",
                     absl::StrCat("L must be >= 1 (or give ", p, "seq_lens), got ",
                                  spec.training().seq_len()));
    }
    c.ls.push_back({spec.training().seq_len(), "training.seq_len"});
  }

  for (int i = 0; i < grid.ks_size(); ++i) {
    const std::string path = absl::StrCat(p, "ks[", i, "]");
    if (grid.ks(i) < 1) return Invalid(path, absl::StrCat("K must be >= 1, got ", grid.ks(i)));
    c.ks.push_back({grid.ks(i), path});
  }
  if (c.ks.empty()) c.ks.push_back({std::max(1, grid.base().k()), p + "base.k"});

  for (int i = 0; i < grid.as_size(); ++i) {
    const std::string path = absl::StrCat(p, "as[", i, "]");
    if (!(grid.as(i) > 0) || !std::isfinite(grid.as(i))) {
      return Invalid(path, absl::StrCat("A must be > 0, got ", grid.as(i)));
    }
    c.as.push_back({grid.as(i), path});
  }
  if (c.as.empty()) c.as.push_back({grid.base().a(), p + "base.a"});

  for (int i = 0; i < grid.flop_budgets_size(); ++i) {
    const std::string path = absl::StrCat(p, "flop_budgets[", i, "]");
    if (!(grid.flop_budgets(i) > 0) || !std::isfinite(grid.flop_budgets(i))) {
      return Invalid(path, absl::StrCat("the FLOP budget must be > 0, got ", grid.flop_budgets(i)));
    }
    c.budgets.push_back({grid.flop_budgets(i), path});
  }
  if (c.budgets.empty()) {
    if (!(spec.training().flop_budget() > 0) || !std::isfinite(spec.training().flop_budget())) {
      return Invalid("training.flop_budget",
                     absl::StrCat("the FLOP budget must be > 0 (or give ", p, "flop_budgets), got ",
                                  spec.training().flop_budget()));
    }
    c.budgets.push_back({spec.training().flop_budget(), "training.flop_budget"});
  }

  for (int i = 0; i < grid.moe_experts_size(); ++i) {
    const std::string path = absl::StrCat(p, "moe_experts[", i, "]");
    xmod::v1::MoESpec moe;
    if (absl::Status s = ParseExperts(grid.moe_experts(i), &moe); !s.ok()) {
      return Invalid(path, std::string(s.message()));
    }
    c.moes.push_back({grid.moe_experts(i), path});
  }
  if (c.moes.empty()) c.moes.push_back({"", ""});

  std::set<uint64_t> distinct_seeds;
  for (int i = 0; i < grid.seeds_size(); ++i) {
    const std::string path = absl::StrCat(p, "seeds[", i, "]");
    if (!distinct_seeds.insert(grid.seeds(i)).second) {
      return Invalid(path, absl::StrCat("seed ", grid.seeds(i), " is listed twice"));
    }
    c.seeds.push_back({grid.seeds(i), path});
  }
  c.replicated = !c.seeds.empty();
  if (c.seeds.empty()) c.seeds.push_back({spec.training().seed(), "training.seed"});
  return c;
}

// The RunSpec of one combination (accounting not yet checked).
xmod::v1::RunSpec BuildRunSpec(const SweepSpec& spec, const GridSpec& grid, const Combo& c) {
  xmod::v1::RunSpec run;
  ModelSpec* m = run.mutable_model();
  *m = grid.base();
  m->set_arch(c.arch.value);
  m->mutable_backbone()->set_name(c.backbone.value);
  m->set_k(c.k.value);
  m->set_a(c.a.value);
  if (UsesK(m->arch()) && m->k() == 1) m->set_arch(xmod::v1::DENSE);  // the dense reference
  if (!UsesK(m->arch())) {
    m->set_k(1);
    m->set_a(0);
  } else if (!UsesA(m->arch())) {
    m->set_a(0);
  }
  if (m->arch() == xmod::v1::MOE) {
    if (!c.moe.value.empty()) ParseExperts(c.moe.value, m->mutable_moe()).IgnoreError();
  } else {
    m->clear_moe();
  }
  if (m->arch() == xmod::v1::DENSE) {
    // Routing options mean nothing to a dense model; clearing them lets duplicates meet.
    m->clear_n0();
    m->clear_tau();
    m->clear_router_loss_weight();
    m->clear_gate_scale_init();
    m->set_no_anchors(false);
    m->set_no_gated_scaling(false);
    m->set_no_token_choice_bias(false);
  }
  *run.mutable_training() = spec.training();
  run.mutable_training()->set_seq_len(c.l.value);
  run.mutable_training()->set_flop_budget(c.budget.value);
  run.mutable_training()->set_seed(c.seed.value);
  *run.mutable_data() = spec.data();
  return run;
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
        return Invalid(path, absl::StrCat(n, " values, at most ", limits.max_values));
      }
      for (int i = 0; i < n; ++i) {
        const std::string item = absl::StrCat(path, "[", i, "]");
        if (field->type() == FieldDescriptor::TYPE_STRING) {
          const size_t bytes =
              reflection->GetRepeatedStringReference(message, field, i, nullptr).size();
          if (bytes > static_cast<size_t>(limits.max_string_bytes)) {
            return Invalid(item, absl::StrCat(bytes, " bytes, at most ", limits.max_string_bytes));
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
        return Invalid(path, absl::StrCat(bytes, " bytes, at most ", limits.max_string_bytes));
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

// The spec's sizes against `limits`, before any expansion: field sizes, bootstrap samples,
// and the number of combinations its grids make.
absl::Status CheckLimits(const SweepSpec& spec, const SpecLimits& limits) {
  if (absl::Status s = CheckSizes(spec, "", limits); !s.ok()) return s;
  const int samples = spec.fit().bootstrap_samples();
  if (samples < 0) return Invalid("fit.bootstrap_samples", "must be >= 0 (0 = no bootstrap)");
  if (samples > limits.max_bootstrap_samples) {
    return Invalid("fit.bootstrap_samples",
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
      return Invalid(absl::StrCat("grids[", g, "]"),
                     absl::StrCat("the grids expand to more than ", limits.max_runs,
                                  " runs, the most one sweep may have"));
    }
  }
  return absl::OkStatus();
}

std::string DedupeKey(const xmod::v1::RunSpec& run) {
  std::string key;
  google::protobuf::io::StringOutputStream stream(&key);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.SetSerializationDeterministic(true);
  run.SerializeToCodedStream(&out);
  out.Trim();
  return key;
}

}  // namespace

std::string FormatFlops(double flops) {
  std::string text = absl::StrFormat("%.3g", flops);  // "2.1e+09", "1e+03", "512"
  const size_t e = text.find('e');
  if (e == std::string::npos) return text;
  std::string mantissa = text.substr(0, e);
  std::string exponent = text.substr(e + 1);
  bool negative = false;
  if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
    negative = exponent[0] == '-';
    exponent = exponent.substr(1);
  }
  while (exponent.size() > 1 && exponent[0] == '0') exponent = exponent.substr(1);
  return absl::StrCat(mantissa, "e", negative ? "-" : "", exponent);
}

absl::StatusOr<std::vector<xmod::v1::Run>> ExpandSweep(const SweepSpec& spec,
                                                       const ExpansionOptions& options) {
  if (absl::Status s = CheckLimits(spec, options.limits); !s.ok()) return s;
  if (spec.name().empty()) return Invalid("name", "a sweep needs a name");
  if (spec.grids_size() == 0) return Invalid("grids", "at least one grid is required");
  if (spec.max_attempts() < 0) return Invalid("max_attempts", "must be >= 0 (0 = default 5)");
  if (absl::Status s = ValidateTraining(spec.training()); !s.ok()) return s;
  if (absl::Status s = CheckGlob("data.train_glob", spec.data().train_glob(), options); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckGlob("data.val_glob", spec.data().val_glob(), options); !s.ok()) {
    return s;
  }
  for (int i = 0; i < spec.fit().held_out_backbones_size(); ++i) {
    const std::vector<std::string> presets = BackbonePresetNames();
    if (std::find(presets.begin(), presets.end(), spec.fit().held_out_backbones(i)) ==
        presets.end()) {
      return Invalid(absl::StrCat("fit.held_out_backbones[", i, "]"),
                     absl::StrCat("unknown backbone \"", spec.fit().held_out_backbones(i), "\""));
    }
  }

  std::vector<GridChoices> grids;
  std::set<double> budgets;
  for (int g = 0; g < spec.grids_size(); ++g) {
    absl::StatusOr<GridChoices> c = GridValues(spec, g);
    if (!c.ok()) return c.status();
    for (const auto& b : c->budgets) budgets.insert(b.value);
    grids.push_back(*std::move(c));
  }
  const bool multiple_budgets = budgets.size() > 1;
  const int max_attempts = spec.max_attempts() > 0 ? spec.max_attempts() : kDefaultMaxAttempts;
  const int64_t batch_tokens = spec.training().batch_tokens();
  const int64_t ranks = std::max(1, spec.training().ranks());

  std::vector<xmod::v1::Run> runs;
  std::map<std::string, size_t> seen_specs;  // DedupeKey -> index in runs
  std::set<std::string> names;
  for (int g = 0; g < spec.grids_size(); ++g) {
    const GridSpec& grid = spec.grids(g);
    const GridChoices& gc = grids[g];
    for (const auto& arch : gc.archs)
      for (const auto& backbone : gc.backbones)
        for (const auto& l : gc.ls)
          for (const auto& k : gc.ks)
            for (const auto& a : gc.as)
              for (const auto& budget : gc.budgets)
                for (const auto& moe : gc.moes)
                  for (const auto& seed : gc.seeds) {
                    const Combo combo{arch, backbone, l, k, a, budget, moe, seed};
                    xmod::v1::RunSpec run_spec = BuildRunSpec(spec, grid, combo);
                    if (batch_tokens % l.value != 0) {
                      return Invalid("training.batch_tokens",
                                     absl::StrCat(batch_tokens,
                                                  " tokens per step is not a "
                                                  "multiple of L = ",
                                                  l.value, " (", l.path, ")"));
                    }
                    // Each data-parallel rank takes an equal share of the step's windows.
                    const int64_t windows = batch_tokens / l.value;
                    if (windows % ranks != 0) {
                      return Invalid("training.ranks",
                                     absl::StrCat(ranks, " ranks do not divide the ", windows,
                                                  " windows of a step (batch_tokens / L = ",
                                                  batch_tokens, " / ", l.value, ", ", l.path, ")"));
                    }
                    absl::StatusOr<Accounting> acc = Account(
                        run_spec.model(), l.value, TrainFlopsMultiplier(run_spec.training()));
                    if (!acc.ok()) return MapModelError(acc.status(), combo, g);
                    const double step_flops =
                        acc->train_flops_per_token * static_cast<double>(batch_tokens);
                    if (budget.value < step_flops) {
                      return Invalid(budget.path,
                                     absl::StrCat(FormatFlops(budget.value),
                                                  " is too small for one step (one step costs ",
                                                  FormatFlops(step_flops), " FLOPs)"));
                    }
                    // A run several grids produce is kept once and carries every label.
                    auto [seen, fresh] = seen_specs.emplace(DedupeKey(run_spec), runs.size());
                    if (!fresh) {
                      xmod::v1::Run& first = runs[seen->second];
                      const std::vector<std::string> labels = absl::StrSplit(first.label(), '+');
                      if (std::find(labels.begin(), labels.end(), grid.label()) == labels.end()) {
                        first.set_label(absl::StrCat(first.label(), "+", grid.label()));
                      }
                      continue;
                    }

                    xmod::v1::Run run;
                    std::string name = RunName(run_spec, multiple_budgets, gc.replicated);
                    for (int n = 2; names.count(name) > 0; ++n) {
                      name =
                          absl::StrCat(RunName(run_spec, multiple_budgets, gc.replicated), "-", n);
                    }
                    names.insert(name);
                    run.set_name(name);
                    run.set_label(grid.label());
                    run.set_state(xmod::v1::QUEUED);
                    run.set_priority(spec.priority());
                    run.set_max_attempts(max_attempts);
                    const auto& fit = spec.fit();
                    run.set_held_out(
                        std::find(fit.held_out_seq_lens().begin(), fit.held_out_seq_lens().end(),
                                  l.value) != fit.held_out_seq_lens().end() ||
                        std::find(fit.held_out_backbones().begin(), fit.held_out_backbones().end(),
                                  backbone.value) != fit.held_out_backbones().end());
                    run.set_forward_flops_per_token(acc->forward_flops_per_token);
                    run.set_total_params(acc->total_params);
                    run.mutable_progress()->set_flop_budget(budget.value);
                    *run.mutable_spec() = std::move(run_spec);
                    runs.push_back(std::move(run));
                  }
  }
  return runs;
}

}  // namespace xmod
