// Proof by simulation of adaptive sweeps (xmod-design-sim): draw every run's Δ from known
// law parameters plus Gaussian noise σ and compare two ways of spending compute on the
// paper's targets.
//
// Targets: the B.4 grid's scales at its budget, C = 5e19: 556M at L ∈ {2k, 4k, 8k, 16k, 32k}
// and 165M, 298M, 936M at L = 32k; options K ∈ {2, 3, 4, 6, 8, 10, 12, 16, 20, 24, 28, 32}
// x A ∈ {0.5, 1, 2, 3, 4, 5} (the admissible ones). Recommendations are the Bayes answers
// of an ensemble (design_ensemble.h) under both strategies: for the grid, of the paper's
// two-stage fit (EnsembleOptions::joint = false; on B.4 data it recommends at least as well
// as the joint refinement, which overfits its one anchor-stride slice on some truths); for
// the adaptive design, of the joint fit Decide uses.
// Runs are trained `slots` at a time in rounds (every run takes one round), and the
// recommendations are refitted after each round; the curve is the mean over repetitions of
// each repetition's regret after the last round that ended at or below that compute.
//  - grid: the paper's B.4 design (PaperSweepObservations, 109 X-MoD runs; K x L and N_act
//    runs at 5e19, A x K runs at 3e19 as examples/paper/b4_*.textpb budget them) plus its
//    8 dense references at 5e19, completed in a random order (seeded).
//  - adaptive: SeedDesign, then every round's free slots go to Decide's proposals
//    (adaptive_design.h) over the candidate space {165M, 298M, 556M, 936M} x
//    L ∈ {2k..32k} x the options above at 5e19 only, until Decide stops or the compute
//    budget (budget_fraction x the grid's compute) is spent.
//  - learning curves (marks > 1, adaptive): a run trains over `marks` rounds and reports its
//    Δ at every mark f = 1/marks … 1 from the curve family above. Every round the design
//    refits the partial-curve model (partial_curve.h) on the repetition's completed curves,
//    forecasts the final Δ of runs in flight and stopped (DesignState::partial), decides, stops
//    every running run whose forecast sd is at most the fit's noise sd (its remaining marks
//    would tell little more than one more measurement; the design does not know σ), and fills
//    the free slots with the proposals; a proposal that names a stopped run resumes it where it
//    stopped (paying only its remaining FLOPs). A dense reference takes a slot for one round.
//    The curve's compute is the FLOPs trained so far. The grid's runs report only their end.
// Calibration: at every adaptive repetition that stopped on its confidence, each target's
// claimed regret bound is compared with the truth's regret of its answer (DesignSimReport).
// Deterministic under the seed. Thread-compatible.
#ifndef XMOD_FITTER_DESIGN_SIM_H_
#define XMOD_FITTER_DESIGN_SIM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "fitter/law.h"
#include "xmod/v1/design.pb.h"

namespace xmod::fitter {

struct DesignSimOptions {
  LawParams truth = Table8Params();
  double sigma = 0.003;               // noise sd of every run's Δ (nats)
  std::string strategy = "adaptive";  // "grid" or "adaptive"
  int reps = 10;
  uint64_t seed = 1;
  int slots = 8;                 // runs trained at once
  double budget_fraction = 1.0;  // adaptive: compute budget as a share of the grid's
  double tolerance = 2e-4;       // adaptive: AdaptiveConfig::tolerance
  double confidence = 0.9;       // adaptive: AdaptiveConfig::confidence
  // Learning curves (adaptive; see top of file): evaluation marks per run (1: a run reports
  // only its end, in one round), and the curve family Δ(f) = Δ(1) + b (f^(−α) − 1), b drawn
  // per run from N(curve_slope_mean, curve_slope_sd²), noise σ at every mark.
  int marks = 1;
  double curve_alpha = 0.5;
  double curve_slope_mean = 0.02;
  double curve_slope_sd = 0.01;
  int bootstrap_samples = 32;  // ensemble members of every fit
};

// INVALID_ARGUMENT naming the option for a bad strategy, reps < 1, slots < 2, sigma < 0,
// budget_fraction <= 0, confidence outside (0, 1), marks < 1; errors of the fits pass through.
absl::StatusOr<xmod::v1::DesignSimReport> RunDesignSim(const DesignSimOptions& options);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_DESIGN_SIM_H_
