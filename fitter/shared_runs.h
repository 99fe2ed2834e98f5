// Runs two sweeps share (paper Appendix B.4): "Each in-range experiment contributes one
// validation-loss observation at its target training-compute budget", so a configuration
// that two sweeps of the design list — the 556M, L = 32k, A = 1 runs of the K x L and N_act
// sweeps; the 165M, L = 32k, A = 1 runs of the N_act and A x K sweeps — is one observation
// carrying both sweeps' roles, whichever sweep (or grid) listed it and however often it was
// stored or trained. MergeSharedRuns collapses such observations before a fit, so R²_Δ counts
// each configuration once and a grouped-CV fold that holds one out leaves no twin in its
// training set (validation.h). Pure functions; thread-safe.
#ifndef XMOD_FITTER_SHARED_RUNS_H_
#define XMOD_FITTER_SHARED_RUNS_H_

#include <vector>

#include "fitter/observations.h"

namespace xmod::fitter {

// True when `o` has a run identity: it comes from a stored run (run_id != 0) with a known
// training-FLOP budget. Observations from given Δ values (CSV) or of unknown budget have
// none and are never merged.
bool HasRunIdentity(const Observation& o);

// The observations with one observation per run identity — backbone, L, K, A, N0, budget and
// training seed; the first occurrence is kept (its Δ, C, dense loss, name and run id), the
// later ones are dropped — and every observation of one configuration (the identity without
// the seed: all replicates of it) carrying the union of the roles (Observation::sweeps, in
// SweepRole order) and held out when any of them is (a prespecified out-of-range
// configuration stays out of range). Order is kept otherwise.
std::vector<Observation> MergeSharedRuns(std::vector<Observation> observations);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_SHARED_RUNS_H_
