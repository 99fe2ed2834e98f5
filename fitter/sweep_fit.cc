// Sweep-level fit: observations, two-stage fit, validation, report. See sweep_fit.h.
#include "fitter/sweep_fit.h"

#include <chrono>
#include <cmath>
#include <utility>

#include "fitter/fit_observations.h"

namespace xmod::fitter {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<FitReport> FitSweep(const std::vector<RunCurve>& runs,
                                   const SweepFitOptions& options) {
  absl::StatusOr<std::vector<Observation>> obs = BuildObservations(runs, options.observations);
  if (!obs.ok()) return obs.status();
  absl::StatusOr<std::map<std::string, LossCurve>> dense = DenseCurves(runs);
  if (!dense.ok()) return dense.status();
  absl::StatusOr<FitReport> report = FitObservations(*std::move(obs), options);
  if (!report.ok()) return report.status();
  report->dense_curves = *std::move(dense);
  return report;
}

absl::StatusOr<FitReport> FitObservations(std::vector<Observation> observations,
                                          const SweepFitOptions& options) {
  FitReport report;
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<FitResult> fit = FitTwoStage(observations, options.fit);
  if (!fit.ok()) return fit.status();
  report.fit = *fit;
  report.fit_seconds = SecondsSince(start);

  std::vector<Observation> held_out;
  for (const Observation& o : observations) {
    if (o.held_out) held_out.push_back(o);
  }
  report.out_of_range = EvaluateFit(report.fit, held_out);

  FitOptions warm = options.fit;
  warm.warm_start = &report.fit.params;
  if (options.cross_validate) {
    const std::vector<CvFold> folds = MakeCvFolds(observations);
    if (!folds.empty()) {
      start = std::chrono::steady_clock::now();
      absl::StatusOr<std::vector<GroupError>> cv =
          CrossValidate(observations, folds, options.fit, &report.fit);
      if (!cv.ok()) return cv.status();
      report.cv = *std::move(cv);
      report.cv_seconds = SecondsSince(start);
    }
  }
  if (options.bootstrap_samples > 0) {
    start = std::chrono::steady_clock::now();
    absl::StatusOr<BootstrapResult> boot =
        Bootstrap(observations, options.bootstrap_samples, options.threads, warm);
    if (!boot.ok()) return boot.status();
    report.bootstrap = *std::move(boot);
    report.bootstrap_seconds = SecondsSince(start);
  }
  report.observations = std::move(observations);
  return report;
}

xmod::v1::LawParams LawParamsToProto(const LawParams& p) {
  xmod::v1::LawParams out;
  out.set_e(p.e);
  out.set_u(p.u);
  out.set_eta_n(p.eta_n);
  out.set_rho_n(p.rho_n);
  out.set_w(p.w);
  out.set_eta_l(p.eta_l);
  out.set_rho_l(p.rho_l);
  out.set_z(p.z);
  out.set_rho_k(p.rho_k);
  out.set_rho_a(p.rho_a);
  out.set_v(p.v);
  out.set_eta_d(p.eta_d);
  out.set_rho_d(p.rho_d);
  return out;
}

LawParams LawParamsFromProto(const xmod::v1::LawParams& p) {
  LawParams out;
  out.e = p.e();
  out.u = p.u();
  out.eta_n = p.eta_n();
  out.rho_n = p.rho_n();
  out.w = p.w();
  out.eta_l = p.eta_l();
  out.rho_l = p.rho_l();
  out.z = p.z();
  out.rho_k = p.rho_k();
  out.rho_a = p.rho_a();
  out.v = p.v();
  out.eta_d = p.eta_d();
  out.rho_d = p.rho_d();
  return out;
}

xmod::v1::Fit ToFitProto(const FitReport& report) {
  xmod::v1::Fit fit;
  *fit.mutable_params() = LawParamsToProto(report.fit.params);
  fit.set_r2(report.fit.r2);
  fit.set_rmse(report.fit.rmse);
  fit.set_mae(report.fit.mae);
  fit.set_n_obs(report.fit.n_obs);
  fit.set_by_sweep(report.fit.by_sweep);
  fit.set_e_stage2(report.fit.e_stage2);
  for (const GroupError& g : report.cv) {
    if (!g.error.empty()) continue;
    xmod::v1::GroupError* out = fit.add_cv();
    out->set_group(g.group);
    out->set_rmse(g.rmse);
    out->set_n(g.n);
  }
  for (const std::string& name : report.fit.at_bound) fit.add_at_bound(name);
  if (report.bootstrap.has_value()) {
    *fit.mutable_ci_low() = LawParamsToProto(report.bootstrap->low);
    *fit.mutable_ci_high() = LawParamsToProto(report.bootstrap->high);
  }
  for (const Observation& o : report.observations) {
    xmod::v1::FitObservation* out = fit.add_observations();
    out->set_run_id(o.run_id);
    out->set_name(o.name);
    out->set_backbone(o.backbone);
    out->set_n_act(o.n_act);
    out->set_seq_len(o.seq_len);
    out->set_k(o.k);
    out->set_a(o.a);
    out->set_n0(o.n0);
    out->set_capacity_ratio(o.capacity_ratio);
    out->set_flops(o.flops);
    out->set_delta(o.delta);
    out->set_replicates(o.replicates);
    out->set_fitted_delta(FittedDelta(report.fit, o));
    for (SweepRole role : o.sweeps) out->add_sweeps(SweepRoleName(role));
    out->set_held_out(o.held_out);
  }
  for (const GroupError& g : report.cv) {
    for (size_t j = 0; j < g.indices.size(); ++j) {
      xmod::v1::FitObservation::CvPrediction* p = fit.mutable_observations(g.indices[j])->add_cv();
      p->set_group(g.group);
      p->set_delta(g.predicted_delta[j]);
    }
  }
  return fit;
}

}  // namespace xmod::fitter
