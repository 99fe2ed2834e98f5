// See sweep_expansion.h. Validation first (sweep_validation.h, then every grid's value lists,
// grid_choices.h), then each grid's Cartesian product, with accounting per run, the one-step
// budget check and deduplication.
#include "coordinator/spec/sweep_expansion.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/field_path.h"
#include "common/proto_bytes.h"
#include "coordinator/spec/grid_choices.h"
#include "coordinator/spec/sweep_validation.h"
#include "model/accounting/accounting.h"

namespace xmod {
namespace {

using xmod::v1::Architecture;
using xmod::v1::GridSpec;
using xmod::v1::ModelSpec;
using xmod::v1::SweepSpec;

std::atomic<int64_t> expansions{0};

std::string ArchPrefix(Architecture arch) {
  std::string name = absl::AsciiStrToLower(xmod::v1::Architecture_Name(arch));
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

// Account() names fields relative to ModelSpec; point them at the grid entry that set them.
absl::Status MapModelError(const absl::Status& status, const Combo& c, int g) {
  const std::optional<std::string> field = FieldPathOf(status);
  if (!field) return InvalidField(absl::StrCat("grids[", g, "]"), status.message());
  const std::map<std::string, const std::string*> set_by = {{"k", &c.k.path},
                                                            {"a", &c.a.path},
                                                            {"seq_len", &c.l.path},
                                                            {"arch", &c.arch.path},
                                                            {"backbone.name", &c.backbone.path}};
  if (auto it = set_by.find(*field); it != set_by.end()) return WithFieldPath(status, *it->second);
  if (!c.moe.path.empty() && (*field == "moe.active_experts" || *field == "moe.total_experts" ||
                              *field == "moe.shared_experts")) {
    // "moe.total_experts: ..." -> "grids[g].moe_experts[i]: total_experts: ..."
    return InvalidField(c.moe.path, absl::StripPrefix(status.message(), "moe."));
  }
  return Reroot(status, absl::StrCat("grids[", g, "].base."));
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

std::string DedupeKey(const xmod::v1::RunSpec& run) { return DeterministicBytes(run); }

// Calls `visit` with every index into axes of lengths `sizes` (none empty), the last axis
// varying fastest, until it returns an error.
template <typename Visit>
absl::Status ForEachCombination(const std::vector<size_t>& sizes, Visit visit) {
  std::vector<size_t> index(sizes.size(), 0);
  while (true) {
    if (absl::Status s = visit(index); !s.ok()) return s;
    size_t axis = sizes.size();
    while (axis > 0 && ++index[axis - 1] == sizes[axis - 1]) index[--axis] = 0;
    if (axis == 0) return absl::OkStatus();
  }
}

// The step of a combination: batch_tokens a multiple of L, split evenly over the ranks.
absl::Status CheckStep(const xmod::v1::TrainingSpec& training, const Choice<int>& l) {
  const int64_t batch_tokens = training.batch_tokens();
  const int64_t ranks = std::max(1, training.ranks());
  if (batch_tokens % l.value != 0) {
    return InvalidField("training.batch_tokens",
                        absl::StrCat(batch_tokens, " tokens per step is not a multiple of L = ",
                                     l.value, " (", l.path, ")"));
  }
  // Each data-parallel rank takes an equal share of the step's windows.
  const int64_t windows = batch_tokens / l.value;
  if (windows % ranks != 0) {
    return InvalidField("training.ranks",
                        absl::StrCat(ranks, " ranks do not divide the ", windows,
                                     " windows of a step (batch_tokens / L = ", batch_tokens, " / ",
                                     l.value, ", ", l.path, ")"));
  }
  return absl::OkStatus();
}

// The runs of a sweep as its combinations are added: deduplicated, named uniquely.
class RunCollector {
 public:
  RunCollector(const SweepSpec& spec, bool multiple_budgets)
      : spec_(spec),
        multiple_budgets_(multiple_budgets),
        max_attempts_(spec.max_attempts() > 0 ? spec.max_attempts() : kDefaultMaxAttempts) {}

  // Checks and adds combination `combo` of grid `g`.
  absl::Status Add(int g, const GridChoices& choices, const Combo& combo) {
    const GridSpec& grid = spec_.grids(g);
    xmod::v1::RunSpec run_spec = BuildRunSpec(spec_, grid, combo);
    if (absl::Status s = CheckStep(spec_.training(), combo.l); !s.ok()) return s;
    absl::StatusOr<Accounting> acc =
        Account(run_spec.model(), combo.l.value, TrainFlopsMultiplier(run_spec.training()));
    if (!acc.ok()) return MapModelError(acc.status(), combo, g);
    const double step_flops =
        acc->train_flops_per_token * static_cast<double>(spec_.training().batch_tokens());
    if (combo.budget.value < step_flops) {
      return InvalidField(combo.budget.path,
                          absl::StrCat(FormatFlops(combo.budget.value),
                                       " is too small for one step (one step costs ",
                                       FormatFlops(step_flops), " FLOPs)"));
    }
    // A run several grids produce is kept once and carries every label.
    auto [seen, fresh] = seen_specs_.emplace(DedupeKey(run_spec), runs_.size());
    if (!fresh) {
      xmod::v1::Run& shared = runs_[seen->second];
      AddLabel(grid.label(), &shared);
      shared.set_preemptible(shared.preemptible() && Preemptible(grid));
      return absl::OkStatus();
    }
    runs_.push_back(NewRun(std::move(run_spec), grid.label(), choices.replicated, *acc));
    runs_.back().set_preemptible(Preemptible(grid));
    return absl::OkStatus();
  }

  std::vector<xmod::v1::Run> TakeRuns() { return std::move(runs_); }

 private:
  static void AddLabel(const std::string& label, xmod::v1::Run* run) {
    const std::vector<std::string> labels = absl::StrSplit(run->label(), '+');
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) {
      run->set_label(absl::StrCat(run->label(), "+", label));
    }
  }

  // GridSpec.preemptible, else SweepSpec.preemptible, else true.
  bool Preemptible(const GridSpec& grid) const {
    if (grid.has_preemptible()) return grid.preemptible();
    return !spec_.has_preemptible() || spec_.preemptible();
  }

  bool HeldOut(const xmod::v1::RunSpec& run_spec) const {
    const xmod::v1::FitPlan& fit = spec_.fit();
    const auto& lens = fit.held_out_seq_lens();
    const auto& backbones = fit.held_out_backbones();
    return std::find(lens.begin(), lens.end(), run_spec.training().seq_len()) != lens.end() ||
           std::find(backbones.begin(), backbones.end(), run_spec.model().backbone().name()) !=
               backbones.end();
  }

  xmod::v1::Run NewRun(xmod::v1::RunSpec run_spec, const std::string& label, bool replicated,
                       const Accounting& acc) {
    const std::string base_name = RunName(run_spec, multiple_budgets_, replicated);
    std::string name = base_name;
    for (int n = 2; names_.count(name) > 0; ++n) name = absl::StrCat(base_name, "-", n);
    names_.insert(name);
    xmod::v1::Run run;
    run.set_name(name);
    run.set_label(label);
    run.set_state(xmod::v1::QUEUED);
    run.set_priority(spec_.priority());
    run.set_max_attempts(max_attempts_);
    run.set_held_out(HeldOut(run_spec));
    run.set_forward_flops_per_token(acc.forward_flops_per_token);
    run.set_total_params(acc.total_params);
    run.mutable_progress()->set_flop_budget(run_spec.training().flop_budget());
    *run.mutable_spec() = std::move(run_spec);
    return run;
  }

  const SweepSpec& spec_;
  const bool multiple_budgets_;
  const int max_attempts_;
  std::vector<xmod::v1::Run> runs_;
  std::map<std::string, size_t> seen_specs_;  // DedupeKey -> index in runs_
  std::set<std::string> names_;
};

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

int64_t SweepExpansionCount() { return expansions.load(); }

absl::StatusOr<std::vector<xmod::v1::Run>> ExpandSweep(const SweepSpec& spec,
                                                       const ExpansionOptions& options) {
  expansions.fetch_add(1);
  if (absl::Status s = CheckLimits(spec, options.limits); !s.ok()) return s;
  if (absl::Status s = ValidateSweepFields(spec, options); !s.ok()) return s;
  std::vector<GridChoices> grids;
  std::set<double> budgets;
  for (int g = 0; g < spec.grids_size(); ++g) {
    absl::StatusOr<GridChoices> c = GridValues(spec, g);
    if (!c.ok()) return c.status();
    for (const auto& b : c->budgets) budgets.insert(b.value);
    grids.push_back(*std::move(c));
  }
  RunCollector runs(spec, /*multiple_budgets=*/budgets.size() > 1);
  for (int g = 0; g < spec.grids_size(); ++g) {
    const GridChoices& choices = grids[g];
    absl::Status s = ForEachCombination(choices.AxisSizes(), [&](const std::vector<size_t>& i) {
      return runs.Add(g, choices, choices.At(i));
    });
    if (!s.ok()) return s;
  }
  return runs.TakeRuns();
}

}  // namespace xmod
