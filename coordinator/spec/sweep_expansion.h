// Sweep expansion: validates a SweepSpec and expands its grids into runs (the Cartesian
// product over architecture x backbone x L x K x A x budget x MoE config), each with its
// training-FLOP budget and its parameter / FLOP accounting (model/accounting, paper
// Table 6). Pure functions apart from the data-glob check (data_roots.h); thread-safe.
#ifndef XMOD_COORDINATOR_SPEC_SWEEP_EXPANSION_H_
#define XMOD_COORDINATOR_SPEC_SWEEP_EXPANSION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/spec/spec_options.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

// The runs of `spec` in expansion order (grid by grid; within a grid arch, backbone, L, K,
// A, budget, MoE config vary slowest to fastest). Each run has id 0, state QUEUED, its name
// (e.g. "xmod-cpu-d128-L256-K4-A1"), label, priority, max_attempts, held_out (FitPlan),
// forward_flops_per_token, total_params and a RunSpec with model, training (seq_len and
// flop_budget of the run) and data filled in. Rules:
//   - an empty repeated grid field takes its single value from the grid's `base` model
//     (backbones from base.backbone.name, L from training.seq_len, budgets from
//     training.flop_budget); non-zero fields of base.backbone override every backbone;
//     an empty list that an architecture of the grid needs with no base value is refused
//     naming the list ("grids[0].ks: MOD needs at least one K (grids[0].base.k is 0)",
//     grid_choices.h), never expanded to another architecture;
//   - DENSE and MOE ignore K and A (stored as K = 1, A = 0); MOD ignores A (A = 0);
//   - a sparse architecture with K = 1 is the dense reference and becomes DENSE;
//   - identical runs (same model, training and data) are kept once, first occurrence, with
//     the distinct labels of the grids that produced them joined by '+' ("nact+axk": the run
//     belongs to both sweeps of the B.4 design, fitter::SweepRolesOfLabels);
//   - a grid with seeds gives one run per seed (training.seed), named "...-s<seed>".
// INVALID_ARGUMENT naming the field path, in its message and as its payload
// (common/field_path.h) ("grids[0].ks[2]: K must be >= 1", "data.train_glob:
// no file under a data root matches ...", "training.flop_budget: 1e3 is too small for one
// step (one step costs 2.1e9 FLOPs)", "grids[1].ks: 5000 values, at most 1000") when any run
// is invalid or the spec exceeds options.limits (checked first, before anything is
// expanded); then no run is returned.
absl::StatusOr<std::vector<xmod::v1::Run>> ExpandSweep(const xmod::v1::SweepSpec& spec,
                                                       const ExpansionOptions& options = {});

// How many times ExpandSweep has been called in this process, for tests that count the
// expansions one request makes (a submitted spec is expanded once).
int64_t SweepExpansionCount();

// "1e3", "2.1e9": a FLOP count with three significant digits, as in error messages.
std::string FormatFlops(double flops);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SPEC_SWEEP_EXPANSION_H_
