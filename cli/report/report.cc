// The report directory: figures as PNG and SVG, and report.md. See report.h.
#include "cli/report/report.h"

#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "fitter/law.h"
#include "fitter/recommend.h"
#include "fitter/sweep_fit.h"

namespace xmod::report {
namespace {

using xmod::v1::Fit;
using xmod::v1::FitObservation;

std::string Num(double v) { return absl::StrFormat("%.5g", v); }

void Goodness(const Fit& fit, std::string* md) {
  int held_out = 0;
  double sq = 0;
  for (const FitObservation& o : fit.observations()) {
    if (!o.held_out()) continue;
    ++held_out;
    sq += (o.fitted_delta() - o.delta()) * (o.fitted_delta() - o.delta());
  }
  absl::StrAppend(md, "Fit ", fit.id(), " of sweep ", fit.sweep_id(), ": ", fit.n_obs(),
                  " runs fitted, ", held_out, " out of range (predicted, never fitted).\n\n",
                  "| measure | value |\n|---|---|\n", "| R²_Δ (in range) | ", Num(fit.r2()),
                  " |\n| RMSE on loss (in range) | ", Num(fit.rmse()),
                  " |\n| MAE on loss (in range) | ", Num(fit.mae()), " |\n");
  if (held_out > 0) {
    absl::StrAppend(md, "| RMSE on loss (out of range, ", held_out, " runs) | ",
                    Num(std::sqrt(sq / held_out)), " |\n");
  }
  if (!fit.error().empty()) {
    absl::StrAppend(md, "\nThe latest attempt to refit failed: ", fit.error(), "\n");
  }
}

void Parameters(const Fit& fit, std::string* md) {
  const fitter::LawParams p = fitter::LawParamsFromProto(fit.params());
  const bool ci = fit.has_ci_low() && fit.has_ci_high();
  const fitter::LawParams low = fitter::LawParamsFromProto(fit.ci_low());
  const fitter::LawParams high = fitter::LawParamsFromProto(fit.ci_high());
  absl::StrAppend(md, "\n## Parameters (paper Table 8 names)\n\n| parameter | value |",
                  ci ? " bootstrap 95% |\n|---|---|---|\n" : "\n|---|---|\n");
  for (int i = 0; i < static_cast<int>(fitter::kLawParamNames.size()); ++i) {
    absl::StrAppend(md, "| ", fitter::kLawParamNames[i], " | ", Num(fitter::ParamAt(p, i)), " |");
    if (ci) {
      absl::StrAppend(md, " [", Num(fitter::ParamAt(low, i)), ", ", Num(fitter::ParamAt(high, i)),
                      "] |");
    }
    absl::StrAppend(md, "\n");
  }
  if (fit.by_sweep()) {
    absl::StrAppend(md, "\nStages by sweep (B.5); the anchor-stride sweep's own offset e_stage2 = ",
                    Num(fit.e_stage2()),
                    " (a nuisance parameter; the curves of delta_vs_a use it).\n");
  }
  if (fit.at_bound_size() > 0) {
    absl::StrAppend(md, "\nOn a bound of their search box: ", absl::StrJoin(fit.at_bound(), ", "),
                    ".\n");
  }
}

void CrossValidation(const Fit& fit, std::string* md) {
  if (fit.cv_size() == 0) return;
  absl::StrAppend(md,
                  "\n## Grouped cross-validation (leave one group out)\n\n"
                  "| held-out group | runs | RMSE on loss |\n|---|---|---|\n");
  for (const xmod::v1::GroupError& g : fit.cv()) {
    absl::StrAppend(md, "| ", g.group(), " | ", g.n(), " | ", Num(g.rmse()), " |\n");
  }
}

// K* at A = 1 and (K*, A*) over the default grids, per L of the context sweep.
void Optima(const Fit& fit, std::string* md) {
  std::map<std::pair<std::string, int>, const FitObservation*> by_l;
  for (const FitObservation* o : ContextSweepRows(fit))
    by_l.emplace(std::pair{o->backbone(), o->seq_len()}, o);
  if (by_l.empty()) return;
  const fitter::LawParams params = fitter::LawParamsFromProto(fit.params());
  absl::StrAppend(
      md,
      "\n## Optimal sparsity per context length\n\nThe law at the context sweep's "
      "backbone, K ∈ 1..32 (K = 1 is the dense model); A* over {0.5, 1, 2, 3, 4, 5}."
      "\n\n| backbone | L | K* (A = 1) | Δ | (K*, A*) | Δ |\n|---|---|---|---|---|---|\n");
  for (const auto& [key, row] : by_l) {
    const int l = key.second;
    fitter::RecommendQuery query;
    query.seq_len = l;
    query.backbone = row->backbone();
    query.n0 = row->n0();
    absl::StatusOr<fitter::Recommendation> any = fitter::Recommend(params, query);
    query.as = {1};
    absl::StatusOr<fitter::Recommendation> a1 = fitter::Recommend(params, query);
    absl::StrAppend(md, "| ", row->backbone(), " | ", l, " | ");
    if (a1.ok()) {
      absl::StrAppend(md, a1->best.k, " | ", Num(a1->best.delta), " | ");
    } else {
      absl::StrAppend(md, a1.status().message(), " | | ");
    }
    if (any.ok()) {
      absl::StrAppend(md, "(", any->best.k, ", ", any->best.a, ") | ", Num(any->best.delta),
                      " |\n");
    } else {
      absl::StrAppend(md, any.status().message(), " | |\n");
    }
  }
}

}  // namespace

std::string ReportMarkdown(const Fit& fit, const std::string& title,
                           const std::vector<Figure>& figures) {
  std::string md = absl::StrCat("# ", title, "\n\n");
  Goodness(fit, &md);
  Parameters(fit, &md);
  CrossValidation(fit, &md);
  Optima(fit, &md);
  absl::StrAppend(&md, "\n## Figures\n");
  for (const Figure& f : figures) {
    if (f.chart.has_value()) {
      absl::StrAppend(&md, "\n### ", f.chart->title, "\n\n![", f.name, "](", f.name, ".png)\n\n[",
                      f.name, ".svg](", f.name, ".svg)\n");
    } else {
      absl::StrAppend(&md, "\n### ", f.name, "\n\nSkipped: ", f.skipped, ".\n");
    }
  }
  return md;
}

absl::StatusOr<ReportFiles> WriteReport(const Fit& fit, const std::string& title,
                                        const std::string& dir) {
  if (fit.observations_size() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("fit ", fit.id(), " of sweep ", fit.sweep_id(),
                     " carries no observations (stored before fits kept them); refit the sweep"));
  }
  if (absl::Status s = MakeDirs(dir); !s.ok()) return absl::UnavailableError(s.message());
  ReportFiles files;
  const std::vector<Figure> figures = BuildFigures(fit);
  for (const Figure& f : figures) {
    if (!f.chart.has_value()) {
      files.skipped.push_back(absl::StrCat(f.name, ": ", f.skipped));
      continue;
    }
    for (const auto& [format, ext] :
         {std::pair{ImageFormat::kPng, ".png"}, std::pair{ImageFormat::kSvg, ".svg"}}) {
      const std::string path = absl::StrCat(dir, "/", f.name, ext);
      if (absl::Status s = WriteChart(*f.chart, format, path); !s.ok()) return s;
      files.written.push_back(path);
    }
  }
  const std::string path = absl::StrCat(dir, "/report.md");
  if (absl::Status s = WriteFileAtomic(path, ReportMarkdown(fit, title, figures)); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot write ", path, ": ", s.message()));
  }
  files.written.push_back(path);
  return files;
}

}  // namespace xmod::report
