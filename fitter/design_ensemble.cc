// Point fit, stratified warm-started bootstrap ensemble and Bayes answers. See
// design_ensemble.h.
#include "fitter/design_ensemble.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fitter/bounded_lsq.h"
#include "fitter/de_search.h"

namespace xmod::fitter {
namespace {

constexpr int kResampleAttempts = 8;
constexpr double kFree = -INFINITY;

// Eq. 14 over every row at once: exponents x = (η_N, ρ_N, η_L, ρ_L, ρ_K, ρ_A), coefficients
// (e, u, w, z) by exact bounded least squares (u, w, z >= 0). Without A != 1 rows the
// R_{A,K} column is dropped and ρ_K, ρ_A, z stay those of `start` (z = 0 there).
class JointFit {
 public:
  explicit JointFit(const std::vector<Observation>& rows) : n_(static_cast<int>(rows.size())) {
    log_n_act_.resize(n_);
    log_ratio_.resize(n_);
    log_l_.resize(n_);
    log_k_.resize(n_);
    log_omega_.resize(n_);
    y_.resize(n_);
    for (int i = 0; i < n_; ++i) {
      log_n_act_(i) = std::log(rows[i].n_act);
      log_ratio_(i) = std::log(rows[i].capacity_ratio);
      log_l_(i) = std::log(static_cast<double>(rows[i].seq_len));
      log_k_(i) = std::log(static_cast<double>(rows[i].k));
      log_omega_(i) = std::log(AnchorShare(rows[i].a));
      y_(i) = rows[i].delta;
      anchored_ = anchored_ || rows[i].a != 1.0;
    }
  }

  // Minimises the SSE from `start` (its exponents seed the search) and returns the law.
  LawParams Fit(const LawParams& start, const SearchOptions& search, double* sse) const {
    const ExponentBounds b;
    SearchOptions options = search;
    options.initial_points = {
        {start.eta_n, start.rho_n, start.eta_l, start.rho_l, start.rho_k, start.rho_a}};
    const SearchResult r =
        MinimizeBox([this](const std::vector<double>& x) { return Solve(x).sse; },
                    {b.eta_lo, b.rho_lo, b.eta_lo, b.rho_lo, b.rho_lo, b.rho_lo},
                    {b.eta_hi, b.rho_hi, b.eta_hi, b.rho_hi, b.rho_hi, b.rho_hi}, options);
    const BoundedLsqResult c = Solve(r.x);
    LawParams p = start;
    p.eta_n = r.x[0];
    p.rho_n = r.x[1];
    p.eta_l = r.x[2];
    p.rho_l = r.x[3];
    p.e = c.coef(0);
    p.u = c.coef(1);
    p.w = c.coef(2);
    if (anchored_) {
      p.rho_k = r.x[4];
      p.rho_a = r.x[5];
      p.z = c.coef(3);
    }
    *sse = c.sse;
    return p;
  }

  int parameters() const { return anchored_ ? 10 : 7; }

 private:
  BoundedLsqResult Solve(const std::vector<double>& x) const {
    Eigen::MatrixXd m(n_, anchored_ ? 4 : 3);  // (n, 3 or 4)
    m.col(0).setOnes();
    m.col(1) = -((-x[0] * log_n_act_.array()).exp() * (1.0 - (-x[1] * log_ratio_.array()).exp()));
    m.col(2) = (-x[2] * log_l_.array()).exp() * ((x[3] * log_k_.array()).exp() - 1.0);
    if (anchored_) {
      m.col(3) =
          -(((x[4] * log_k_.array()).exp() - 1.0) * ((x[5] * log_omega_.array()).exp() - 1.0));
      return SolveBoundedLsq(m, y_, {kFree, 0.0, 0.0, 0.0});
    }
    return SolveBoundedLsq(m, y_, {kFree, 0.0, 0.0});
  }

  int n_;
  bool anchored_ = false;
  Eigen::VectorXd log_n_act_, log_ratio_, log_l_, log_k_, log_omega_, y_;  // (n)
};

// A resample of `rows` (drawn within each stratum), or false when every attempt left a
// stratum with a single K (the fit could not identify it).
bool Resample(const std::vector<const Observation*>& stage1,
              const std::vector<const Observation*>& stage2, std::mt19937_64& rng,
              std::vector<Observation>* out) {
  auto draw = [&rng](const std::vector<const Observation*>& rows, std::vector<Observation>* dst) {
    if (rows.empty()) return true;
    std::uniform_int_distribution<size_t> pick(0, rows.size() - 1);
    std::set<int> ks;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Observation* o = rows[pick(rng)];
      ks.insert(o->k);
      dst->push_back(*o);
    }
    return ks.size() >= 2;
  };
  for (int attempt = 0; attempt < kResampleAttempts; ++attempt) {
    out->clear();
    if (draw(stage1, out) && draw(stage2, out)) return true;
  }
  return false;
}

// A member's draw of every forecast row's final Δ from its forecast (EnsembleOptions).
void RedrawForecasts(const std::map<int64_t, double>& forecast_sd, std::mt19937_64& rng,
                     std::vector<Observation>* rows) {
  if (forecast_sd.empty()) return;
  std::normal_distribution<double> unit(0.0, 1.0);
  for (Observation& o : *rows) {
    auto it = forecast_sd.find(o.run_id);
    if (it != forecast_sd.end()) o.delta += it->second * unit(rng);
  }
}

bool Cancelled(const EnsembleOptions& options) { return options.cancelled && options.cancelled(); }

absl::Status Stopped() { return absl::CancelledError("ensemble fit cancelled"); }

// The rows fitted: those not held out, staged by A (two_stage.h) rather than by their sweeps.
std::vector<Observation> FittedRows(const std::vector<Observation>& observations) {
  std::vector<Observation> fitted;
  for (const Observation& o : observations) {
    if (o.held_out) continue;
    fitted.push_back(o);
    fitted.back().sweeps.clear();  // stages by A (two_stage.h): the strata below
  }
  return fitted;
}

// The point fit (two-stage, then the joint refinement when options.joint) and the noise sd of
// its residuals.
absl::Status FitPoint(const std::vector<Observation>& fitted, const EnsembleOptions& options,
                      LawEnsemble* out) {
  FitOptions point_options;
  point_options.search.seed = options.seed;
  absl::StatusOr<FitResult> fit = FitTwoStage(fitted, point_options);
  if (!fit.ok()) return fit.status();
  out->fit = *std::move(fit);
  double sse = out->fit.rmse * out->fit.rmse * out->fit.n_obs;
  int parameters = out->fit.stage2_fitted ? 10 : 7;
  if (Cancelled(options)) return Stopped();
  if (options.joint) {
    SearchOptions joint_search;
    joint_search.seed = options.seed;
    joint_search.population = 16;
    joint_search.generations = 60;
    joint_search.polish_evaluations = 1000;
    const JointFit joint(fitted);
    out->fit.params = joint.Fit(out->fit.params, joint_search, &sse);
    parameters = joint.parameters();
  }
  const int dof = std::max(1, static_cast<int>(fitted.size()) - parameters);
  out->noise_sd = std::max(options.noise_floor, std::sqrt(sse / dof));
  return absl::OkStatus();
}

// One bootstrap member warm-started from `start`, or nullopt when its resample or refit failed.
std::optional<LawParams> FitMember(const std::vector<const Observation*>& stage1,
                                   const std::vector<const Observation*>& stage2,
                                   const EnsembleOptions& options, const LawParams& start,
                                   const SearchOptions& member_search,
                                   std::vector<Observation>* resample) {
  std::mt19937_64 rng(member_search.seed);
  if (!Resample(stage1, stage2, rng, resample)) return std::nullopt;
  RedrawForecasts(options.forecast_sd, rng, resample);
  if (options.joint) {
    double member_sse = 0;
    return JointFit(*resample).Fit(start, member_search, &member_sse);
  }
  FitOptions member_options;
  member_options.search = member_search;
  member_options.warm_start = &start;
  absl::StatusOr<FitResult> refit = FitTwoStage(*resample, member_options);
  if (!refit.ok()) return std::nullopt;
  return refit->params;
}

// The bootstrap members, counting the failed ones in out->failures.
absl::Status FitMembers(const std::vector<Observation>& fitted, const EnsembleOptions& options,
                        LawEnsemble* out) {
  std::vector<const Observation*> stage1, stage2;
  for (const Observation& o : fitted) (o.a == 1.0 ? stage1 : stage2).push_back(&o);
  SearchOptions member_search;
  member_search.population = 16;
  member_search.generations = 40;
  member_search.polish_evaluations = 500;
  std::vector<Observation> resample;
  for (int i = 0; i < options.members; ++i) {
    if (Cancelled(options)) return Stopped();
    member_search.seed = options.seed + 1 + static_cast<uint64_t>(i);
    std::optional<LawParams> member =
        FitMember(stage1, stage2, options, out->fit.params, member_search, &resample);
    if (member) {
      out->members.push_back(*member);
    } else {
      ++out->failures;
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string Target::Describe() const {
  return absl::StrFormat("%s L=%d C=%g", backbone, seq_len, flops);
}

absl::StatusOr<LawEnsemble> FitEnsemble(const std::vector<Observation>& observations,
                                        const EnsembleOptions& options) {
  if (options.members < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("ensemble members: need at least 2, got ", options.members));
  }
  const std::vector<Observation> fitted = FittedRows(observations);
  if (Cancelled(options)) return Stopped();
  LawEnsemble out;
  if (absl::Status s = FitPoint(fitted, options, &out); !s.ok()) return s;
  if (absl::Status s = FitMembers(fitted, options, &out); !s.ok()) return s;
  if (static_cast<int>(out.members.size()) * 2 < options.members) {
    return absl::InvalidArgumentError(absl::StrCat("ensemble: ", out.failures, " of ",
                                                   options.members, " bootstrap refits failed"));
  }
  return out;
}

absl::StatusOr<TargetOptions> MakeTargetOptions(const Target& target, const std::vector<int>& ks,
                                                const std::vector<double>& as) {
  TargetOptions out;
  out.target = target;
  std::string last_error;
  for (int k : ks) {
    for (double a : as) {
      if (k == 1) {
        if (a != as.front()) continue;  // the dense model has no anchor stride
        out.k.push_back(1);
        out.a.push_back(1.0);
        out.points.push_back({0, 1, double(target.seq_len), 1.0, 1.0});
        continue;
      }
      absl::StatusOr<Observation> o =
          MakeDeltaObservation(target.Describe(), target.backbone, target.seq_len, k, a, 0.0);
      if (!o.ok()) {
        last_error = std::string(o.status().message());
        continue;
      }
      out.k.push_back(k);
      out.a.push_back(a);
      out.points.push_back(o->point());
    }
  }
  if (out.points.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target ", target.Describe(), ": no admissible (K, A) among the candidates; ", last_error));
  }
  return out;
}

std::vector<std::vector<double>> MemberDeltas(const std::vector<LawParams>& members,
                                              const std::vector<LawPoint>& points) {
  std::vector<std::vector<double>> out(members.size(), std::vector<double>(points.size()));
  for (size_t m = 0; m < members.size(); ++m) {
    for (size_t o = 0; o < points.size(); ++o) out[m][o] = CandidateDelta(members[m], points[o]);
  }
  return out;
}

TargetAnswer AnswerTarget(const TargetOptions& options,
                          const std::vector<std::vector<double>>& deltas,
                          const std::vector<double>& weights) {
  const size_t n_options = options.points.size();
  std::vector<double> mean(n_options, 0.0);
  double mean_best = 0;
  std::vector<size_t> member_best(deltas.size(), 0);
  for (size_t m = 0; m < deltas.size(); ++m) {
    for (size_t o = 0; o < n_options; ++o) {
      mean[o] += weights[m] * deltas[m][o];
      if (deltas[m][o] < deltas[m][member_best[m]]) member_best[m] = o;
    }
    mean_best += weights[m] * deltas[m][member_best[m]];
  }
  const size_t rec = std::min_element(mean.begin(), mean.end()) - mean.begin();
  TargetAnswer answer;
  answer.target = options.target;
  answer.k = options.k[rec];
  answer.a = options.a[rec];
  answer.delta = mean[rec];
  answer.expected_regret = std::max(0.0, mean[rec] - mean_best);
  double var = 0;
  for (size_t m = 0; m < deltas.size(); ++m) {
    const double d = deltas[m][rec] - mean[rec];
    var += weights[m] * d * d;
    if (member_best[m] == rec) answer.p_best += weights[m];
  }
  answer.delta_sd = std::sqrt(var);
  return answer;
}

}  // namespace xmod::fitter
