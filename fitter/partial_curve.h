// How a run's matched-FLOP Δ approaches its final value along the run (docs/adaptive-design.md,
// "Partial runs"): the model that lets an adaptive design use the evaluation marks of runs
// still training or stopped early, and decide whether a run may be stopped.
//
// Model. At the fraction f = c / C of a run's budget C (paper §3: Δ is measured at matched
// training FLOPs; Eq. 14 has no C term, so a run's Δ settles as it trains),
//     Δ(f) = Δ(1) + b · g(f),   g(f) = f^(−α) − 1   (g(1) = 0),
// plus independent noise of sd σ_mark at every mark. The approach is a power law in compute
// because both losses are (Eq. 14's dense term and its sparse one share the form); α is shared
// by the sweep and b is drawn per run from N(μ_b, τ_b²): runs approach their end at different
// rates, some from above, some from below — a curve that "crosses late" is one whose b lies far
// from μ_b. FitPartialCurveModel fits α (by grid over kAlphas, least squares), μ_b, τ_b and
// σ_mark from the sweep's own completed curves (each curve's b by least squares given α; τ_b²
// their variance less the part their estimation noise explains, floored at kMinSlopeSd).
//
// Prediction. ForecastFinal is the Bayesian linear regression of a partial curve's points on
// (1, g(f)) with a flat prior on Δ(1) and the prior N(μ_b, τ_b²) on b: the posterior mean and
// sd of Δ(1). Early in a run g(f) is large, so τ_b·g(f) dominates the sd: a run is never
// counted as final evidence beyond what its curve supports — its forecast is only as certain
// as the spread of the sweep's completed curves allows at that fraction, and a run that bends
// against the prior reveals its own b through its later marks.
// Fails safe: with fewer than kMinCurves completed curves of at least 3 marks there is no model
// (NOT_FOUND) and partial runs are not used.
// Pure; thread-compatible.
#ifndef XMOD_FITTER_PARTIAL_CURVE_H_
#define XMOD_FITTER_PARTIAL_CURVE_H_

#include <vector>

#include "absl/status/statusor.h"

namespace xmod::fitter {

// One evaluation mark of a run: the fraction of its budget and its matched-FLOP Δ there.
struct DeltaMark {
  double fraction = 0;  // c / C, in (0, 1]
  double delta = 0;
};

struct PartialCurveModel {
  double alpha = 0.5;     // g(f) = f^(−α) − 1
  double slope_mean = 0;  // μ_b (nats)
  double slope_sd = 0;    // τ_b (nats)
  double mark_sd = 0;     // σ_mark (nats)
  int curves = 0;         // completed curves it was fitted from
  double G(double fraction) const;
};

inline constexpr int kMinCurves = 3;
inline constexpr double kMinSlopeSd = 1e-4;  // nats: never certain of b from few curves
inline constexpr double kMinMarkSd = 1e-4;   // nats

// Fits the model from completed curves (each with its mark at fraction 1, ascending
// fractions in (0, 1]). Curves with fewer than 3 marks or without a mark at f = 1 are
// skipped; NOT_FOUND with fewer than kMinCurves left; INVALID_ARGUMENT for a fraction
// outside (0, 1] or a non-finite Δ.
absl::StatusOr<PartialCurveModel> FitPartialCurveModel(
    const std::vector<std::vector<DeltaMark>>& completed);

struct Forecast {
  double mean = 0;  // posterior mean of Δ(1)
  double sd = 0;    // posterior sd of Δ(1)
  double last_fraction = 0;
};

// The posterior of a partial curve's final Δ (see top of file). INVALID_ARGUMENT for an
// empty curve or a fraction outside (0, 1].
absl::StatusOr<Forecast> ForecastFinal(const PartialCurveModel& model,
                                       const std::vector<DeltaMark>& curve);

// Whether a run whose forecast is `forecast` may be stopped as worse than `best_final` (the
// best final Δ of its group) by more than `margin`, with confidence: only when even the
// forecast's optimistic end, mean − z·sd, is worse than best_final + margin.
bool ConfidentlyWorse(const Forecast& forecast, double best_final, double margin, double z);

}  // namespace xmod::fitter

#endif  // XMOD_FITTER_PARTIAL_CURVE_H_
