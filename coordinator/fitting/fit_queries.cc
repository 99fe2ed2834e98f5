// See fit_queries.h.
#include "coordinator/fitting/fit_queries.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_path.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/store/store_reads.h"
#include "fitter/db_source.h"
#include "fitter/law.h"
#include "fitter/observations.h"
#include "fitter/recommend.h"
#include "fitter/sweep_fit.h"
#include "glog/logging.h"

namespace xmod {
namespace {

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

// The curves of the sweeps a fit was made from: one sweep's, or every member's of a study.
absl::StatusOr<SweepCurves> LoadSweepCurves(Store& store, const std::vector<int64_t>& sweep_ids) {
  std::vector<fitter::RunCurve> runs;
  absl::Status read = store.Read([&](Db& db) {
    for (int64_t sweep_id : sweep_ids) {
      absl::StatusOr<std::vector<fitter::RunCurve>> some = fitter::LoadSweepRuns(db, sweep_id);
      if (!some.ok()) return some.status();
      runs.insert(runs.end(), some->begin(), some->end());
    }
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  SweepCurves out;
  for (const fitter::RunCurve& run : runs) {
    if (run.arch == xmod::v1::XMOD && run.k >= 2) {
      out.n0 = run.n0;
      break;
    }
  }
  absl::StatusOr<std::map<std::string, fitter::LossCurve>> dense = fitter::DenseCurves(runs);
  if (dense.ok()) {
    out.dense = *std::move(dense);
  } else {
    // A dense run the latest fit did not use may be malformed; Δ is still served.
    LOG(WARNING) << "sweeps " << absl::StrJoin(sweep_ids, ", ")
                 << ": dense curves unusable for predictions: " << dense.status();
  }
  return out;
}

// The latest usable fit of a sweep or a study, and the sweeps it was made from.
struct FitSource {
  xmod::v1::Fit fit;
  std::vector<int64_t> sweep_ids;
};

absl::StatusOr<xmod::v1::Fit> Usable(LatestFits fits, const std::string& what) {
  if (!fits.ok) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no fit yet for ", what,
        fits.failed ? absl::StrCat("; the latest attempt failed: ", fits.failed->error()) : ""));
  }
  if (fits.failed) fits.ok->set_error(fits.failed->error());
  return *std::move(fits.ok);
}

// `sweep_id` or `study` (exactly one) of a request.
absl::StatusOr<FitSource> LoadFitSource(Store& store, int64_t sweep_id, const std::string& study) {
  if (sweep_id != 0 && !study.empty()) {
    return absl::InvalidArgumentError("study: give a sweep_id or a study, not both");
  }
  if (study.empty()) {
    absl::StatusOr<xmod::v1::Fit> fit = LatestUsableFit(store, sweep_id);
    if (!fit.ok()) return fit.status();
    return FitSource{*std::move(fit), {sweep_id}};
  }
  FitSource out;
  LatestFits fits;
  absl::Status read = store.Read([&](Db& db) {
    absl::StatusOr<xmod::v1::Study> s = LoadStudy(db, study);
    if (!s.ok()) return s.status();
    for (const xmod::v1::StudyMember& m : s->spec().members()) {
      out.sweep_ids.push_back(m.sweep_id());
    }
    absl::StatusOr<LatestFits> f = LoadLatestStudyFits(db, s->id());
    if (!f.ok()) return f.status();
    fits = *std::move(f);
    return absl::OkStatus();
  });
  if (!read.ok()) return read;
  absl::StatusOr<xmod::v1::Fit> fit = Usable(std::move(fits), absl::StrCat("study '", study, "'"));
  if (!fit.ok()) return fit.status();
  out.fit = *std::move(fit);
  return out;
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
  return Usable(std::move(fits), absl::StrCat("sweep ", sweep_id));
}

absl::StatusOr<xmod::v1::Fit> LatestUsableFit(Store& store,
                                              const xmod::v1::GetFitRequest& request) {
  absl::StatusOr<FitSource> source = LoadFitSource(store, request.sweep_id(), request.study());
  if (!source.ok()) return source.status();
  return std::move(source->fit);
}

absl::StatusOr<xmod::v1::PredictResponse> PredictWithLatestFit(
    Store& store, const xmod::v1::PredictRequest& request) {
  if (absl::Status s = CheckLimits(request); !s.ok()) return s;
  absl::StatusOr<FitSource> source = LoadFitSource(store, request.sweep_id(), request.study());
  if (!source.ok()) return source.status();
  absl::StatusOr<SweepCurves> curves = LoadSweepCurves(store, source->sweep_ids);
  if (!curves.ok()) return curves.status();
  const fitter::LawParams params = fitter::LawParamsFromProto(source->fit.params());
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
      return InvalidField(absl::StrCat("points[", i, "]"), p.status().message());
    }
    *response.add_predictions() = fitter::PredictionToProto(*p);
  }
  return response;
}

absl::StatusOr<xmod::v1::RecommendResponse> RecommendWithLatestFit(
    Store& store, const xmod::v1::RecommendRequest& request) {
  if (absl::Status s = CheckLimits(request); !s.ok()) return s;
  if (!std::isfinite(request.flops()) || request.flops() < 0) {
    return absl::InvalidArgumentError("flops: must be >= 0");
  }
  if (!std::isfinite(request.max_total_params()) || request.max_total_params() < 0) {
    return absl::InvalidArgumentError("max_total_params: must be >= 0 (0 = no cap)");
  }
  absl::StatusOr<FitSource> source = LoadFitSource(store, request.sweep_id(), request.study());
  if (!source.ok()) return source.status();
  absl::StatusOr<SweepCurves> curves = LoadSweepCurves(store, source->sweep_ids);
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
      fitter::Recommend(fitter::LawParamsFromProto(source->fit.params()), query,
                        curves->Covering(request.flops(), request.seq_len(), request.backbone()));
  if (!rec.ok()) return rec.status();
  return fitter::RecommendationToProto(*rec);
}

}  // namespace xmod
