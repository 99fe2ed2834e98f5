// C.1's comparison of the full candidate law with the reduced one. See law_comparison.h.
#include "fitter/law_comparison.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "fitter/sweep_fit.h"

namespace xmod::fitter {
namespace {

constexpr double kTie = 1e-9;  // relative CV RMSE difference below which the laws tie

struct LawRun {
  FitResult fit;
  std::vector<GroupError> cv;
};

absl::StatusOr<LawRun> FitAndValidate(const std::vector<Observation>& observations,
                                      const std::vector<CvFold>& folds, FitOptions options,
                                      LawForm law) {
  options.law = law;
  LawRun out;
  absl::StatusOr<FitResult> fit = FitTwoStage(observations, options);
  if (!fit.ok()) {
    return absl::Status(fit.status().code(),
                        absl::StrCat(law == LawForm::kFull ? "full candidate law (Eq. 24): "
                                                           : "reduced law (Eq. 14): ",
                                     fit.status().message()));
  }
  out.fit = *std::move(fit);
  absl::StatusOr<std::vector<GroupError>> cv =
      CrossValidate(observations, folds, options, &out.fit);
  if (!cv.ok()) return cv.status();
  out.cv = *std::move(cv);
  return out;
}

// Keeps the folds both laws refitted; pools their held-out squared errors.
CandidateLawFit Pool(LawRun run, const std::vector<bool>& shared,
                     const std::vector<Observation>& observations) {
  CandidateLawFit out;
  out.fit = std::move(run.fit);
  double sse = 0;
  for (size_t f = 0; f < run.cv.size(); ++f) {
    if (!shared[f]) continue;
    const GroupError& g = run.cv[f];
    for (size_t j = 0; j < g.indices.size(); ++j) {
      const double r = observations[g.indices[j]].delta - g.predicted_delta[j];
      sse += r * r;
      ++out.cv_n;
    }
    out.cv.push_back(g);
  }
  out.cv_rmse = out.cv_n > 0 ? std::sqrt(sse / out.cv_n) : 0.0;
  return out;
}

xmod::v1::LawComparison::Candidate CandidateToProto(const CandidateLawFit& c) {
  xmod::v1::LawComparison::Candidate out;
  *out.mutable_params() = LawParamsToProto(c.fit.params);
  out.set_r2(c.fit.r2);
  out.set_rmse(c.fit.rmse);
  for (const GroupError& g : c.cv) {
    xmod::v1::GroupError* e = out.add_cv();
    e->set_group(g.group);
    e->set_rmse(g.rmse);
    e->set_n(g.n);
  }
  out.set_cv_rmse(c.cv_rmse);
  out.set_cv_n(c.cv_n);
  return out;
}

}  // namespace

absl::StatusOr<LawComparison> CompareLaws(const std::vector<Observation>& observations,
                                          const FitOptions& options) {
  const std::vector<CvFold> folds = MakeCvFolds(observations);
  if (folds.empty()) {
    return absl::FailedPreconditionError(
        "compare laws: no grouped folds (need two or more values of L, N_act or A != 1); C.1 "
        "compares the laws out of sample");
  }
  absl::StatusOr<LawRun> reduced = FitAndValidate(observations, folds, options, LawForm::kReduced);
  if (!reduced.ok()) return reduced.status();
  absl::StatusOr<LawRun> full = FitAndValidate(observations, folds, options, LawForm::kFull);
  if (!full.ok()) return full.status();
  LawComparison out;
  std::vector<bool> shared(folds.size());
  for (size_t f = 0; f < folds.size(); ++f) {
    const std::string& error =
        !reduced->cv[f].error.empty() ? reduced->cv[f].error : full->cv[f].error;
    shared[f] = error.empty();
    if (!shared[f]) out.skipped[folds[f].group] = error;
  }
  out.reduced = Pool(*std::move(reduced), shared, observations);
  out.full = Pool(*std::move(full), shared, observations);
  if (out.reduced.cv_n == 0) {
    return absl::FailedPreconditionError(
        "compare laws: no fold could be refitted by both laws; see each fold's error");
  }
  // Ties (to rounding: a full law that ends at v = 0 is the reduced law) go to the nested one.
  out.reduced_preferred = !(out.full.cv_rmse < out.reduced.cv_rmse * (1 - kTie));
  return out;
}

xmod::v1::LawComparison LawComparisonToProto(const LawComparison& c) {
  xmod::v1::LawComparison out;
  *out.mutable_reduced() = CandidateToProto(c.reduced);
  *out.mutable_full() = CandidateToProto(c.full);
  out.set_reduced_preferred(c.reduced_preferred);
  for (const auto& [fold, error] : c.skipped) (*out.mutable_cv_errors())[fold] = error;
  return out;
}

}  // namespace xmod::fitter
