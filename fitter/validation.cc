// Grouped cross-validation and bootstrap of the two-stage fit. See validation.h.
#include "fitter/validation.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"

namespace xmod::fitter {
namespace {

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

// One fold per distinct key among the rows `member` accepts, when there are two or more.
// Every other fitted row with the fold's key (a row of another sweep at the held-out L or
// N_act) leaves the refit with it: B.5 holds out "all sparse runs with one sequence length
// L" (or one N_act), whichever sweep lists them.
template <typename Key>
void AddFolds(const std::vector<Observation>& observations,
              const std::function<bool(const Observation&)>& member,
              const std::function<Key(const Observation&)>& key,
              const std::function<std::string(const Key&)>& name, bool stage2_only,
              std::vector<CvFold>* folds) {
  std::map<Key, CvFold> by_key;
  for (int i = 0; i < static_cast<int>(observations.size()); ++i) {
    const Observation& o = observations[i];
    if (!o.held_out && member(o)) by_key[key(o)].indices.push_back(i);
  }
  if (by_key.size() < 2) return;
  for (int i = 0; i < static_cast<int>(observations.size()); ++i) {
    const Observation& o = observations[i];
    if (o.held_out || member(o)) continue;
    auto it = by_key.find(key(o));
    if (it != by_key.end()) it->second.excluded.push_back(i);
  }
  for (auto& [k, fold] : by_key) {
    fold.group = name(k);
    fold.stage2_only = stage2_only;
    folds->push_back(std::move(fold));
  }
}

// The folds of a fit by sweep (see validation.h).
std::vector<CvFold> SweepFolds(const std::vector<Observation>& observations) {
  std::vector<CvFold> folds;
  AddFolds<int>(
      observations, [](const Observation& o) { return o.InSweep(SweepRole::kKxl); },
      [](const Observation& o) { return o.seq_len; },
      [](const int& l) { return absl::StrCat("L=", l); }, false, &folds);
  AddFolds<std::string>(
      observations, [](const Observation& o) { return o.InSweep(SweepRole::kNact); },
      [](const Observation& o) { return o.backbone; },
      [](const std::string& b) { return absl::StrCat("N_act=", b); }, false, &folds);
  AddFolds<double>(
      observations, [](const Observation& o) { return o.InSweep(SweepRole::kAxk) && o.a != 1.0; },
      [](const Observation& o) { return o.a; },
      [](const double& a) { return absl::StrCat("A=", a); }, true, &folds);
  return folds;
}

bool HasExplicitGroups(const std::vector<Observation>& observations) {
  bool explicit_groups = false;
  for (const Observation& o : observations) explicit_groups |= !o.groups.empty();
  return explicit_groups;
}

std::vector<CvFold> ExplicitGroupFolds(const std::vector<Observation>& observations) {
  std::vector<CvFold> folds;
  std::map<std::string, std::vector<int>> by_label;
  for (int i = 0; i < static_cast<int>(observations.size()); ++i) {
    if (observations[i].held_out) continue;
    for (const std::string& g : observations[i].groups) by_label[g].push_back(i);
  }
  for (auto& [label, indices] : by_label) folds.push_back({label, std::move(indices)});
  return folds;
}

// Context-sweep backbone and scale-sweep context among the A = 1 runs.
struct A1Coverage {
  std::map<std::string, std::set<int>> ls_of_backbone;
  std::map<int, std::set<std::string>> backbones_of_l;
};

A1Coverage CoverageOfA1Runs(const std::vector<Observation>& observations) {
  A1Coverage cover;
  for (const Observation& o : observations) {
    if (o.held_out || o.a != 1.0) continue;
    cover.ls_of_backbone[o.backbone].insert(o.seq_len);
    cover.backbones_of_l[o.seq_len].insert(o.backbone);
  }
  return cover;
}

// The backbone run at the most context lengths (the first among equals); "" when none.
std::string ContextSweepBackbone(const A1Coverage& cover) {
  std::string context_backbone;
  for (const auto& [backbone, ls] : cover.ls_of_backbone) {
    if (context_backbone.empty() || ls.size() > cover.ls_of_backbone.at(context_backbone).size()) {
      context_backbone = backbone;
    }
  }
  return context_backbone;
}

// The context length run with the most backbones (the first among equals); 0 when none.
int ScaleSweepL(const A1Coverage& cover) {
  int scale_l = 0;
  for (const auto& [l, backbones] : cover.backbones_of_l) {
    if (scale_l == 0 || backbones.size() > cover.backbones_of_l.at(scale_l).size()) scale_l = l;
  }
  return scale_l;
}

// The fitted A = 1 rows at (L, backbone).
CvFold A1Fold(const std::vector<Observation>& observations, std::string group, int seq_len,
              const std::string& backbone) {
  CvFold fold{std::move(group), {}};
  for (int i = 0; i < static_cast<int>(observations.size()); ++i) {
    const Observation& o = observations[i];
    if (!o.held_out && o.a == 1.0 && o.seq_len == seq_len && o.backbone == backbone) {
      fold.indices.push_back(i);
    }
  }
  return fold;
}

void AddAnchorFolds(const std::vector<Observation>& observations, std::vector<CvFold>* folds) {
  std::set<double> anchors;
  for (const Observation& o : observations) {
    if (!o.held_out && o.a != 1.0) anchors.insert(o.a);
  }
  if (anchors.size() < 2) return;
  for (double a : anchors) {
    CvFold fold{absl::StrCat("A=", a), {}};
    for (int i = 0; i < static_cast<int>(observations.size()); ++i) {
      if (!observations[i].held_out && observations[i].a == a) fold.indices.push_back(i);
    }
    folds->push_back(std::move(fold));
  }
}

// The folds without explicit groups or sweep roles: by L along the context sweep, by
// N_act along the scale sweep, and by A among the A != 1 runs.
std::vector<CvFold> InferredSweepFolds(const std::vector<Observation>& observations) {
  std::vector<CvFold> folds;
  const A1Coverage cover = CoverageOfA1Runs(observations);
  const std::string context_backbone = ContextSweepBackbone(cover);
  const int scale_l = ScaleSweepL(cover);
  if (!context_backbone.empty() && cover.ls_of_backbone.at(context_backbone).size() >= 2) {
    for (int l : cover.ls_of_backbone.at(context_backbone)) {
      folds.push_back(A1Fold(observations, absl::StrCat("L=", l), l, context_backbone));
    }
  }
  if (scale_l != 0 && cover.backbones_of_l.at(scale_l).size() >= 2) {
    for (const std::string& backbone : cover.backbones_of_l.at(scale_l)) {
      folds.push_back(A1Fold(observations, absl::StrCat("N_act=", backbone), scale_l, backbone));
    }
  }
  AddAnchorFolds(observations, &folds);
  return folds;
}

std::vector<Observation> FittedRows(const std::vector<Observation>& observations) {
  std::vector<Observation> fitted;
  for (const Observation& o : observations) {
    if (!o.held_out) fitted.push_back(o);
  }
  return fitted;
}

// Refit i of `samples` on a resample of `fitted` drawn with seed options.search.seed + 1 + i,
// spread over `threads` threads; those not run before a cancel stay UNKNOWN.
std::vector<absl::StatusOr<FitResult>> RefitResamples(const std::vector<Observation>& fitted,
                                                      int samples, int threads,
                                                      const FitOptions& options) {
  std::vector<absl::StatusOr<FitResult>> results(samples, absl::UnknownError("not run"));
  auto worker = [&](int first) {
    for (int i = first; i < samples && !Cancelled(options.search); i += std::max(threads, 1)) {
      FitOptions opt = options;
      opt.search.seed = options.search.seed + 1 + static_cast<uint64_t>(i);
      std::mt19937_64 rng(opt.search.seed);
      std::uniform_int_distribution<size_t> pick(0, fitted.size() - 1);
      std::vector<Observation> resample;
      resample.reserve(fitted.size());
      for (size_t j = 0; j < fitted.size(); ++j) resample.push_back(fitted[pick(rng)]);
      results[i] = FitTwoStage(resample, opt);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (std::thread& t : pool) t.join();
  return results;
}

BootstrapResult CollectDraws(const std::vector<absl::StatusOr<FitResult>>& results) {
  BootstrapResult out;
  for (const absl::StatusOr<FitResult>& r : results) {
    if (r.ok()) {
      out.draws.push_back(r->params);
    } else {
      ++out.failures;
    }
  }
  out.samples = static_cast<int>(out.draws.size());
  return out;
}

std::string FirstFailure(const std::vector<absl::StatusOr<FitResult>>& results) {
  for (const auto& r : results) {
    if (!r.ok()) return std::string(r.status().message());
  }
  return std::string();
}

void SetQuantiles(BootstrapResult* out) {
  for (int p = 0; p < kAllParamCount; ++p) {
    std::vector<double> v;
    for (const LawParams& d : out->draws) v.push_back(ParamAt(d, p));
    ParamAt(out->low, p) = Quantile(v, 0.025);
    ParamAt(out->high, p) = Quantile(v, 0.975);
  }
}

}  // namespace

std::vector<CvFold> MakeCvFolds(const std::vector<Observation>& observations) {
  if (HasExplicitGroups(observations)) return ExplicitGroupFolds(observations);
  if (UsesSweepRoles(observations)) return SweepFolds(observations);
  return InferredSweepFolds(observations);
}

absl::StatusOr<std::vector<GroupError>> CrossValidate(const std::vector<Observation>& observations,
                                                      const std::vector<CvFold>& folds,
                                                      const FitOptions& options,
                                                      const FitResult* full_fit) {
  if (folds.empty()) {
    return absl::FailedPreconditionError(
        "cross-validation: no held-out groups (need two or more values of L, N_act or A != 1)");
  }
  std::vector<GroupError> out;
  for (const CvFold& fold : folds) {
    std::vector<Observation> train = observations;
    std::vector<Observation> test;
    for (int i : fold.indices) {
      train[i].held_out = true;
      test.push_back(observations[i]);
    }
    for (int i : fold.excluded) train[i].held_out = true;
    GroupError ge;
    ge.group = fold.group;
    ge.n = static_cast<int>(test.size());
    FitOptions fold_options = options;
    if (fold.stage2_only && full_fit != nullptr) fold_options.fixed_stage1 = &full_fit->params;
    absl::StatusOr<FitResult> fit = FitTwoStage(train, fold_options);
    if (absl::IsCancelled(fit.status())) return fit.status();
    if (!fit.ok()) {
      ge.error = absl::StrCat("refit without ", fold.group, ": ", fit.status().message());
    } else {
      ge.rmse = EvaluateFit(*fit, test).rmse;
      ge.indices = fold.indices;
      for (int i : fold.indices) ge.predicted_delta.push_back(FittedDelta(*fit, observations[i]));
    }
    out.push_back(std::move(ge));
  }
  return out;
}

absl::StatusOr<BootstrapResult> Bootstrap(const std::vector<Observation>& observations, int samples,
                                          int threads, const FitOptions& options) {
  const std::vector<Observation> fitted = FittedRows(observations);
  if (samples < 1 || fitted.empty()) {
    return absl::InvalidArgumentError("bootstrap: needs samples >= 1 and fitted observations");
  }
  const std::vector<absl::StatusOr<FitResult>> results =
      RefitResamples(fitted, samples, threads, options);
  if (Cancelled(options.search)) return absl::CancelledError("bootstrap cancelled");

  BootstrapResult out = CollectDraws(results);
  if (out.samples * 2 < samples) {
    return absl::FailedPreconditionError(
        absl::StrCat("bootstrap: ", out.failures, " of ", samples,
                     " refits failed, e.g.: ", FirstFailure(results)));
  }
  SetQuantiles(&out);
  return out;
}

std::pair<double, double> DeltaInterval(const BootstrapResult& bootstrap, const LawPoint& x) {
  if (bootstrap.draws.empty()) return {0.0, 0.0};
  std::vector<double> v;
  for (const LawParams& d : bootstrap.draws) v.push_back(PredictDelta(d, x));
  return {Quantile(v, 0.025), Quantile(v, 0.975)};
}

}  // namespace xmod::fitter
