// Seeding: what a submitted sweep queues, from the one expansion of its spec
// (docs/adaptive-design.md). A plain sweep queues every run of its grids. An adaptive sweep
// (SweepSpec.adaptive.enabled) takes its grids as the design's candidate space: the
// candidate lists of fitter::AdaptiveConfig are read from the expanded runs, and only the
// runs of fitter::SeedDesign's seed set are queued; the AdaptiveController decides the rest
// later. Also the mapping between expanded runs and the fitter's candidates that the
// controller's decisions use. Pure functions; thread-safe.
#ifndef XMOD_COORDINATOR_ADAPTIVE_SEEDING_H_
#define XMOD_COORDINATOR_ADAPTIVE_SEEDING_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/spec/sweep_expansion.h"
#include "fitter/adaptive_design.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// A submitted spec expanded once, and everything its submission needs from that expansion.
struct ExpandedSweep {
  // The runs to queue: every run of the grids, or for an adaptive design its seed set.
  std::vector<xmod::v1::Run> runs;
  // An adaptive design's candidate space: every run of the grids (empty otherwise).
  std::vector<xmod::v1::Run> candidates;
  // An adaptive design's configuration (AdaptiveConfigOf).
  std::optional<fitter::AdaptiveConfig> design;
};

// Validates and expands `spec` (ExpandSweep, the only expansion of a submission) and, for an
// adaptive design, its configuration and seed set. INVALID_ARGUMENT naming the field path,
// as ExpandSweep, AdaptiveConfigOf and SeedRuns.
absl::StatusOr<ExpandedSweep> ExpandForSubmission(const xmod::v1::SweepSpec& spec,
                                                  const ExpansionOptions& options);

// The runs of a stored spec's grids, the candidate space of its decisions (the data globs
// were checked when the sweep was submitted).
absl::StatusOr<std::vector<xmod::v1::Run>> ExpandCandidates(const xmod::v1::SweepSpec& spec);

// The fitter's candidate for an expanded run (nullopt for runs the design does not use:
// only DENSE and XMOD with K >= 2 are).
std::optional<fitter::Candidate> CandidateOf(const xmod::v1::Run& run);

// The run of `expanded` that trains candidate `c`, if any.
std::optional<xmod::v1::Run> RunFor(const fitter::Candidate& c,
                                    const std::vector<xmod::v1::Run>& expanded);

// `targets` as the fitter's; INVALID_ARGUMENT naming "<path>[i].flops" (".seq_len",
// ".backbone").
absl::StatusOr<std::vector<fitter::Target>> TargetsOf(
    const google::protobuf::RepeatedPtrField<xmod::v1::DesignTarget>& targets,
    const std::string& path);

// The candidate space of `expanded` (candidate K, A, L, backbones and budgets are the union
// over the runs, K = 1 for DENSE) and the settings of spec.adaptive with their defaults filled
// in (max_proposals = max_in_flight); targets and compute budget are left for the caller to
// check, since a sweep asked for proposals by hand need not have them.
absl::StatusOr<fitter::AdaptiveConfig> DesignSpaceOf(const xmod::v1::SweepSpec& spec,
                                                     const std::vector<xmod::v1::Run>& expanded);

// The fitter's design configuration of an adaptive sweep whose grids expand to `expanded`:
// DesignSpaceOf, with targets and compute budget required and the whole validated.
// INVALID_ARGUMENT naming the field path ("adaptive.targets[0].backbone: ...",
// "adaptive.compute_budget: must be > 0").
absl::StatusOr<fitter::AdaptiveConfig> AdaptiveConfigOf(const xmod::v1::SweepSpec& spec,
                                                        const std::vector<xmod::v1::Run>& expanded);

// The runs of `expanded` that fitter::SeedDesign picks for `config` (every replicate of each,
// GridSpec.seeds). INVALID_ARGUMENT naming the spec field, or the seed run that the grids do
// not contain.
absl::StatusOr<std::vector<xmod::v1::Run>> SeedRuns(const fitter::AdaptiveConfig& config,
                                                    const std::vector<xmod::v1::Run>& expanded);

// fitter::ValidateConfig's field paths (AdaptiveConfig fields) as the spec's: targets,
// budget, tolerance and ensemble under "adaptive.", the candidate lists under "grids: ".
absl::Status InSpec(const absl::Status& status);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_ADAPTIVE_SEEDING_H_
