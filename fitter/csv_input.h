// Δ observations as CSV, for xmod-fit --csv and the benchmark: a header naming the columns
// `n_act,L,K,A,delta` in any order, optionally `group` (CV labels, several separated by
// ';'), `held_out` (1 = out-of-range: predicted, not fitted) and `sweep` (the B.4 sweep of
// the row: kxl, nact or axk, several separated by ';' for a run two sweeps share; with it
// the fit assigns its stages by sweep, two_stage.h) and `C` (the run's training FLOPs, which
// the exposure term of the full candidate law needs, law.h). n_act is a parameter
// count (556e6) mapped to the nearest backbone preset (standard 28-layer plan, N0 = 4).
// Pure functions; thread-safe.
#ifndef XMOD_FITTER_CSV_INPUT_H_
#define XMOD_FITTER_CSV_INPUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/observations.h"

namespace xmod::fitter {

// Parses CSV text. INVALID_ARGUMENT naming the line and column for a missing required
// column, a malformed number, a NaN/inf delta, C <= 0, K < 2, an n_act far from every preset, or
// an unknown sweep name.
absl::StatusOr<std::vector<Observation>> ParseDeltaCsv(const std::string& text);

// Writes observations in the same format (n_act as the nominal size; group, held_out,
// sweep and C columns included, C empty where unknown).
std::string WriteDeltaCsv(const std::vector<Observation>& observations);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_CSV_INPUT_H_
