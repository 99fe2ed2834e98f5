// xmod-fit: read Δ observations (CSV) or run curves (database), fit, print. See
// fit_command.h.
#include "fitter/fit_command.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/proto_json.h"
#include "fitter/law_backbones.h"
#include "fitter/csv_input.h"
#include "fitter/db_source.h"
#include "fitter/law_comparison.h"
#include "fitter/recommend.h"
#include "fitter/sweep_fit.h"

namespace xmod::fitter {
namespace {

struct RecommendTarget {
  double flops = 0;
  int seq_len = 0;
  std::string backbone;
};

absl::StatusOr<RecommendTarget> ParseTarget(const std::string& text, int index) {
  std::vector<std::string> parts = absl::StrSplit(text, ',');
  RecommendTarget t;
  double n_act = 0;
  if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &t.flops) ||
      !absl::SimpleAtoi(parts[1], &t.seq_len) || !absl::SimpleAtod(parts[2], &n_act)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--recommend[", index,
                     "]: expected \"C,L,N_act\" (e.g. 1e20,2048,556e6), got '", text, "'"));
  }
  absl::StatusOr<std::string> backbone = NearestPreset(n_act);
  if (!backbone.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--recommend[", index, "]: ", backbone.status().message()));
  }
  t.backbone = *backbone;
  return t;
}

// --output json: the report as xmod.v1.FitReport (the fit as ToFitProto writes it for the
// coordinator, the recommendations as the Recommend RPC answers them).
xmod::v1::FitReport ToReportProto(const FitReport& r, const std::vector<Recommendation>& recs,
                                  uint64_t seed) {
  xmod::v1::FitReport out;
  *out.mutable_fit() = ToFitProto(r);
  for (const Recommendation& rec : recs) *out.add_recommendations() = RecommendationToProto(rec);
  out.set_seed(seed);
  out.set_evaluations(r.fit.evaluations);
  out.set_n_stage1(r.fit.n_stage1);
  out.set_n_stage2(r.fit.n_stage2);
  out.set_stage2_fitted(r.fit.stage2_fitted);
  out.set_out_of_range_n(r.out_of_range.n);
  out.set_out_of_range_rmse(r.out_of_range.rmse);
  if (r.bootstrap.has_value()) {
    out.set_bootstrap_samples(r.bootstrap->samples);
    out.set_bootstrap_failures(r.bootstrap->failures);
  }
  for (const GroupError& g : r.cv) {
    if (!g.error.empty()) (*out.mutable_cv_errors())[g.group] = g.error;
  }
  out.set_fit_seconds(r.fit_seconds);
  out.set_cv_seconds(r.cv_seconds);
  out.set_bootstrap_seconds(r.bootstrap_seconds);
  return out;
}

// The parameters (with the exposure term's under the full law) and their intervals.
void PrintParams(const FitReport& r, bool full, std::ostream& out) {
  out << absl::StrFormat("  %-6s %14s", "param", "estimate");
  if (r.bootstrap.has_value()) out << absl::StrFormat(" %14s %14s", "ci 2.5%", "ci 97.5%");
  out << "\n";
  const int count = full ? kAllParamCount : static_cast<int>(kLawParamNames.size());
  for (int i = 0; i < count; ++i) {
    const char* name = i < static_cast<int>(kLawParamNames.size())
                           ? kLawParamNames[i]
                           : kExposureParamNames[i - kLawParamNames.size()];
    out << absl::StrFormat("  %-6s %14.6g", name, ParamAt(r.fit.params, i));
    if (r.bootstrap.has_value()) {
      out << absl::StrFormat(" %14.6g %14.6g", ParamAt(r.bootstrap->low, i),
                             ParamAt(r.bootstrap->high, i));
    }
    out << "\n";
  }
}

void PrintHeadline(const FitReport& r, bool full, std::ostream& out) {
  const char* law = full ? "X-MoD full candidate law (Eq. 24)" : "X-MoD law (Eq. 14)";
  if (r.fit.by_sweep) {
    out << absl::StrFormat(
        "%s, two-stage fit on %d observations by sweep "
        "(stage 1: %d A = 1 rows of kxl and nact; stage 2: %d rows of axk%s)\n",
        law, r.fit.n_obs, r.fit.n_stage1, r.fit.n_stage2, r.fit.stage2_fitted ? "" : ", skipped");
  } else {
    out << absl::StrFormat(
        "%s, two-stage fit on %d observations "
        "(stage 1: %d at A = 1; stage 2: %d at A != 1%s)\n",
        law, r.fit.n_obs, r.fit.n_stage1, r.fit.n_stage2, r.fit.stage2_fitted ? "" : ", skipped");
  }
}

// The axk stage-2 offset, the fit's errors and the exponents left on a bound.
void PrintFitQuality(const FitReport& r, std::ostream& out) {
  if (r.fit.by_sweep && r.fit.stage2_fitted) {
    out << absl::StrFormat("  %-6s %14.6g   (stage-2 offset of the axk sweep; not in the law)\n",
                           "e_stage2", r.fit.e_stage2);
  }
  out << absl::StrFormat("R2_delta %.4f   RMSE %.5f   MAE %.5f   (fit %.3f s)\n", r.fit.r2,
                         r.fit.rmse, r.fit.mae, r.fit_seconds);
  if (!r.fit.at_bound.empty()) {
    out << "exponents on a bound:";
    for (const std::string& n : r.fit.at_bound) out << " " << n;
    out << "\n";
  }
}

// Cross-validation, the held-out runs and the bootstrap.
void PrintValidation(const FitReport& r, std::ostream& out) {
  if (!r.cv.empty()) {
    out << absl::StrFormat("grouped cross-validation (%.2f s):\n", r.cv_seconds);
    for (const GroupError& g : r.cv) {
      if (g.error.empty()) {
        out << absl::StrFormat("  %-16s n=%-3d RMSE %.5f\n", g.group, g.n, g.rmse);
      } else {
        out << absl::StrFormat("  %-16s n=%-3d %s\n", g.group, g.n, g.error);
      }
    }
  }
  if (r.out_of_range.n > 0) {
    out << absl::StrFormat("out-of-range (held out) runs: n=%d RMSE %.5f\n", r.out_of_range.n,
                           r.out_of_range.rmse);
  }
  if (r.bootstrap.has_value()) {
    out << absl::StrFormat("bootstrap: %d refits (%d failed) in %.2f s\n", r.bootstrap->samples,
                           r.bootstrap->failures, r.bootstrap_seconds);
  }
}

void PrintRecommendations(const std::vector<Recommendation>& recs, std::ostream& out) {
  for (const Recommendation& rec : recs) {
    const Prediction& p = rec.best;
    out << absl::StrFormat(
        "recommend C=%g L=%d N_act=%s: K*=%d A*=%g delta=%.5f [%.5f, %.5f] N=%.3gB", p.flops,
        p.seq_len, p.backbone, p.k, p.a, p.delta, p.delta_low, p.delta_high, p.total_params / 1e9);
    if (p.loss != 0) out << absl::StrFormat(" loss=%.4f", p.loss);
    // Appendix A.3's closed form at A = 1 beside the grid's answer, a cross-check.
    out << absl::StrFormat(" K_hat(A.3, A=1)=%.2f", rec.closed_form_k);
    out << "\n";
  }
}

void PrintTable(const FitReport& r, const std::vector<Recommendation>& recs, bool full,
                std::ostream& out) {
  PrintHeadline(r, full, out);
  PrintParams(r, full, out);
  PrintFitQuality(r, out);
  PrintValidation(r, out);
  PrintRecommendations(recs, out);
}

absl::Status CheckOptions(const FitCommandOptions& options) {
  if (options.output != "table" && options.output != "json") {
    return absl::InvalidArgumentError("--output: must be 'table' or 'json'");
  }
  if (options.law != "reduced" && options.law != "full") {
    return absl::InvalidArgumentError("--law: must be 'reduced' (Eq. 14) or 'full' (Eq. 24)");
  }
  if (options.csv.empty() == options.db.empty()) {
    return absl::InvalidArgumentError("give exactly one of --csv FILE or --db FILE --sweep ID");
  }
  if (!options.db.empty() && options.sweep <= 0) {
    return absl::InvalidArgumentError("--sweep: a sweep id (>= 1) is required with --db");
  }
  if (options.bootstrap < 0) return absl::InvalidArgumentError("--bootstrap: must be >= 0");
  if (options.threads < 1) return absl::InvalidArgumentError("--threads: must be >= 1");
  if (options.population < 5) return absl::InvalidArgumentError("--population: must be >= 5");
  if (options.generations < 1) return absl::InvalidArgumentError("--generations: must be >= 1");
  if (!(options.ftol >= 0)) return absl::InvalidArgumentError("--ftol: must be >= 0");
  return absl::OkStatus();
}

SweepFitOptions ToSweepFitOptions(const FitCommandOptions& options) {
  SweepFitOptions fit_options;
  fit_options.fit.search.seed = options.seed;
  fit_options.fit.search.population = options.population;
  fit_options.fit.search.generations = options.generations;
  fit_options.fit.search.ftol = options.ftol;
  fit_options.fit.law = options.law == "full" ? LawForm::kFull : LawForm::kReduced;
  fit_options.cross_validate = options.cross_validate;
  fit_options.bootstrap_samples = options.bootstrap;
  fit_options.threads = options.threads;
  return fit_options;
}

// C.1's comparison: each law's in-sample fit and its grouped-CV errors on the same folds.
void PrintComparison(const LawComparison& c, std::ostream& out) {
  out << "candidate laws on the same grouped folds (paper C.1):\n";
  out << absl::StrFormat("  %-16s %14s %14s\n", "", "reduced Eq. 14", "full Eq. 24");
  out << absl::StrFormat("  %-16s %14.4f %14.4f\n", "R2_delta", c.reduced.fit.r2, c.full.fit.r2);
  out << absl::StrFormat("  %-16s %14.5f %14.5f   (C.1's combined in-range fitting RMSE)\n",
                         "RMSE in range", c.reduced.fit.rmse, c.full.fit.rmse);
  for (size_t f = 0; f < c.reduced.cv.size(); ++f) {
    out << absl::StrFormat("  %-16s %14.5f %14.5f   (n=%d)\n", c.reduced.cv[f].group,
                           c.reduced.cv[f].rmse, c.full.cv[f].rmse, c.reduced.cv[f].n);
  }
  out << absl::StrFormat("  %-16s %14.5f %14.5f   (n=%d)\n", "CV RMSE combined", c.reduced.cv_rmse,
                         c.full.cv_rmse, c.reduced.cv_n);
  out << absl::StrFormat("  full law: v %.6g, eta_d %.6g, rho_d %.6g\n", c.full.fit.params.v,
                         c.full.fit.params.eta_d, c.full.fit.params.rho_d);
  for (const auto& [fold, error] : c.skipped) out << "  skipped " << fold << ": " << error << "\n";
  if (c.full.fit.params.v == 0) out << "  the full fit ended at v = 0: the two laws coincide\n";
  out << (c.reduced_preferred ? "  the reduced law predicts held-out groups at least as well: "
                                "omit P_D, as C.1 does\n"
                              : "  the full law predicts held-out groups better: P_D earns its "
                                "place in these data, unlike in C.1\n");
}

// The CSV's observations or the sweep's runs, fitted.
absl::StatusOr<FitReport> LoadAndFit(const FitCommandOptions& options,
                                     const SweepFitOptions& fit_options) {
  if (!options.csv.empty()) {
    absl::StatusOr<std::string> text = ReadFile(options.csv);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<Observation>> obs = ParseDeltaCsv(*text);
    if (!obs.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(options.csv, ": ", obs.status().message()));
    }
    return FitObservations(*std::move(obs), fit_options);
  }
  absl::StatusOr<std::vector<RunCurve>> runs = LoadSweepRuns(options.db, options.sweep);
  if (!runs.ok()) return runs.status();
  return FitSweep(*runs, fit_options);
}

absl::StatusOr<std::vector<Recommendation>> RecommendTargets(
    const FitCommandOptions& options, const std::vector<RecommendTarget>& targets,
    const FitReport& report) {
  std::vector<Recommendation> recs;
  for (const RecommendTarget& t : targets) {
    RecommendQuery q;
    q.flops = t.flops;
    q.seq_len = t.seq_len;
    q.backbone = t.backbone;
    q.ks = options.ks;
    q.as = options.as;
    q.max_total_params = options.max_total_params;
    const LossCurve* dense = nullptr;
    auto it = report.dense_curves.find(DenseGroupName(t.seq_len, t.backbone));
    if (it != report.dense_curves.end() && it->second.LossAt(t.flops).ok()) dense = &it->second;
    absl::StatusOr<Recommendation> rec = Recommend(
        report.fit.params, q, dense, report.bootstrap.has_value() ? &*report.bootstrap : nullptr);
    if (!rec.ok()) return rec.status();
    recs.push_back(*std::move(rec));
  }
  return recs;
}

}  // namespace

absl::Status RunFitCommand(const FitCommandOptions& options, std::ostream& out) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::vector<RecommendTarget> targets;
  for (size_t i = 0; i < options.recommend.size(); ++i) {
    absl::StatusOr<RecommendTarget> t = ParseTarget(options.recommend[i], static_cast<int>(i));
    if (!t.ok()) return t.status();
    targets.push_back(*t);
  }
  const SweepFitOptions fit_options = ToSweepFitOptions(options);
  absl::StatusOr<FitReport> report = LoadAndFit(options, fit_options);
  if (!report.ok()) return report.status();
  absl::StatusOr<std::vector<Recommendation>> recs = RecommendTargets(options, targets, *report);
  if (!recs.ok()) return recs.status();
  std::optional<LawComparison> comparison;
  if (options.compare_laws) {
    absl::StatusOr<LawComparison> c = CompareLaws(report->observations, fit_options.fit);
    if (!c.ok()) return c.status();
    comparison = *std::move(c);
  }
  if (options.output == "json") {
    xmod::v1::FitReport proto = ToReportProto(*report, *recs, options.seed);
    if (comparison.has_value()) *proto.mutable_law_comparison() = LawComparisonToProto(*comparison);
    absl::StatusOr<std::string> json = ProtoJson(proto);
    if (!json.ok()) return json.status();
    out << *json;
    return absl::OkStatus();
  }
  std::ostringstream text;
  PrintTable(*report, *recs, options.law == "full", text);
  if (comparison.has_value()) PrintComparison(*comparison, text);
  out << text.str();
  return absl::OkStatus();
}

}  // namespace xmod::fitter
