// See fit_queries.h.
#include "coordinator/fit_queries.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/store_reads.h"
#include "fitter/db_source.h"
#include "fitter/law.h"
#include "fitter/observations.h"
#include "fitter/recommend.h"
#include "glog/logging.h"

namespace xmod {
namespace {

fitter::LawParams FromProto(const xmod::v1::LawParams& p) {
  fitter::LawParams out;
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
  return out;
}

// What predictions need besides the law: the sweep's dense curves and its layer plan's N0.
struct SweepCurves {
  std::map<std::string, fitter::LossCurve> dense;  // by fitter::DenseGroupName
  int n0 = 4;

  // The dense curve of (L, backbone) when it covers `flops`, else null.
  const fitter::LossCurve* Covering(double flops, int seq_len, const std::string& backbone) const {
    auto it = dense.find(fitter::DenseGroupName(seq_len, backbone));
    if (it == dense.end() || !(flops >= it->second.min_flops()) ||
        !(flops <= it->second.max_flops())) {
      return nullptr;
    }
    return &it->second;
  }
};

absl::StatusOr<SweepCurves> LoadSweepCurves(Store& store, int64_t sweep_id) {
  absl::StatusOr<std::vector<fitter::RunCurve>> runs =
      fitter::LoadSweepRuns(store.path(), sweep_id);
  if (!runs.ok()) return runs.status();
  SweepCurves out;
  for (const fitter::RunCurve& run : *runs) {
    if (run.arch == xmod::v1::XMOD && run.k >= 2) {
      out.n0 = run.n0;
      break;
    }
  }
  absl::StatusOr<std::map<std::string, fitter::LossCurve>> dense = fitter::DenseCurves(*runs);
  if (dense.ok()) {
    out.dense = *std::move(dense);
  } else {
    // A dense run the latest fit did not use may be malformed; Δ is still served.
    LOG(WARNING) << "sweep " << sweep_id
                 << ": dense curves unusable for predictions: " << dense.status();
  }
  return out;
}

void ToProto(const fitter::Prediction& p, xmod::v1::Prediction* out) {
  xmod::v1::LawPoint* point = out->mutable_point();
  point->set_flops(p.flops);
  point->set_seq_len(p.seq_len);
  point->set_backbone(p.backbone);
  point->set_k(p.k);
  point->set_a(p.a);
  out->set_delta(p.delta);
  out->set_loss(p.loss);
}

}  // namespace

absl::StatusOr<xmod::v1::Fit> LatestUsableFit(Store& store, int64_t sweep_id) {
  LatestFits fits;
  absl::Status read = store.Read([&](Db& db) {
    if (absl::Status s = LoadSweep(db, sweep_id).status(); !s.ok()) return s;
    absl::StatusOr<LatestFits> f = LoadLatestFits(db, sweep_id);
    if (!f.ok()) return f.status();
    fits = *std::move(f);
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  if (!fits.ok) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no fit yet for sweep ", sweep_id,
        fits.failed ? absl::StrCat("; the latest attempt failed: ", fits.failed->error()) : ""));
  }
  if (fits.failed) fits.ok->set_error(fits.failed->error());
  return *std::move(fits.ok);
}

absl::StatusOr<xmod::v1::PredictResponse> PredictWithLatestFit(
    Store& store, const xmod::v1::PredictRequest& request) {
  absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(store, request.sweep_id());
  if (!fit.ok()) return fit.status();
  absl::StatusOr<SweepCurves> curves = LoadSweepCurves(store, request.sweep_id());
  if (!curves.ok()) return curves.status();
  const fitter::LawParams params = FromProto(fit->params());
  xmod::v1::PredictResponse response;
  for (int i = 0; i < request.points_size(); ++i) {
    const xmod::v1::LawPoint& x = request.points(i);
    if (!std::isfinite(x.flops()) || x.flops() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("points[", i, "].flops: must be >= 0"));
    }
    const double a = x.a() == 0 ? 1 : x.a();
    absl::StatusOr<fitter::Prediction> p =
        fitter::Predict(params, x.flops(), x.seq_len(), x.backbone(), x.k(), a,
                        curves->Covering(x.flops(), x.seq_len(), x.backbone()),
                        /*bootstrap=*/nullptr, curves->n0);
    if (!p.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("points[", i, "]: ", p.status().message()));
    }
    ToProto(*p, response.add_predictions());
  }
  return response;
}

absl::StatusOr<xmod::v1::RecommendResponse> RecommendWithLatestFit(
    Store& store, const xmod::v1::RecommendRequest& request) {
  if (!std::isfinite(request.flops()) || request.flops() < 0) {
    return absl::InvalidArgumentError("flops: must be >= 0");
  }
  if (!std::isfinite(request.max_total_params()) || request.max_total_params() < 0) {
    return absl::InvalidArgumentError("max_total_params: must be >= 0 (0 = no cap)");
  }
  absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(store, request.sweep_id());
  if (!fit.ok()) return fit.status();
  absl::StatusOr<SweepCurves> curves = LoadSweepCurves(store, request.sweep_id());
  if (!curves.ok()) return curves.status();
  fitter::RecommendQuery query;
  query.flops = request.flops();
  query.seq_len = request.seq_len();
  query.backbone = request.backbone();
  query.ks.assign(request.ks().begin(), request.ks().end());
  query.as.assign(request.as().begin(), request.as().end());
  query.max_total_params = request.max_total_params();
  query.n0 = curves->n0;
  absl::StatusOr<fitter::Recommendation> rec =
      fitter::Recommend(FromProto(fit->params()), query,
                        curves->Covering(request.flops(), request.seq_len(), request.backbone()));
  if (!rec.ok()) return rec.status();
  xmod::v1::RecommendResponse response;
  response.set_k(rec->best.k);
  response.set_a(rec->best.a);
  response.set_delta(rec->best.delta);
  response.set_total_params(rec->best.total_params);
  for (const fitter::Prediction& p : rec->candidates) ToProto(p, response.add_candidates());
  return response;
}

}  // namespace xmod
