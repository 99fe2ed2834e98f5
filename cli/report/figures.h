// The figures of `xmodctl report`, in the style of the paper's Figure 2, built from a stored
// fit (xmod.v1.Fit with its observations); plot.h draws them. Which runs each figure shows:
//
//  - delta_vs_k: measured Δ against K (log axis), one colour per L, for the context sweep:
//    the kxl rows, or, when no run names its sweep, the A = 1 runs of the backbone with the
//    most context lengths. Out-of-range (held-out) runs are hollow markers. With each L the
//    law's Δ curve (Eq. 14) at that backbone's N_act, A = 1 and every whole K from 1 (Δ = 0:
//    the dense model) to the largest K measured. One series per (backbone, L) when the rows
//    come from several backbones (a study).
//  - delta_vs_a: measured Δ against A, one colour per K, for the anchor-stride sweep: the axk
//    rows, or, without sweep names, the runs of the (backbone, L) with the most A ≠ 1 runs,
//    at the K values those runs have. With each K the law's curve at every A with A·K whole
//    between the smallest and largest A measured; when the fit was by sweep and fitted axk
//    rows, with e_stage2 in place of e, as the fit models that sweep (fitter/two_stage.h).
//    Out-of-range runs are hollow markers here too.
//  - predicted_vs_measured: predicted against measured Δ with the line y = x: in-range runs
//    as fitted (grey), out-of-range runs as the fit predicts them, and every run left out by
//    grouped cross-validation as the refit without its group predicts it (one colour per
//    kind of fold: L, N_act, A, explicit group).
//
// The law curves take N(K,A)/N_act from fitter::CapacityRatio with the runs' backbone, L and
// N0, as predictions and recommendations do; a (K, A) whose layer plan cannot be built is a
// gap in the curve. A figure without its runs is skipped with the reason, not an error.
// Pure functions; thread-safe.
#ifndef XMOD_CLI_REPORT_FIGURES_H_
#define XMOD_CLI_REPORT_FIGURES_H_

#include <optional>
#include <string>
#include <vector>

#include "cli/report/plot.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod::report {

// The runs of delta_vs_k and of delta_vs_a (see top of file); pointers into `fit`.
std::vector<const xmod::v1::FitObservation*> ContextSweepRows(const xmod::v1::Fit& fit);
std::vector<const xmod::v1::FitObservation*> AnchorSweepRows(const xmod::v1::Fit& fit);

struct Figure {
  std::string name;            // file stem: "delta_vs_k", "delta_vs_a", "predicted_vs_measured"
  std::optional<Chart> chart;  // nullopt when skipped
  std::string skipped;         // why, when skipped
};

// The three figures of `fit`, in the order above.
std::vector<Figure> BuildFigures(const xmod::v1::Fit& fit);

}  // namespace xmod::report

#endif  // XMOD_CLI_REPORT_FIGURES_H_
