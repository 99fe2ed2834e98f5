// The two-stage fit of Eq. 14 (Appendix B.5), by sweep or by A. See two_stage.h.
#include "fitter/two_stage.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fitter/bounded_lsq.h"

namespace xmod::fitter {
namespace {

constexpr double kFree = -std::numeric_limits<double>::infinity();

// Logs of one stage's observations, precomputed once: the objective runs ~10^4 times.
struct StageData {
  Eigen::VectorXd log_n_act, log_ratio, log_l, log_k, log_omega;  // (n)
  Eigen::VectorXd log_dense_tokens, log_exposure;  // (n) log(D_D / kTokenUnit), log(D/D_D)
  Eigen::VectorXd y;                               // (n) target
  double sst = 1;                                  // Σ (y − ȳ)², the objective's scale

  explicit StageData(const std::vector<const Observation*>& obs) {
    const int n = static_cast<int>(obs.size());
    for (Eigen::VectorXd* v : {&log_n_act, &log_ratio, &log_l, &log_k, &log_omega,
                               &log_dense_tokens, &log_exposure, &y}) {
      v->resize(n);
    }
    for (int i = 0; i < n; ++i) {
      const LawPoint x = obs[i]->point();
      log_n_act(i) = std::log(x.n_act);
      log_ratio(i) = std::log(x.capacity_ratio);
      log_l(i) = std::log(x.seq_len);
      log_k(i) = std::log(x.k);
      log_omega(i) = std::log(AnchorShare(x.a));
      log_dense_tokens(i) = x.dense_tokens > 0 ? std::log(x.dense_tokens / kTokenUnit) : 0.0;
      log_exposure(i) = std::log(x.exposure);
      y(i) = obs[i]->delta;
    }
  }
  void SetTarget(const Eigen::VectorXd& target) {
    y = target;
    const double centered = (y.array() - y.mean()).square().sum();
    sst = centered > 0 ? centered : 1.0;
  }
  int size() const { return static_cast<int>(y.size()); }
};

// Stage-1 design [1, −R_N, P_L] at exponents (η_N, ρ_N, η_L, ρ_L), and for the full
// candidate law (six exponents, then η_D, ρ_D) the column P_D (Eq. 24).  // (n, 3) or (n, 4)
Eigen::MatrixXd Stage1Design(const StageData& d, const std::vector<double>& x) {
  const bool full = x.size() == 6;
  Eigen::MatrixXd m(d.size(), full ? 4 : 3);
  m.col(0).setOnes();
  m.col(1) = -((-x[0] * d.log_n_act.array()).exp() * (1.0 - (-x[1] * d.log_ratio.array()).exp()));
  m.col(2) = (-x[2] * d.log_l.array()).exp() * ((x[3] * d.log_k.array()).exp() - 1.0);
  if (full) {
    m.col(3) =
        (-x[4] * d.log_dense_tokens.array()).exp() * ((-x[5] * d.log_exposure.array()).exp() - 1.0);
  }
  return m;
}

// Stage-2 design [−R_{A,K}] at exponents (ρ_K, ρ_A), or [1, −R_{A,K}] with its own offset
// (by sweep).  // (n, 1) or (n, 2)
Eigen::MatrixXd Stage2Design(const StageData& d, const std::vector<double>& x, bool offset) {
  Eigen::MatrixXd m(d.size(), offset ? 2 : 1);
  if (offset) m.col(0).setOnes();
  m.col(offset ? 1 : 0) =
      -(((x[0] * d.log_k.array()).exp() - 1.0) * ((x[1] * d.log_omega.array()).exp() - 1.0));
  return m;
}

// Rows of stage 2 alone under a fit by sweep: axk, and neither kxl nor nact.
bool Stage2Only(const Observation& o) {
  return o.InSweep(SweepRole::kAxk) && !o.InSweep(SweepRole::kKxl) && !o.InSweep(SweepRole::kNact);
}

// The rows of each stage (see two_stage.h), or INVALID_ARGUMENT naming the observation.
absl::Status AssignStages(const std::vector<Observation>& fitted, bool by_sweep,
                          std::vector<const Observation*>* stage1,
                          std::vector<const Observation*>* stage2) {
  for (const Observation& o : fitted) {
    if (!by_sweep) {
      (o.a == 1.0 ? stage1 : stage2)->push_back(&o);
      continue;
    }
    if (o.sweeps.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          o.Describe(), ": names no sweep (kxl, nact or axk) while other observations do"));
    }
    const bool base = o.InSweep(SweepRole::kKxl) || o.InSweep(SweepRole::kNact);
    if (base && o.a != 1.0) {
      return absl::InvalidArgumentError(absl::StrCat(
          o.Describe(), ": the kxl and nact sweeps are at A = 1 (B.4); this row has A = ", o.a));
    }
    if (base) stage1->push_back(&o);
    if (o.InSweep(SweepRole::kAxk)) stage2->push_back(&o);
  }
  return absl::OkStatus();
}

absl::Status CheckStage(const std::string& stage, const std::vector<const Observation*>& obs,
                        int min_obs) {
  if (static_cast<int>(obs.size()) < min_obs) {
    return absl::InvalidArgumentError(
        absl::StrCat(stage, ": ", obs.size(), " observations, the stage needs at least ", min_obs));
  }
  std::set<int> ks;
  for (const Observation* o : obs) ks.insert(o->k);
  if (ks.size() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(stage, ": every observation has K = ", *ks.begin(),
                     "; a single K value cannot identify the law (need at least two)"));
  }
  return absl::OkStatus();
}

void AddBoundFlags(const SearchResult& r, const std::vector<const char*>& names,
                   std::vector<std::string>* out) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (r.at_bound[i]) out->push_back(names[i]);
  }
}

}  // namespace

bool UsesSweepRoles(const std::vector<Observation>& observations) {
  for (const Observation& o : observations) {
    if (!o.sweeps.empty()) return true;
  }
  return false;
}

namespace {

Goodness Measure(const std::vector<Observation>& observations,
                 const std::function<double(const Observation&)>& predict) {
  Goodness g;
  g.n = static_cast<int>(observations.size());
  if (g.n == 0) return g;
  double mean = 0;
  for (const Observation& o : observations) mean += o.delta;
  mean /= g.n;
  double sse = 0, sst = 0, sae = 0;
  for (const Observation& o : observations) {
    const double r = o.delta - predict(o);
    sse += r * r;
    sae += std::fabs(r);
    sst += (o.delta - mean) * (o.delta - mean);
  }
  g.r2 = sst > 0 ? 1.0 - sse / sst : 0.0;
  g.rmse = std::sqrt(sse / g.n);
  g.mae = sae / g.n;
  return g;
}

}  // namespace

Goodness Evaluate(const LawParams& params, const std::vector<Observation>& observations) {
  return Measure(observations,
                 [&params](const Observation& o) { return PredictDelta(params, o.point()); });
}

double FittedDelta(const FitResult& fit, const Observation& observation) {
  const double law = PredictDelta(fit.params, observation.point());
  if (fit.by_sweep && fit.stage2_fitted && Stage2Only(observation)) {
    return law - fit.params.e + fit.e_stage2;
  }
  return law;
}

Goodness EvaluateFit(const FitResult& fit, const std::vector<Observation>& observations) {
  return Measure(observations, [&fit](const Observation& o) { return FittedDelta(fit, o); });
}

namespace {

// Stage 1: x = (η_N, ρ_N, η_L, ρ_L), and η_D, ρ_D for the full law; coefficients (e, u, w)
// and v. Or, with options.fixed_stage1, those values copied.
absl::Status FitStage1(const std::vector<const Observation*>& stage1, const FitOptions& options,
                       FitResult* result) {
  LawParams& p = result->params;
  if (options.fixed_stage1 != nullptr) {
    const LawParams& f = *options.fixed_stage1;
    p = f;
    p.z = p.rho_k = p.rho_a = 0;
    return absl::OkStatus();
  }
  const bool full = options.law == LawForm::kFull;
  const ExponentBounds& b = options.bounds;
  StageData d1(stage1);
  d1.SetTarget(d1.y);
  std::vector<double> lower1 = {kFree, 0.0, 0.0};
  std::vector<double> lo = {b.eta_lo, b.rho_lo, b.eta_lo, b.rho_lo};
  std::vector<double> hi = {b.eta_hi, b.rho_hi, b.eta_hi, b.rho_hi};
  std::vector<const char*> names = {"eta_n", "rho_n", "eta_l", "rho_l"};
  if (full) {
    lower1.push_back(0.0);  // v >= 0 (A.2)
    lo.insert(lo.end(), {b.eta_lo, b.rho_lo});
    hi.insert(hi.end(), {b.eta_hi, b.rho_hi});
    names.insert(names.end(), {"eta_d", "rho_d"});
  }
  Objective f1 = [&d1, &lower1](const std::vector<double>& x) {
    return SolveBoundedLsq(Stage1Design(d1, x), d1.y, lower1).sse / d1.sst;
  };
  SearchOptions search1 = options.search;
  if (options.warm_start != nullptr) {
    const LawParams& w = *options.warm_start;
    search1.initial_points = {{w.eta_n, w.rho_n, w.eta_l, w.rho_l}};
    if (full) search1.initial_points[0].insert(search1.initial_points[0].end(), {w.eta_d, w.rho_d});
  } else if (full) {
    // The full law nests the reduced one (v = 0): start its search at the reduced stage-1
    // optimum, where the exact LSQ can only lower the SSE by v >= 0, so the full stage 1
    // never fits its rows worse than the reduced one (C.1's nested comparison).
    FitOptions nested = options;
    nested.law = LawForm::kReduced;
    FitResult reduced;
    if (absl::Status s = FitStage1(stage1, nested, &reduced); !s.ok()) return s;
    const LawParams& r = reduced.params;
    search1.initial_points = {{r.eta_n, r.rho_n, r.eta_l, r.rho_l, 1.0, 1.0}};
    result->evaluations += reduced.evaluations;
  }
  const SearchResult r1 = MinimizeBox(f1, lo, hi, search1);
  if (Cancelled(options.search)) return absl::CancelledError("fit cancelled");
  const BoundedLsqResult c1 = SolveBoundedLsq(Stage1Design(d1, r1.x), d1.y, lower1);
  // ParamAt indices of the searched exponents (η_N, ρ_N, η_L, ρ_L, η_D, ρ_D) and of the
  // solved coefficients (e, u, w, v), in design order.
  constexpr int kExponents[] = {2, 3, 5, 6, 11, 12};
  constexpr int kCoefficients[] = {0, 1, 4, 10};
  for (size_t i = 0; i < r1.x.size(); ++i) ParamAt(p, kExponents[i]) = r1.x[i];
  for (int j = 0; j < c1.coef.size(); ++j) ParamAt(p, kCoefficients[j]) = c1.coef(j);
  result->evaluations += r1.evaluations;
  AddBoundFlags(r1, names, &result->at_bound);
  return absl::OkStatus();
}

// Stage 2: x = (ρ_K, ρ_A); coefficient z on the stage-1 residual, and by sweep an offset of
// its own fitted to the residual of the stage-1 law without its offset e.
absl::Status FitStage2(const std::vector<const Observation*>& stage2, const FitOptions& options,
                       FitResult* result) {
  const bool by_sweep = result->by_sweep;
  const ExponentBounds& b = options.bounds;
  LawParams& p = result->params;
  StageData d2(stage2);
  Eigen::VectorXd residual(d2.size());
  for (int i = 0; i < d2.size(); ++i) {
    residual(i) = stage2[i]->delta - PredictDelta(p, stage2[i]->point()) + (by_sweep ? p.e : 0);
  }
  d2.SetTarget(residual);
  const std::vector<double> lower2 =
      by_sweep ? std::vector<double>{kFree, 0.0} : std::vector<double>{0.0};
  Objective f2 = [&d2, &lower2, by_sweep](const std::vector<double>& x) {
    return SolveBoundedLsq(Stage2Design(d2, x, by_sweep), d2.y, lower2).sse / d2.sst;
  };
  SearchOptions search2 = options.search;
  search2.seed = options.search.seed + 7919;
  if (options.warm_start != nullptr) {
    search2.initial_points = {{options.warm_start->rho_k, options.warm_start->rho_a}};
  }
  const SearchResult r2 = MinimizeBox(f2, {b.rho_lo, b.rho_lo}, {b.rho_hi, b.rho_hi}, search2);
  if (Cancelled(options.search)) return absl::CancelledError("fit cancelled");
  const BoundedLsqResult c2 = SolveBoundedLsq(Stage2Design(d2, r2.x, by_sweep), d2.y, lower2);
  p.rho_k = r2.x[0];
  p.rho_a = r2.x[1];
  if (by_sweep) result->e_stage2 = c2.coef(0);
  p.z = c2.coef(by_sweep ? 1 : 0);
  result->stage2_fitted = true;
  result->evaluations += r2.evaluations;
  AddBoundFlags(r2, {"rho_k", "rho_a"}, &result->at_bound);
  return absl::OkStatus();
}

// The observations to fit (held_out == false), or INVALID_ARGUMENT naming one that cannot
// be: a non-finite Δ, or no C under the full law (P_D needs D_D).
absl::StatusOr<std::vector<Observation>> FittedRows(const std::vector<Observation>& observations,
                                                    LawForm law) {
  std::vector<Observation> fitted;
  for (const Observation& o : observations) {
    if (o.held_out) continue;
    if (!std::isfinite(o.delta)) {
      return absl::InvalidArgumentError(absl::StrCat(o.Describe(), ": delta is not finite"));
    }
    if (law == LawForm::kFull && !(o.point().dense_tokens > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(o.Describe(),
                       ": the exposure term P_D (Eq. 24) needs the run's training "
                       "FLOPs C (the CSV's C column)"));
    }
    fitted.push_back(o);
  }
  return fitted;
}

}  // namespace

absl::StatusOr<FitResult> FitTwoStage(const std::vector<Observation>& observations,
                                      const FitOptions& options) {
  absl::StatusOr<std::vector<Observation>> fitted = FittedRows(observations, options.law);
  if (!fitted.ok()) return fitted.status();
  std::vector<const Observation*> stage1, stage2;
  const bool by_sweep = UsesSweepRoles(observations);
  if (absl::Status s = AssignStages(*fitted, by_sweep, &stage1, &stage2); !s.ok()) return s;
  const std::string stage1_name =
      by_sweep ? "stage 1 (A = 1 rows of the kxl and nact sweeps)" : "stage 1 (A = 1 runs)";
  const std::string stage2_name =
      by_sweep ? "stage 2 (rows of the axk sweep)" : "stage 2 (anchor-stride sweep, A != 1 runs)";
  if (options.fixed_stage1 == nullptr) {
    if (absl::Status s = CheckStage(stage1_name, stage1, 8); !s.ok()) return s;
  }
  if (!stage2.empty()) {
    if (absl::Status s = CheckStage(stage2_name, stage2, 4); !s.ok()) return s;
    if (by_sweep && std::all_of(stage2.begin(), stage2.end(),
                                [](const Observation* o) { return o->a == 1.0; })) {
      return absl::InvalidArgumentError(
          absl::StrCat(stage2_name,
                       ": every row has A = 1, where R_{A,K} = 0; the anchor "
                       "interaction needs rows with A != 1"));
    }
  }
  FitResult result;
  result.by_sweep = by_sweep;
  result.n_obs = static_cast<int>(fitted->size());
  result.n_stage1 = static_cast<int>(stage1.size());
  result.n_stage2 = static_cast<int>(stage2.size());
  if (absl::Status s = FitStage1(stage1, options, &result); !s.ok()) return s;
  if (!stage2.empty()) {
    if (absl::Status s = FitStage2(stage2, options, &result); !s.ok()) return s;
  }
  const Goodness g = EvaluateFit(result, *fitted);
  result.r2 = g.r2;
  result.rmse = g.rmse;
  result.mae = g.mae;
  return result;
}

}  // namespace xmod::fitter
