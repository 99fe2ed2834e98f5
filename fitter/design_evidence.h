// What an adaptive design may claim when it stops (docs/adaptive-design.md, "Stopping"):
//  - the regret bound at confidence q of a target's answer: the q-quantile over the ensemble's
//    members of Δ_m(recommended) − min_o Δ_m(o), the claim "regret ≤ bound" that a calibrated
//    design gets wrong in at most a share 1 − q of its stops (the simulator reports that share);
//  - whether the answer agrees with what the design's own runs measured: a design whose law
//    predicts a configuration it ran, at a target's (backbone, L), further from the measured
//    seed-averaged Δ than their noise allows, or whose measured runs at a target say another
//    option beats the recommendation by more than their noise, must not stop on its ensemble's
//    confidence (the law is wrong there, and the ensemble, refits of that law, cannot say so).
// Pure; thread-compatible.
#ifndef XMOD_FITTER_DESIGN_EVIDENCE_H_
#define XMOD_FITTER_DESIGN_EVIDENCE_H_

#include <optional>
#include <string>
#include <vector>

#include "fitter/design_ensemble.h"
#include "fitter/law.h"
#include "fitter/observations.h"

namespace xmod::fitter {

// The q-quantile (0 < q < 1; by the members' order statistics, the smallest value with at
// least a share q of members at or below it) of the members' regret of option `chosen`:
// deltas[member][option].
double RegretQuantile(const std::vector<std::vector<double>>& deltas, size_t chosen, double q);

// The first disagreement (a sentence naming the run, what was measured, what the law says and
// the noise) between the members' predictions and the completed observations at the
// targets' (backbone, L, C within 2%), or nullopt when every one is within `z` standard errors:
//  - a measured Δ (mean of its replicates) against the members' mean prediction there, with
//    standard error sqrt(noise_sd² / replicates + members' variance);
//  - a measured option beating the recommended option's measurement (or, unmeasured, the
//    members' mean prediction) by more than z · noise_sd · sqrt(1/n_o + 1/n_rec).
std::optional<std::string> DisagreementWithRuns(const std::vector<Observation>& completed,
                                                const std::vector<TargetAnswer>& answers,
                                                const std::vector<LawParams>& members,
                                                double noise_sd, double z);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_DESIGN_EVIDENCE_H_
