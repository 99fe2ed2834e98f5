// See seeding.h.
#include "coordinator/adaptive/seeding.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "fitter/law_backbones.h"

namespace xmod {
namespace {

constexpr int kDefaultMaxInFlight = 4;
constexpr int kDefaultEnsemble = 32;
constexpr double kDefaultTolerance = 2e-4;

bool SameFlops(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); }

bool IsDenseRun(const xmod::v1::Run& run) { return run.spec().model().arch() == xmod::v1::DENSE; }
bool IsXmodRun(const xmod::v1::Run& run) {
  return run.spec().model().arch() == xmod::v1::XMOD && run.spec().model().k() >= 2;
}

bool Matches(const fitter::Candidate& c, const xmod::v1::Run& run) {
  std::optional<fitter::Candidate> r = CandidateOf(run);
  return r && r->backbone == c.backbone && r->seq_len == c.seq_len && r->k == c.k &&
         (c.k == 1 || r->a == c.a) && SameFlops(r->flops, c.flops);
}

template <typename T>
void AddUnique(std::vector<T>* values, T v) {
  if (std::find(values->begin(), values->end(), v) == values->end()) values->push_back(v);
}

// The candidate lists of `expanded`, sorted (backbones in the order the runs give them).
void AddCandidateSpace(const std::vector<xmod::v1::Run>& expanded, fitter::AdaptiveConfig* config) {
  for (const xmod::v1::Run& run : expanded) {
    std::optional<fitter::Candidate> c = CandidateOf(run);
    if (!c) continue;
    AddUnique(&config->ks, c->k);
    if (c->k >= 2) AddUnique(&config->as, c->a);
    AddUnique(&config->seq_lens, c->seq_len);
    AddUnique(&config->backbones, c->backbone);
    AddUnique(&config->flop_budgets, c->flops);
  }
  std::sort(config->ks.begin(), config->ks.end());
  std::sort(config->as.begin(), config->as.end());
  std::sort(config->seq_lens.begin(), config->seq_lens.end());
  std::sort(config->flop_budgets.begin(), config->flop_budgets.end());
}

}  // namespace

std::optional<fitter::Candidate> CandidateOf(const xmod::v1::Run& run) {
  if (!IsDenseRun(run) && !IsXmodRun(run)) return std::nullopt;
  fitter::Candidate c;
  c.backbone = run.spec().model().backbone().name();
  c.seq_len = run.spec().training().seq_len();
  c.k = IsDenseRun(run) ? 1 : run.spec().model().k();
  c.a = IsDenseRun(run) ? 1 : run.spec().model().a();
  c.flops = run.spec().training().flop_budget();
  return c;
}

std::optional<xmod::v1::Run> RunFor(const fitter::Candidate& c,
                                    const std::vector<xmod::v1::Run>& expanded) {
  for (const xmod::v1::Run& run : expanded) {
    if (Matches(c, run)) return run;
  }
  return std::nullopt;
}

absl::Status InSpec(const absl::Status& status) {
  const std::optional<std::string> path = FieldPathOf(status);
  for (const char* field : {"targets", "compute_budget", "tolerance", "bootstrap_samples",
                            "max_proposals", "stable_decisions", "noise_floor"}) {
    if (path && absl::StartsWith(*path, field)) return Reroot(status, "adaptive.");
  }
  return InvalidField("grids", status.message());
}

absl::StatusOr<std::vector<fitter::Target>> TargetsOf(
    const google::protobuf::RepeatedPtrField<xmod::v1::DesignTarget>& targets,
    const std::string& path) {
  std::vector<fitter::Target> out;
  for (int i = 0; i < targets.size(); ++i) {
    const xmod::v1::DesignTarget& t = targets[i];
    const std::string at = absl::StrCat(path, "[", i, "]");
    if (!(t.flops() > 0)) return InvalidField(at + ".flops", "must be > 0");
    if (t.seq_len() < 1) return InvalidField(at + ".seq_len", "must be >= 1");
    if (t.backbone().empty()) return InvalidField(at + ".backbone", "must not be empty");
    if (absl::StatusOr<double> n = fitter::NominalActiveParams(t.backbone()); !n.ok()) {
      return InvalidField(at + ".backbone",
                          absl::StrCat("'", t.backbone(), "': ", n.status().message()));
    }
    out.push_back({t.flops(), t.seq_len(), t.backbone()});
  }
  return out;
}

absl::StatusOr<fitter::AdaptiveConfig> DesignSpaceOf(const xmod::v1::SweepSpec& spec,
                                                     const std::vector<xmod::v1::Run>& expanded) {
  fitter::AdaptiveConfig config;
  AddCandidateSpace(expanded, &config);
  const xmod::v1::AdaptiveSpec& adaptive = spec.adaptive();
  absl::StatusOr<std::vector<fitter::Target>> targets =
      TargetsOf(adaptive.targets(), "adaptive.targets");
  if (!targets.ok()) return targets.status();
  config.targets = *std::move(targets);
  config.compute_budget = adaptive.compute_budget();
  if (adaptive.tolerance() < 0) return InvalidField("adaptive.tolerance", "must be >= 0");
  config.tolerance = adaptive.tolerance() > 0 ? adaptive.tolerance() : kDefaultTolerance;
  if (adaptive.bootstrap_samples() < 0 || adaptive.bootstrap_samples() == 1) {
    return InvalidField("adaptive.bootstrap_samples", "must be 0 or >= 2");
  }
  config.bootstrap_samples =
      adaptive.bootstrap_samples() > 0 ? adaptive.bootstrap_samples() : kDefaultEnsemble;
  if (adaptive.max_in_flight() < 0) return InvalidField("adaptive.max_in_flight", "must be >= 0");
  config.max_proposals =
      adaptive.max_in_flight() > 0 ? adaptive.max_in_flight() : kDefaultMaxInFlight;
  config.seed = adaptive.seed();
  return config;
}

absl::StatusOr<fitter::AdaptiveConfig> AdaptiveConfigOf(
    const xmod::v1::SweepSpec& spec, const std::vector<xmod::v1::Run>& expanded) {
  if (!spec.adaptive().enabled()) {
    return InvalidField("adaptive.enabled", "the sweep has no adaptive design");
  }
  absl::StatusOr<fitter::AdaptiveConfig> config = DesignSpaceOf(spec, expanded);
  if (!config.ok()) return config.status();
  if (config->targets.empty()) return InvalidField("adaptive.targets", "give at least one target");
  if (!(config->compute_budget > 0)) return InvalidField("adaptive.compute_budget", "must be > 0");
  if (absl::Status s = fitter::ValidateConfig(*config); !s.ok()) return InSpec(s);
  return config;
}

absl::StatusOr<std::vector<xmod::v1::Run>> SeedRuns(const fitter::AdaptiveConfig& config,
                                                    const std::vector<xmod::v1::Run>& expanded) {
  absl::StatusOr<std::vector<fitter::Candidate>> seed = fitter::SeedDesign(config);
  if (!seed.ok()) return InSpec(seed.status());
  std::vector<xmod::v1::Run> out;
  std::set<std::string> taken;
  for (const fitter::Candidate& c : *seed) {
    bool found = false;
    for (const xmod::v1::Run& run : expanded) {  // every replicate (GridSpec.seeds)
      if (Matches(c, run) && taken.insert(run.name()).second) {
        out.push_back(run);
        found = true;
      }
    }
    if (!found && !std::any_of(out.begin(), out.end(),
                               [&](const xmod::v1::Run& r) { return Matches(c, r); })) {
      return InvalidField("grids", absl::StrCat("the seed run ", c.Describe(),
                                                " of the adaptive design is not in the grids"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<xmod::v1::Run>> ExpandCandidates(const xmod::v1::SweepSpec& spec) {
  ExpansionOptions options;
  options.check_data_paths = false;  // checked when the sweep was submitted
  return ExpandSweep(spec, options);
}

absl::StatusOr<ExpandedSweep> ExpandForSubmission(const xmod::v1::SweepSpec& spec,
                                                  const ExpansionOptions& options) {
  absl::StatusOr<std::vector<xmod::v1::Run>> runs = ExpandSweep(spec, options);
  if (!runs.ok()) return runs.status();
  ExpandedSweep sweep;
  if (!spec.adaptive().enabled()) {
    sweep.runs = *std::move(runs);
    return sweep;
  }
  // The grids are the candidate space; only the seed set is queued.
  absl::StatusOr<fitter::AdaptiveConfig> design = AdaptiveConfigOf(spec, *runs);
  if (!design.ok()) return design.status();
  absl::StatusOr<std::vector<xmod::v1::Run>> seed = SeedRuns(*design, *runs);
  if (!seed.ok()) return seed.status();
  sweep.runs = *std::move(seed);
  sweep.candidates = *std::move(runs);
  sweep.design = *std::move(design);
  return sweep;
}

}  // namespace xmod
