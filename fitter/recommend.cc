// Predictions and (K*, A*) recommendations from a fitted law. See recommend.h.
#include "fitter/recommend.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fitter/law_backbones.h"

namespace xmod::fitter {

absl::StatusOr<Prediction> Predict(const LawParams& params, double flops, int seq_len,
                                   const std::string& backbone, int k, double a,
                                   const LossCurve* dense, const BootstrapResult* bootstrap,
                                   int n0) {
  const std::string what =
      absl::StrCat("C=", flops, " L=", seq_len, " backbone=", backbone, " K=", k, " A=", a);
  if (k < 1 || !(a > 0) || seq_len < k) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": need K >= 1, A > 0 and L >= K"));
  }
  Prediction p;
  p.flops = flops;
  p.seq_len = seq_len;
  p.backbone = backbone;
  p.k = k;
  p.a = a;
  absl::StatusOr<double> n_act = NominalActiveParams(backbone);
  if (!n_act.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", n_act.status().message()));
  absl::StatusOr<double> ratio = CapacityRatio(backbone, k, a, seq_len, n0);
  if (!ratio.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", ratio.status().message()));
  absl::StatusOr<double> total = TotalParams(backbone, k, a, seq_len, n0);
  if (!total.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", total.status().message()));
  absl::StatusOr<TokenExposure> exposure = ExposureOf(backbone, k, a, seq_len, n0);
  if (!exposure.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", exposure.status().message()));
  p.n_act = *n_act;
  p.total_params = *total;
  LawPoint x{*n_act, *ratio, static_cast<double>(seq_len), static_cast<double>(k), a};
  x.exposure = exposure->ratio;  // Eq. 24's exposure term (unused at v = 0, Eq. 14)
  x.dense_tokens = flops * exposure->dense_tokens_per_flop;
  p.delta = CandidateDelta(params, x);
  p.delta_low = p.delta_high = p.delta;
  if (bootstrap != nullptr && !bootstrap->draws.empty() && k > 1) {
    std::tie(p.delta_low, p.delta_high) = DeltaInterval(*bootstrap, x);
  }
  if (dense != nullptr) {
    absl::StatusOr<double> dense_loss = dense->LossAt(flops);
    if (!dense_loss.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", dense_loss.status().message()));
    }
    p.loss = *dense_loss + p.delta;
  }
  return p;
}

namespace {

// A.3's K̂ for the query's backbone and L. At A = 1 the plan has N1 = (N_layers − N0)/2
// groups and N(K,1)/N_act = (N0 + N1(1 + K))/N_layers is linear in K, so its slope κ is
// the ratio at K = 2 less the ratio at K = 1 (= 1).
double ClosedFormK(const LawParams& params, const RecommendQuery& query) {
  absl::StatusOr<double> n_act = NominalActiveParams(query.backbone);
  absl::StatusOr<double> ratio = CapacityRatio(query.backbone, 2, 1, query.seq_len, query.n0);
  if (!n_act.ok() || !ratio.ok()) return 0.0;
  return ApproximateOptimumK(params, *n_act, query.seq_len, *ratio - 1.0);
}

// The candidate K and A values: the query's, or the defaults where it gives none.
struct CandidateGrid {
  std::vector<int> ks;
  std::vector<double> as;
};

CandidateGrid GridOf(const RecommendQuery& query) {
  CandidateGrid grid{query.ks, query.as};
  if (grid.ks.empty()) {
    for (int k = 1; k <= 32; ++k) grid.ks.push_back(k);
  }
  if (grid.as.empty()) grid.as = {0.5, 1, 2, 3, 4, 5};
  return grid;
}

absl::Status CheckQuery(const CandidateGrid& grid, const RecommendQuery& query,
                        const LossCurve* dense) {
  const std::vector<int>& ks = grid.ks;
  const std::vector<double>& as = grid.as;
  for (size_t i = 0; i < ks.size(); ++i) {
    if (ks[i] < 1) return absl::InvalidArgumentError(absl::StrCat("ks[", i, "]: K must be >= 1"));
  }
  for (size_t i = 0; i < as.size(); ++i) {
    if (!(as[i] > 0)) return absl::InvalidArgumentError(absl::StrCat("as[", i, "]: A must be > 0"));
  }
  if (query.seq_len < 1) return absl::InvalidArgumentError("seq_len: L must be >= 1");
  // What fails every candidate alike is reported, not skipped.
  if (absl::StatusOr<double> n = NominalActiveParams(query.backbone); !n.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("backbone: ", n.status().message()));
  }
  if (dense != nullptr) {
    if (absl::StatusOr<double> d = dense->LossAt(query.flops); !d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("flops: ", d.status().message()));
    }
  }
  return absl::OkStatus();
}

// The predictions of every admissible (K, A) of the grid, in grid order.
std::vector<Prediction> Candidates(const LawParams& params, const RecommendQuery& query,
                                   const CandidateGrid& grid, const LossCurve* dense,
                                   const BootstrapResult* bootstrap) {
  std::vector<Prediction> candidates;
  bool dense_added = false;
  for (int k : grid.ks) {
    for (double a : grid.as) {
      if (k == 1) {
        if (dense_added) continue;  // A means nothing without sparse layers
        dense_added = true;
        a = 1;
      }
      if (k > query.seq_len || std::fabs(a * k - std::round(a * k)) > 1e-9) continue;
      absl::StatusOr<Prediction> p = Predict(params, query.flops, query.seq_len, query.backbone, k,
                                             a, dense, bootstrap, query.n0);
      if (!p.ok()) continue;  // a plan the accounting rejects is not a candidate
      if (query.max_total_params > 0 && p->total_params > query.max_total_params) continue;
      candidates.push_back(*std::move(p));
    }
  }
  return candidates;
}

}  // namespace

absl::StatusOr<Recommendation> Recommend(const LawParams& params, const RecommendQuery& query,
                                         const LossCurve* dense, const BootstrapResult* bootstrap) {
  const CandidateGrid grid = GridOf(query);
  if (absl::Status s = CheckQuery(grid, query, dense); !s.ok()) return s;
  Recommendation out;
  out.candidates = Candidates(params, query, grid, dense, bootstrap);
  if (out.candidates.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "recommend L=", query.seq_len, " backbone=", query.backbone,
        ": no admissible (K, A) candidate", query.max_total_params > 0 ? " under the cap" : ""));
  }
  std::stable_sort(out.candidates.begin(), out.candidates.end(),
                   [](const Prediction& x, const Prediction& y) { return x.delta < y.delta; });
  out.best = out.candidates.front();
  out.closed_form_k = ClosedFormK(params, query);
  return out;
}

xmod::v1::Prediction PredictionToProto(const Prediction& p) {
  xmod::v1::Prediction out;
  xmod::v1::LawPoint* point = out.mutable_point();
  point->set_flops(p.flops);
  point->set_seq_len(p.seq_len);
  point->set_backbone(p.backbone);
  point->set_k(p.k);
  point->set_a(p.a);
  out.set_delta(p.delta);
  out.set_loss(p.loss);
  if (p.delta_low != p.delta || p.delta_high != p.delta) {
    out.set_delta_low(p.delta_low);
    out.set_delta_high(p.delta_high);
  }
  return out;
}

xmod::v1::RecommendResponse RecommendationToProto(const Recommendation& r) {
  xmod::v1::RecommendResponse out;
  out.set_k(r.best.k);
  out.set_a(r.best.a);
  out.set_delta(r.best.delta);
  out.set_total_params(r.best.total_params);
  out.set_closed_form_k(r.closed_form_k);
  for (const Prediction& p : r.candidates) *out.add_candidates() = PredictionToProto(p);
  return out;
}

}  // namespace xmod::fitter
