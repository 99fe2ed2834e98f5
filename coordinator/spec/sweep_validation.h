// Sweep validation: the checks of a SweepSpec that come before its grids are expanded
// (sweep_expansion.h, which calls them) — its sizes against SpecLimits, then its sweep-wide fields
// (name, training, data globs, fit). Every error is INVALID_ARGUMENT naming the field path
// (common/field_path.h). Pure functions apart from the data-glob look-up (data_roots.h).
#ifndef XMOD_COORDINATOR_SPEC_SWEEP_VALIDATION_H_
#define XMOD_COORDINATOR_SPEC_SWEEP_VALIDATION_H_

#include "absl/status/status.h"
#include "coordinator/spec/spec_options.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// The spec's sizes against `limits`, before any expansion: every repeated field and string,
// the bootstrap samples, adaptive.max_in_flight and the number of combinations its grids
// make ("grids[1].ks: 5000 values, at most 1000").
absl::Status CheckLimits(const xmod::v1::SweepSpec& spec, const SpecLimits& limits);

// The fields every run shares: name, grids present, max_attempts, training, the data globs
// (with options.data_roots and options.check_data_paths) and fit.held_out_backbones.
absl::Status ValidateSweepFields(const xmod::v1::SweepSpec& spec, const ExpansionOptions& options);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SPEC_SWEEP_VALIDATION_H_
