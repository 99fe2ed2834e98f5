// xmod-fit: read Δ observations (CSV) or run curves (database), fit, print. See
// fit_command.h.
#include "fitter/fit_command.h"

#include <cmath>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/proto_json.h"
#include "fitter/backbones.h"
#include "fitter/csv_input.h"
#include "fitter/db_source.h"
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

void PrintTable(const FitReport& r, const std::vector<Recommendation>& recs, std::ostream& out) {
  if (r.fit.by_sweep) {
    out << absl::StrFormat(
        "X-MoD law (Eq. 14), two-stage fit on %d observations by sweep "
        "(stage 1: %d A = 1 rows of kxl and nact; stage 2: %d rows of axk%s)\n",
        r.fit.n_obs, r.fit.n_stage1, r.fit.n_stage2, r.fit.stage2_fitted ? "" : ", skipped");
  } else {
    out << absl::StrFormat(
        "X-MoD law (Eq. 14), two-stage fit on %d observations "
        "(stage 1: %d at A = 1; stage 2: %d at A != 1%s)\n",
        r.fit.n_obs, r.fit.n_stage1, r.fit.n_stage2, r.fit.stage2_fitted ? "" : ", skipped");
  }
  out << absl::StrFormat("  %-6s %14s", "param", "estimate");
  if (r.bootstrap.has_value()) out << absl::StrFormat(" %14s %14s", "ci 2.5%", "ci 97.5%");
  out << "\n";
  for (int i = 0; i < static_cast<int>(kLawParamNames.size()); ++i) {
    out << absl::StrFormat("  %-6s %14.6g", kLawParamNames[i], ParamAt(r.fit.params, i));
    if (r.bootstrap.has_value()) {
      out << absl::StrFormat(" %14.6g %14.6g", ParamAt(r.bootstrap->low, i),
                             ParamAt(r.bootstrap->high, i));
    }
    out << "\n";
  }
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
  for (const Recommendation& rec : recs) {
    const Prediction& p = rec.best;
    out << absl::StrFormat(
        "recommend C=%g L=%d N_act=%s: K*=%d A*=%g delta=%.5f [%.5f, %.5f] N=%.3gB", p.flops,
        p.seq_len, p.backbone, p.k, p.a, p.delta, p.delta_low, p.delta_high, p.total_params / 1e9);
    if (p.loss != 0) out << absl::StrFormat(" loss=%.4f", p.loss);
    out << "\n";
  }
}

}  // namespace

absl::Status RunFitCommand(const FitCommandOptions& options, std::ostream& out) {
  if (options.output != "table" && options.output != "json") {
    return absl::InvalidArgumentError("--output: must be 'table' or 'json'");
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
  std::vector<RecommendTarget> targets;
  for (size_t i = 0; i < options.recommend.size(); ++i) {
    absl::StatusOr<RecommendTarget> t = ParseTarget(options.recommend[i], static_cast<int>(i));
    if (!t.ok()) return t.status();
    targets.push_back(*t);
  }

  SweepFitOptions fit_options;
  fit_options.fit.search.seed = options.seed;
  fit_options.fit.search.population = options.population;
  fit_options.fit.search.generations = options.generations;
  fit_options.fit.search.ftol = options.ftol;
  fit_options.cross_validate = options.cross_validate;
  fit_options.bootstrap_samples = options.bootstrap;
  fit_options.threads = options.threads;

  absl::StatusOr<FitReport> report;
  if (!options.csv.empty()) {
    absl::StatusOr<std::string> text = ReadFile(options.csv);
    if (!text.ok()) return text.status();
    absl::StatusOr<std::vector<Observation>> obs = ParseDeltaCsv(*text);
    if (!obs.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(options.csv, ": ", obs.status().message()));
    }
    report = FitObservations(*std::move(obs), fit_options);
  } else {
    absl::StatusOr<std::vector<RunCurve>> runs = LoadSweepRuns(options.db, options.sweep);
    if (!runs.ok()) return runs.status();
    report = FitSweep(*runs, fit_options);
  }
  if (!report.ok()) return report.status();

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
    auto it = report->dense_curves.find(DenseGroupName(t.seq_len, t.backbone));
    if (it != report->dense_curves.end() && it->second.LossAt(t.flops).ok()) dense = &it->second;
    absl::StatusOr<Recommendation> rec =
        Recommend(report->fit.params, q, dense,
                  report->bootstrap.has_value() ? &*report->bootstrap : nullptr);
    if (!rec.ok()) return rec.status();
    recs.push_back(*std::move(rec));
  }
  if (options.output == "json") {
    absl::StatusOr<std::string> json = ProtoJson(ToReportProto(*report, recs, options.seed));
    if (!json.ok()) return json.status();
    out << *json;
    return absl::OkStatus();
  }
  std::ostringstream text;
  PrintTable(*report, recs, text);
  out << text.str();
  return absl::OkStatus();
}

}  // namespace xmod::fitter
