// Δ observations from run curves or given values. See observations.h.
#include "fitter/observations.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fitter/law_backbones.h"

namespace xmod::fitter {

const char* SweepRoleName(SweepRole role) {
  switch (role) {
    case SweepRole::kKxl:
      return "kxl";
    case SweepRole::kNact:
      return "nact";
    case SweepRole::kAxk:
      return "axk";
  }
  return "?";
}

std::optional<SweepRole> SweepRoleOfLabel(absl::string_view label) {
  for (SweepRole role : {SweepRole::kKxl, SweepRole::kNact, SweepRole::kAxk}) {
    const absl::string_view name = SweepRoleName(role);
    if (label == name || absl::StartsWith(label, absl::StrCat(name, "-"))) return role;
  }
  return std::nullopt;
}

std::vector<SweepRole> SweepRolesOfLabels(absl::string_view labels) {
  std::vector<SweepRole> roles;
  for (absl::string_view label : absl::StrSplit(labels, '+')) {
    std::optional<SweepRole> role = SweepRoleOfLabel(label);
    if (role && std::find(roles.begin(), roles.end(), *role) == roles.end()) roles.push_back(*role);
  }
  return roles;
}

bool Observation::InSweep(SweepRole role) const {
  for (SweepRole r : sweeps) {
    if (r == role) return true;
  }
  return false;
}

bool IsDenseReference(const RunCurve& run) {
  return run.arch == xmod::v1::DENSE || (run.arch == xmod::v1::XMOD && run.k == 1);
}

bool IsObservation(const RunCurve& run) { return run.arch == xmod::v1::XMOD && run.k >= 2; }

int DropSparseWithoutDense(std::vector<RunCurve>* runs) {
  std::set<std::pair<int, std::string>> dense;
  for (const RunCurve& run : *runs) {
    if (IsDenseReference(run)) dense.insert({run.seq_len, run.backbone});
  }
  const size_t before = runs->size();
  runs->erase(
      std::remove_if(runs->begin(), runs->end(),
                     [&](const RunCurve& run) {
                       return IsObservation(run) && dense.count({run.seq_len, run.backbone}) == 0;
                     }),
      runs->end());
  return static_cast<int>(before - runs->size());
}

namespace {

std::string RunLabel(const RunCurve& run) {
  return absl::StrCat("run '", run.name, "' (", DenseGroupName(run.seq_len, run.backbone),
                      " K=", run.k, " A=", run.a, ")");
}

absl::Status CheckFinite(const RunCurve& run) {
  if (run.points.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(RunLabel(run), ": no validation losses"));
  }
  for (const CurvePoint& p : run.points) {
    if (!std::isfinite(p.loss) || !std::isfinite(p.flops)) {
      return absl::InvalidArgumentError(absl::StrCat(RunLabel(run), ": non-finite value (loss ",
                                                     p.loss, " at flops ", p.flops, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LossCurve> DenseCurveOf(const RunCurve& run) {
  if (absl::Status s = CheckFinite(run); !s.ok()) return s;
  return LossCurve::Create(run.points, absl::StrCat("dense ", RunLabel(run)));
}

// The dense loss at C as the mean over the replicates of `closest` (the dense curve chosen
// for C): the curves of the group that cover C and end within the end tolerance of where
// `closest` ends, i.e. the same budget trained from other seeds (GridSpec.seeds).
absl::StatusOr<double> ReplicateMeanLossAt(const std::vector<LossCurve>& group,
                                           const LossCurve& closest, double c,
                                           const ObservationOptions& options) {
  double sum = 0;
  int n = 0;
  for (const LossCurve& d : group) {
    if (c < d.min_flops() || c > d.max_flops()) continue;
    if (std::abs(d.max_flops() - closest.max_flops()) >
        options.end_tolerance * closest.max_flops()) {
      continue;
    }
    absl::StatusOr<double> loss = d.LossAt(c);
    if (!loss.ok()) return loss.status();
    sum += *loss;
    ++n;
  }
  if (n == 0) return closest.LossAt(c);  // unreachable: `closest` covers C itself
  return sum / n;
}

}  // namespace

std::string DenseGroupName(int seq_len, const std::string& backbone) {
  return absl::StrCat("L=", seq_len, " backbone=", backbone);
}

std::string Observation::Describe() const {
  return absl::StrCat("L=", seq_len, " backbone=", backbone, " K=", k, " A=", a, " (", name, ")");
}

absl::StatusOr<Observation> MakeDeltaObservation(std::string name, const std::string& backbone,
                                                 int seq_len, int k, double a, double delta,
                                                 int n0) {
  Observation obs;
  obs.name = std::move(name);
  obs.backbone = backbone;
  obs.seq_len = seq_len;
  obs.k = k;
  obs.a = a;
  obs.n0 = n0;
  obs.delta = delta;
  if (!std::isfinite(delta)) {
    return absl::InvalidArgumentError(absl::StrCat(obs.Describe(), ": delta is not finite"));
  }
  if (k < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(obs.Describe(), ": K must be >= 2 (K = 1 is the dense reference)"));
  }
  if (!(a > 0) || !std::isfinite(a)) {
    return absl::InvalidArgumentError(absl::StrCat(obs.Describe(), ": A must be > 0"));
  }
  if (seq_len < k) {
    return absl::InvalidArgumentError(absl::StrCat(obs.Describe(), ": L must be >= K"));
  }
  absl::StatusOr<double> n_act = NominalActiveParams(backbone);
  if (!n_act.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(obs.Describe(), ": ", n_act.status().message()));
  }
  absl::StatusOr<double> ratio = CapacityRatio(backbone, k, a, seq_len, n0);
  if (!ratio.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(obs.Describe(), ": ", ratio.status().message()));
  }
  absl::StatusOr<TokenExposure> exposure = ExposureOf(backbone, k, a, seq_len, n0);
  if (!exposure.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(obs.Describe(), ": ", exposure.status().message()));
  }
  obs.n_act = *n_act;
  obs.capacity_ratio = *ratio;
  obs.exposure = exposure->ratio;
  obs.dense_tokens_per_flop = exposure->dense_tokens_per_flop;
  return obs;
}

absl::StatusOr<std::map<std::string, LossCurve>> DenseCurves(const std::vector<RunCurve>& runs) {
  std::map<std::string, LossCurve> out;
  for (const RunCurve& run : runs) {
    if (!IsDenseReference(run)) continue;
    absl::StatusOr<LossCurve> curve = DenseCurveOf(run);
    if (!curve.ok()) return curve.status();
    const std::string group = DenseGroupName(run.seq_len, run.backbone);
    auto it = out.find(group);
    if (it == out.end()) {
      out.emplace(group, *std::move(curve));
    } else if (curve->max_flops() > it->second.max_flops()) {
      it->second = *std::move(curve);
    }
  }
  return out;
}

namespace {

// Dense references by (L, backbone).
using DenseReferences = std::map<std::pair<int, std::string>, std::vector<LossCurve>>;

absl::StatusOr<DenseReferences> DenseReferencesOf(const std::vector<RunCurve>& runs) {
  DenseReferences dense;
  for (const RunCurve& run : runs) {
    if (!IsDenseReference(run)) continue;
    absl::StatusOr<LossCurve> curve = DenseCurveOf(run);
    if (!curve.ok()) return curve.status();
    dense[{run.seq_len, run.backbone}].push_back(*std::move(curve));
  }
  return dense;
}

struct DenseChoice {
  const LossCurve* ref = nullptr;
  double c = 0;  // where Δ is measured: the sparse end, or the reference's end within tolerance
};

// The dense curve that covers C; among several, the one ending closest after C.
DenseChoice ChooseDenseReference(const std::vector<LossCurve>& curves, double c_end,
                                 const ObservationOptions& options) {
  DenseChoice choice{nullptr, c_end};
  for (const LossCurve& d : curves) {
    double c_here = c_end;
    if (c_here > d.max_flops() && c_here <= d.max_flops() * (1 + options.end_tolerance)) {
      c_here = d.max_flops();
    }
    if (c_here < d.min_flops() || c_here > d.max_flops()) continue;
    if (choice.ref == nullptr || d.max_flops() < choice.ref->max_flops()) {
      choice.ref = &d;
      choice.c = c_here;
    }
  }
  return choice;
}

struct DeltaAt {
  double c = 0;
  double sparse_loss = 0;
  double dense_loss = 0;
};

absl::StatusOr<DeltaAt> MeasureDelta(const RunCurve& run, const LossCurve& sparse,
                                     const std::vector<LossCurve>& curves,
                                     const ObservationOptions& options) {
  const double c_end = sparse.max_flops();
  const DenseChoice choice = ChooseDenseReference(curves, c_end, options);
  if (choice.ref == nullptr) {
    const LossCurve& d = curves.front();
    return absl::InvalidArgumentError(absl::StrCat(
        "group ", DenseGroupName(run.seq_len, run.backbone), ": sparse ", RunLabel(run),
        " ends at flops ", c_end, ", outside every dense reference's range (first: [",
        d.min_flops(), ", ", d.max_flops(), "]); not extrapolating"));
  }
  absl::StatusOr<double> sparse_loss = sparse.LossAt(choice.c);
  if (!sparse_loss.ok()) return sparse_loss.status();
  absl::StatusOr<double> dense_loss = ReplicateMeanLossAt(curves, *choice.ref, choice.c, options);
  if (!dense_loss.ok()) return dense_loss.status();
  return DeltaAt{choice.c, *sparse_loss, *dense_loss};
}

absl::StatusOr<Observation> RunObservation(const RunCurve& run, const DenseReferences& dense,
                                           const ObservationOptions& options) {
  if (absl::Status s = CheckFinite(run); !s.ok()) return s;
  absl::StatusOr<LossCurve> sparse = LossCurve::Create(run.points, RunLabel(run));
  if (!sparse.ok()) return sparse.status();
  auto it = dense.find({run.seq_len, run.backbone});
  if (it == dense.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("group ", DenseGroupName(run.seq_len, run.backbone), ": sparse ",
                     RunLabel(run), " has no dense reference run"));
  }
  absl::StatusOr<DeltaAt> delta = MeasureDelta(run, *sparse, it->second, options);
  if (!delta.ok()) return delta.status();
  absl::StatusOr<Observation> obs =
      MakeDeltaObservation(run.name, run.backbone, run.seq_len, run.k, run.a,
                           delta->sparse_loss - delta->dense_loss, run.n0);
  if (!obs.ok()) return obs.status();
  obs->run_id = run.run_id;
  obs->flops = delta->c;
  obs->dense_loss = delta->dense_loss;
  obs->held_out = run.held_out;
  obs->sweeps = SweepRolesOfLabels(run.label);
  obs->flop_budget = run.flop_budget;
  obs->seed = run.seed;
  return obs;
}

}  // namespace

absl::StatusOr<std::vector<Observation>> BuildRunObservations(const std::vector<RunCurve>& runs,
                                                              const ObservationOptions& options) {
  absl::StatusOr<DenseReferences> dense = DenseReferencesOf(runs);
  if (!dense.ok()) return dense.status();
  std::vector<Observation> out;
  for (const RunCurve& run : runs) {
    if (!IsObservation(run)) continue;
    absl::StatusOr<Observation> obs = RunObservation(run, *dense, options);
    if (!obs.ok()) return obs.status();
    out.push_back(*std::move(obs));
  }
  return out;
}

std::vector<Observation> AverageReplicates(std::vector<Observation> observations) {
  using Key = std::tuple<std::string, int, int, double, int, bool, std::vector<SweepRole>>;
  std::map<Key, size_t> first;  // configuration -> index in `out`
  std::vector<Observation> out;
  for (Observation& obs : observations) {
    const Key key{obs.backbone, obs.seq_len, obs.k, obs.a, obs.n0, obs.held_out, obs.sweeps};
    auto [it, inserted] = first.emplace(key, out.size());
    if (inserted) {
      out.push_back(std::move(obs));
      continue;
    }
    // Running means, weighted by the replicates each side already holds.
    Observation& mean = out[it->second];
    const double n = mean.replicates;
    const double m = obs.replicates;
    const auto merge = [&](double& into, double value) { into = (into * n + value * m) / (n + m); };
    merge(mean.delta, obs.delta);
    merge(mean.flops, obs.flops);
    merge(mean.dense_loss, obs.dense_loss);
    mean.replicates += obs.replicates;
  }
  return out;
}

}  // namespace xmod::fitter
