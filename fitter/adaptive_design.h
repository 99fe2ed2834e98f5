// Law-guided adaptive sweeps: which runs to train next so that the recommended (K*, A*) at
// the target questions becomes right soonest per training FLOP, and when to stop. The
// coordinator calls Decide on every refit of an adaptive sweep; xmod-design-sim calls it in
// its loop (design_sim.h). docs/adaptive-design.md explains the criterion with an example.
//
// Criterion: expected reduction of the answer's regret per training FLOP (a knowledge-
// gradient / value-of-information rule). The uncertainty model is the ensemble of
// design_ensemble.h: M bootstrap refits, each a possible truth. The loss of the current state
// of knowledge is the members' mean regret of the Bayes answer, summed over the targets:
//   R(w) = Σ_t [ min_o Σ_m w_m Δ_m(t, o) − Σ_m w_m min_o Δ_m(t, o) ]
// (the expected gap between the recommended and the truly best (K, A), the quantity the
// design simulator scores). A run c with member predictions Δ_m(c) would, if member j were
// the truth, return Δ_j(c) + noise; Bayes' rule reweights the members by how well they
// predicted it. With Gaussian noise of sd s (the fit's residual sd) averaged over the noise,
// w_m|j ∝ exp(−(Δ_j(c) − Δ_m(c))² / (4 s²)). The value of c is R(uniform) − mean_j R(w·|j):
// zero for a run on whose outcome all members agree, or whose outcome cannot move any
// target's answer; large where members disagree about Δ in a way that decides an answer.
// Its score is value / cost. Why this rule rather than bootstrap disagreement alone or
// p(K wrong): it is measured in the unit of the goal (nats of regret at the targets), it
// values a run by what it would change about the answer (a noisy disagreement at a
// configuration that no target's answer depends on scores nothing), it weighs a near-tie
// between two almost equal (K, A) by how little choosing wrongly costs, and it adds up over
// targets without a tuning weight.
// Batches: runs in flight and runs already picked are conditioned on jointly (their log
// weights add per hypothetical truth j), so the k-th pick is valued given the first k − 1
// outcomes: a batch does not spend its slots on one question. Picks are greedy by marginal
// value per FLOP (lazy: after the first pick only the 64 best candidates are re-valued).
// Cost: the run's FLOPs, plus its dense reference's FLOPs when no dense run at
// (backbone, L) with at least that budget (2% slack) is done, in flight or picked earlier in
// the batch; a completed observation or a sparse run in flight at (backbone, L) counts as
// such a dense run up to its own FLOPs.
//
// Stopping: every target's regret bound at `confidence` (the members' q-quantile of the
// answer's regret, design_evidence.h) is at most `tolerance` (nats), the answers (K, A at every
// target) were the same for `stable_decisions` decisions in a row (this one included), and no
// completed run at a target disagrees with the answer by more than `consistency_z` standard
// errors of its noise (design_evidence.h DisagreementWithRuns; Decision::held_back says which
// did), and no run is in flight (a confident design waits for the runs it committed to and
// proposes nothing meanwhile; Decision::held_back says so); or no candidate fits in the
// compute left.
// Pure and deterministic under config.seed; thread-compatible.
#ifndef XMOD_FITTER_ADAPTIVE_DESIGN_H_
#define XMOD_FITTER_ADAPTIVE_DESIGN_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fitter/design_ensemble.h"
#include "fitter/law.h"
#include "fitter/observations.h"

namespace xmod::fitter {

// One training run: an X-MoD run (K >= 2) at `flops` training FLOPs, whose dense reference
// is the dense run at (backbone, seq_len) with at least `flops`; or that dense run (K = 1).
struct Candidate {
  std::string backbone;
  int seq_len = 0;
  int k = 1;
  double a = 1;
  double flops = 0;
  bool IsDense() const { return k == 1; }
  std::string Describe() const;  // "556M L=4096 K=8 A=2 C=5e+19" or "dense 556M L=4096 ..."
};

struct AdaptiveConfig {
  std::vector<Target> targets;  // the questions (at least one)
  // The candidate space, also the (K, A) options at every target. ks >= 1 (K = 1, when
  // listed, is a dense option at the targets, never a proposed run); as > 0.
  std::vector<int> ks;
  std::vector<double> as;
  std::vector<int> seq_lens;
  std::vector<std::string> backbones;
  std::vector<double> flop_budgets;
  double compute_budget = 0;  // total training FLOPs of the design, seed runs included
  double tolerance = 2e-4;    // stop when every target's regret bound is at most this (nats)
  double confidence = 0.9;    // ... the bound at this confidence (0 < q < 1)
  double consistency_z = 3;   // ... and the runs at the targets agree within this many s.e.
  int stable_decisions = 2;   // ... and the answers held this many decisions in a row
  int bootstrap_samples = 32;
  uint64_t seed = 1;
  double noise_floor = 0.001;  // lower bound of the noise sd weighing outcomes (nats)
  int max_proposals = 8;       // the length of Decision::ranked (the free slots)
  // Polled while Decide fits its ensemble (before every refit) and values candidates (before
  // every candidate); once it returns true, Decide stops. Empty = never.
  std::function<bool()> cancelled;
};

// INVALID_ARGUMENT naming the field: empty targets / ks / as / seq_lens / backbones /
// flop_budgets, K < 1, A <= 0, a budget or compute_budget <= 0, tolerance < 0, confidence
// outside (0, 1), consistency_z <= 0,
// stable_decisions < 1, bootstrap_samples < 2, max_proposals < 1, an unknown backbone.
absl::Status ValidateConfig(const AdaptiveConfig& config);

// The seed set: a one-factor-at-a-time cross around the centre (the backbone and L most
// targets name), as B.4 is, trimmed to what identifies Eq. 14's two stages: at the centre
// backbone, 3 L (smallest, median, largest) x 3 K (smallest, geometric middle, largest);
// at the centre L, the smallest and largest other backbones x 2 K (smallest, largest); at
// the centre (backbone, L), 2 A != 1 (smallest and largest) x 2 K (middle, largest; the next
// K where A·K is not whole). That is 13 A = 1 rows for the 7 stage-1 parameters with every
// factor at >= 2 levels and K at 3 on each side of the U, and 4 A != 1 rows for stage 2.
// All at the budget nearest (in log) to the targets' median. Dense references (K = 1)
// included, first. Errors: ValidateConfig's.
absl::StatusOr<std::vector<Candidate>> SeedDesign(const AdaptiveConfig& config);

// A run still training or stopped early, as evidence: the forecast of its final Δ from its
// matched-FLOP marks (partial_curve.h ForecastFinal) in `forecast.delta`, with its sd. It
// enters the ensemble as a row each member redraws from N(delta, sd²) (EnsembleOptions::
// forecast_sd), never as a final measurement: it never counts toward the check against
// measured runs, and a run in flight stays in flight for the value of new runs.
struct PartialRun {
  Observation forecast;  // run_id must be non-zero and unique
  double forecast_sd = 0;
  double last_fraction = 0;  // of its budget, at its latest mark
  bool stopped = false;      // stopped early (censored); may be resumed
};

// What the design knows and has committed to.
struct DesignState {
  std::vector<Observation> completed;          // the sweep's fitted observations
  std::vector<PartialRun> partial;             // partial runs' forecasts (see PartialRun)
  std::vector<Candidate> dense_done;           // completed dense references
  std::vector<Candidate> in_flight;            // queued or running, sparse or dense
  double compute_spent = 0;                    // training FLOPs of runs done or in flight
  std::vector<TargetAnswer> previous_answers;  // the last decision's (empty: none)
  int previous_streak = 0;                     // the last decision's streak
};

struct Proposal {
  Candidate run;
  bool needs_dense = false;  // queue the dense reference (backbone, L, flops) as well
  double cost_flops = 0;     // run.flops, plus the dense reference's when needed
  double value = 0;          // expected reduction of Σ_t expected regret (nats)
  double score = 0;          // value per 1e18 FLOPs of cost
  std::string reason;        // one line for people
};

struct Decision {
  std::vector<Proposal> ranked;       // best first; the seed runs still missing before a fit
  std::vector<TargetAnswer> answers;  // per target, in config order; empty before a fit
  int streak = 0;                     // decisions in a row with these answers
  bool stop = false;
  std::string stop_reason;  // empty unless stop
  std::string fit_error;    // why there is no fit yet (the seed is incomplete), else empty
  // Why a design confident enough to stop did not: runs are in flight, or its answer
  // disagrees with its runs.
  std::string held_back;
  // What partial evidence the fit used ("2 partial runs: ..."); empty when none. Every
  // proposal's reason ends with it.
  std::string partial_evidence;
  LawParams fit;        // the point fit the decision came from
  double noise_sd = 0;  // s, see top of file
  int ensemble_size = 0;
};

// The criterion for a single run (see top of file): the expected reduction of the summed
// expected regret when a run whose members' predicted Δ is `run` (one per member) reports,
// under uniform member weights, given the members' Δ at every target's options
// `deltas[target][member][option]` and the noise sd. Never negative.
double ExpectedRegretReduction(const std::vector<std::vector<std::vector<double>>>& deltas,
                               const std::vector<double>& run, double noise_sd);

// One decision (see top of file). Before the completed runs can be fitted, `ranked` lists the
// seed runs neither done nor in flight, with fit_error saying why. Errors: ValidateConfig's,
// the target options' (MakeTargetOptions), and CANCELLED once config.cancelled returned true.
absl::StatusOr<Decision> Decide(const AdaptiveConfig& config, const DesignState& state);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_ADAPTIVE_DESIGN_H_
