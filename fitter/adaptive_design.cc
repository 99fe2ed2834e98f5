// Seed design, value-of-information proposals and the stopping rule. See adaptive_design.h.
#include "fitter/adaptive_design.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/field_path.h"
#include "fitter/law_backbones.h"
#include "fitter/design_evidence.h"

namespace xmod::fitter {
namespace {

constexpr int kLazyRevalue = 64;  // candidates re-valued after each greedy pick
constexpr double kFlopUnit = 1e18;
// A dense run covers a sparse run's budget up to this relative shortfall (runs end at the
// first step past their budget; ObservationOptions::end_tolerance).
constexpr double kDenseSlack = 0.02;

using DenseKey = std::pair<std::string, int>;  // (backbone, L)

// The largest dense budget available at each (backbone, L).
class DenseCoverage {
 public:
  void Add(const std::string& backbone, int seq_len, double flops) {
    double& f = max_flops_[{backbone, seq_len}];
    f = std::max(f, flops);
  }
  bool Covers(const Candidate& c) const {
    auto it = max_flops_.find({c.backbone, c.seq_len});
    return it != max_flops_.end() && it->second >= c.flops * (1 - kDenseSlack);
  }

 private:
  std::map<DenseKey, double> max_flops_;
};

DenseCoverage CoverageOf(const DesignState& state) {
  DenseCoverage dense;
  for (const Candidate& c : state.dense_done) dense.Add(c.backbone, c.seq_len, c.flops);
  // A run in flight has its dense reference done or queued with it; a completed observation
  // had one.
  for (const Candidate& c : state.in_flight) dense.Add(c.backbone, c.seq_len, c.flops);
  for (const Observation& o : state.completed) dense.Add(o.backbone, o.seq_len, o.flops);
  return dense;
}

bool SameRun(const Candidate& x, const Candidate& y) {
  return x.backbone == y.backbone && x.seq_len == y.seq_len && x.k == y.k && x.a == y.a &&
         x.flops == y.flops;
}

// The law point of a sparse run; false when its layer plan cannot be built.
bool PointOf(const Candidate& c, LawPoint* point) {
  absl::StatusOr<Observation> o =
      MakeDeltaObservation(c.Describe(), c.backbone, c.seq_len, c.k, c.a, 0.0);
  if (!o.ok()) return false;
  *point = o->point();
  return true;
}

template <typename T>
T MostFrequent(const std::vector<T>& values, const std::vector<T>& allowed) {
  std::map<T, int> count;
  for (const T& v : values) {
    if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) ++count[v];
  }
  T best{};
  int best_count = 0;
  for (const auto& [v, n] : count) {
    if (n >= best_count) {  // ties: the later (larger) value
      best = v;
      best_count = n;
    }
  }
  return best;
}

// The uncertainty of the answers as a function of member weights, and the value of runs.
class ValueModel {
 public:
  // deltas[t][m][o] for every target; contenders per target are the options some member
  // ranks first plus the 3 best on average.
  ValueModel(const std::vector<std::vector<std::vector<double>>>& deltas, double noise_sd)
      : inv_4s2_(1.0 / (4 * noise_sd * noise_sd)) {
    members_ = deltas.empty() ? 0 : static_cast<int>(deltas[0].size());
    for (const auto& d : deltas) {
      const size_t n_options = d[0].size();
      std::vector<double> mean(n_options, 0.0);
      std::set<size_t> contenders;
      for (const auto& row : d) {
        contenders.insert(std::min_element(row.begin(), row.end()) - row.begin());
        for (size_t o = 0; o < n_options; ++o) mean[o] += row[o];
      }
      std::vector<size_t> order(n_options);
      for (size_t o = 0; o < n_options; ++o) order[o] = o;
      std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return mean[x] < mean[y]; });
      for (size_t i = 0; i < std::min<size_t>(3, n_options); ++i) contenders.insert(order[i]);
      TargetTable table;
      for (const auto& row : d) {
        std::vector<double> kept;
        for (size_t o : contenders) kept.push_back(row[o]);
        table.deltas.push_back(std::move(kept));
        table.best.push_back(*std::min_element(row.begin(), row.end()));
      }
      targets_.push_back(std::move(table));
    }
    log_weights_.assign(members_, std::vector<double>(members_, 0.0));
  }

  // Conditions every hypothetical truth on the outcome of a run with these member predictions.
  void Condition(const std::vector<double>& predictions) {
    for (int j = 0; j < members_; ++j) {
      for (int m = 0; m < members_; ++m) {
        const double d = predictions[j] - predictions[m];
        log_weights_[j][m] -= d * d * inv_4s2_;
      }
    }
  }

  // Mean over hypothetical truths j of each target's expected regret after the runs
  // conditioned on so far and, when `predictions` is non-null, one more.
  std::vector<double> ExpectedRegrets(const std::vector<double>* predictions) const {
    std::vector<double> out(targets_.size(), 0.0);
    std::vector<double> w(members_);
    for (int j = 0; j < members_; ++j) {
      double top = -INFINITY;
      for (int m = 0; m < members_; ++m) {
        double lw = log_weights_[j][m];
        if (predictions != nullptr) {
          const double d = (*predictions)[j] - (*predictions)[m];
          lw -= d * d * inv_4s2_;
        }
        w[m] = lw;
        top = std::max(top, lw);
      }
      double sum = 0;
      for (int m = 0; m < members_; ++m) sum += (w[m] = std::exp(w[m] - top));
      for (int m = 0; m < members_; ++m) w[m] /= sum;
      for (size_t t = 0; t < targets_.size(); ++t) {
        const TargetTable& table = targets_[t];
        const size_t n_kept = table.deltas[0].size();
        double best_choice = INFINITY, mean_best = 0;
        for (size_t i = 0; i < n_kept; ++i) {
          double v = 0;
          for (int m = 0; m < members_; ++m) v += w[m] * table.deltas[m][i];
          best_choice = std::min(best_choice, v);
        }
        for (int m = 0; m < members_; ++m) mean_best += w[m] * table.best[m];
        out[t] += std::max(0.0, best_choice - mean_best) / members_;
      }
    }
    return out;
  }

 private:
  struct TargetTable {
    std::vector<std::vector<double>> deltas;  // [member][contender]
    std::vector<double> best;                 // [member] min over all options
  };
  double inv_4s2_;
  int members_ = 0;
  std::vector<TargetTable> targets_;
  std::vector<std::vector<double>> log_weights_;  // [truth j][member m]
};

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

double StdDev(const std::vector<double>& v) {
  double mean = Sum(v) / v.size(), var = 0;
  for (double x : v) var += (x - mean) * (x - mean);
  return std::sqrt(var / v.size());
}

struct Scored {
  size_t index = 0;  // into the candidate list
  double value = 0;
  double cost = 0;
  bool needs_dense = false;
  double spread = 0;  // members' sd of Δ at the candidate
  double Key() const { return value / cost; }
  double TieKey() const { return spread / cost; }
};

bool Better(const Scored& x, const Scored& y) {
  if (x.Key() != y.Key()) return x.Key() > y.Key();
  if (x.TieKey() != y.TieKey()) return x.TieKey() > y.TieKey();
  return x.index < y.index;
}

std::string Reason(const Scored& s, const std::vector<double>& before,
                   const std::vector<double>& after, const std::vector<TargetAnswer>& answers,
                   double noise_sd) {
  size_t most = 0;
  for (size_t t = 0; t < before.size(); ++t) {
    if (before[t] - after[t] > before[most] - after[most]) most = t;
  }
  const std::string cost = absl::StrFormat("%.3g FLOPs%s", s.cost * kFlopUnit,
                                           s.needs_dense ? " incl. its dense reference" : "");
  if (s.value <= 0) {
    return absl::StrFormat(
        "no target's answer hinges on this run under the current ensemble; members' Δ sd "
        "%.2g here (noise %.2g); ranked by disagreement per FLOP; %s",
        s.spread, noise_sd, cost);
  }
  const TargetAnswer& a = answers[most];
  return absl::StrFormat(
      "decides %s: K*=%d A*=%g has p_best %.2f, expected regret %.2g; members' Δ sd %.2g here "
      "(noise %.2g); expected regret reduction %.2g nats over all targets for %s",
      a.target.Describe(), a.k, a.a, a.p_best, a.expected_regret, s.spread, noise_sd, s.value,
      cost);
}

// A check of one AdaptiveConfig field: `ok`, or `message` names what is wrong.
struct FieldCheck {
  const char* field;
  bool ok;
  const char* message;
};

absl::Status FirstInvalid(std::initializer_list<FieldCheck> checks) {
  for (const FieldCheck& c : checks) {
    if (!c.ok) return InvalidField(c.field, c.message);
  }
  return absl::OkStatus();
}

// Every K, A, L, budget and backbone of the candidate space.
absl::Status ValidateCandidateAxes(const AdaptiveConfig& config) {
  for (int k : config.ks) {
    if (k < 1) return InvalidField("ks", absl::StrCat("K must be >= 1, got ", k));
  }
  for (double a : config.as) {
    if (!(a > 0)) return InvalidField("as", absl::StrCat("A must be > 0, got ", a));
  }
  for (int l : config.seq_lens) {
    if (l < 1) return InvalidField("seq_lens", absl::StrCat("L must be >= 1, got ", l));
  }
  for (double f : config.flop_budgets) {
    if (!(f > 0)) return InvalidField("flop_budgets", absl::StrCat("must be > 0, got ", f));
  }
  for (const std::string& b : config.backbones) {
    if (absl::StatusOr<double> n = NominalActiveParams(b); !n.ok()) {
      return InvalidField("backbones", absl::StrCat(b, ": ", n.status().message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTargets(const std::vector<Target>& targets) {
  for (const Target& t : targets) {
    if (!(t.flops > 0) || t.seq_len < 1 || t.backbone.empty()) {
      return InvalidField(
          "targets", absl::StrCat(t.Describe(), " needs flops > 0, seq_len >= 1 and a backbone"));
    }
  }
  return absl::OkStatus();
}

template <typename T>
std::vector<T> SortedUnique(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// Where the seed design centres: the targets' most frequent backbone and L, the budget
// nearest their median, and the sparse K range.
struct SeedCentre {
  std::vector<std::pair<double, std::string>> sized;  // backbones by nominal size
  std::vector<int> lens;                              // sorted, unique
  std::vector<int> ks;                                // sparse (>= 2), sorted, unique
  std::string backbone;
  int len = 0;
  double budget = 0;
  int k_lo = 0, k_mid = 0, k_hi = 0;
};

// The configured budget nearest (in log) the targets' median budget.
double BudgetNearTargets(const AdaptiveConfig& config) {
  std::vector<double> target_flops;
  for (const Target& t : config.targets) target_flops.push_back(t.flops);
  std::sort(target_flops.begin(), target_flops.end());
  const double median_flops = target_flops[target_flops.size() / 2];
  double budget = config.flop_budgets.front();
  for (double f : config.flop_budgets) {
    if (std::fabs(std::log(f / median_flops)) < std::fabs(std::log(budget / median_flops))) {
      budget = f;
    }
  }
  return budget;
}

// The K nearest (in log) the middle of [k_lo, k_hi].
int MidK(const std::vector<int>& ks) {
  const int k_lo = ks.front(), k_hi = ks.back();
  int k_mid = k_lo;
  const double log_mid = 0.5 * (std::log(k_lo) + std::log(k_hi));
  for (int k : ks) {
    if (std::fabs(std::log(k) - log_mid) < std::fabs(std::log(k_mid) - log_mid)) k_mid = k;
  }
  return k_mid;
}

absl::StatusOr<SeedCentre> CentreOf(const AdaptiveConfig& config) {
  SeedCentre c;
  // Backbones by nominal size.
  for (const std::string& b : config.backbones) c.sized.push_back({*NominalActiveParams(b), b});
  std::sort(c.sized.begin(), c.sized.end());
  std::vector<std::string> target_backbones;
  std::vector<int> target_lens;
  for (const Target& t : config.targets) {
    target_backbones.push_back(t.backbone);
    target_lens.push_back(t.seq_len);
  }
  c.backbone = MostFrequent(target_backbones, config.backbones);
  if (c.backbone.empty()) c.backbone = c.sized[c.sized.size() / 2].second;
  c.lens = SortedUnique(config.seq_lens);
  c.len = MostFrequent(target_lens, c.lens);
  if (c.len == 0) c.len = c.lens.back();
  c.budget = BudgetNearTargets(config);
  for (int k : config.ks) {
    if (k >= 2) c.ks.push_back(k);
  }
  c.ks = SortedUnique(std::move(c.ks));
  if (c.ks.empty()) return InvalidField("ks", "no sparse K (>= 2) to run");
  c.k_lo = c.ks.front();
  c.k_hi = c.ks.back();
  c.k_mid = MidK(c.ks);
  return c;
}

// The seed design's sparse runs at one budget, in the order added, without repeats.
class SparseSeed {
 public:
  explicit SparseSeed(double budget) : budget_(budget) {}

  // Adds the run unless it is there already; false when its layer plan cannot be built.
  bool Add(const std::string& backbone, int seq_len, int k, double a) {
    Candidate c{backbone, seq_len, k, a, budget_};
    LawPoint point;
    if (!PointOf(c, &point)) return false;
    for (const Candidate& s : runs_) {
      if (SameRun(s, c)) return true;
    }
    runs_.push_back(c);
    return true;
  }

  const std::vector<Candidate>& runs() const { return runs_; }

 private:
  double budget_;
  std::vector<Candidate> runs_;
};

// The centre backbone at the shortest, middle, longest and centre L, each at K lo, mid and hi.
void AddLengthLevels(const SeedCentre& c, SparseSeed* sparse) {
  std::set<int> len_levels = {c.lens.front(), c.lens[c.lens.size() / 2], c.lens.back(), c.len};
  for (int l : len_levels) {
    for (int k : {c.k_lo, c.k_mid, c.k_hi}) sparse->Add(c.backbone, l, k, 1.0);
  }
}

// The smallest and the largest other backbone at the centre L, each at K lo and hi.
void AddOtherBackbones(const SeedCentre& c, SparseSeed* sparse) {
  std::set<std::string> others;
  for (const auto& [size, b] : c.sized) {
    if (b != c.backbone) {
      others.insert(b);
      break;
    }
  }
  for (auto it = c.sized.rbegin(); it != c.sized.rend(); ++it) {
    if (it->second != c.backbone) {
      others.insert(it->second);
      break;
    }
  }
  for (const std::string& b : others) {
    for (int k : {c.k_lo, c.k_hi}) sparse->Add(b, c.len, k, 1.0);
  }
}

// The smallest and the largest anchor stride A != 1 at the centre, each near K mid and hi.
void AddAnchorStrides(const AdaptiveConfig& config, const SeedCentre& c, SparseSeed* sparse) {
  std::vector<double> anchors;
  for (double a : config.as) {
    if (a != 1.0) anchors.push_back(a);
  }
  std::sort(anchors.begin(), anchors.end());
  if (anchors.empty()) return;
  for (double a : std::set<double>{anchors.front(), anchors.back()}) {
    for (int wanted : {c.k_mid, c.k_hi}) {
      // The admissible K nearest to the wanted one, preferring larger.
      std::vector<int> order = c.ks;
      std::stable_sort(order.begin(), order.end(), [wanted](int x, int y) {
        return std::abs(x - wanted) < std::abs(y - wanted) ||
               (std::abs(x - wanted) == std::abs(y - wanted) && x > y);
      });
      for (int k : order) {
        if (sparse->Add(c.backbone, c.len, k, a)) break;
      }
    }
  }
}

// The sparse runs preceded by the dense reference of each of their (backbone, L).
std::vector<Candidate> WithDenseReferences(const std::vector<Candidate>& sparse, double budget) {
  std::vector<Candidate> out;
  std::set<DenseKey> dense;
  for (const Candidate& c : sparse) {
    if (dense.insert({c.backbone, c.seq_len}).second) {
      out.push_back({c.backbone, c.seq_len, 1, 1.0, budget});
    }
  }
  out.insert(out.end(), sparse.begin(), sparse.end());
  return out;
}

}  // namespace

std::string Candidate::Describe() const {
  if (IsDense()) return absl::StrFormat("dense %s L=%d C=%g", backbone, seq_len, flops);
  return absl::StrFormat("%s L=%d K=%d A=%g C=%g", backbone, seq_len, k, a, flops);
}

double ExpectedRegretReduction(const std::vector<std::vector<std::vector<double>>>& deltas,
                               const std::vector<double>& run, double noise_sd) {
  ValueModel model(deltas, noise_sd);
  return std::max(0.0, Sum(model.ExpectedRegrets(nullptr)) - Sum(model.ExpectedRegrets(&run)));
}

absl::Status ValidateConfig(const AdaptiveConfig& config) {
  if (absl::Status s = FirstInvalid({
          {"targets", !config.targets.empty(), "at least one target is needed"},
          {"ks", !config.ks.empty(), "empty"},
          {"as", !config.as.empty(), "empty"},
          {"seq_lens", !config.seq_lens.empty(), "empty"},
          {"backbones", !config.backbones.empty(), "empty"},
          {"flop_budgets", !config.flop_budgets.empty(), "empty"},
      });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidateCandidateAxes(config); !s.ok()) return s;
  if (absl::Status s = ValidateTargets(config.targets); !s.ok()) return s;
  return FirstInvalid({
      {"compute_budget", config.compute_budget > 0, "must be > 0"},
      {"tolerance", config.tolerance >= 0, "must be >= 0"},
      {"confidence", config.confidence > 0 && config.confidence < 1, "must be in (0, 1)"},
      {"consistency_z", config.consistency_z > 0, "must be > 0"},
      {"stable_decisions", config.stable_decisions >= 1, "must be >= 1"},
      {"bootstrap_samples", config.bootstrap_samples >= 2, "must be >= 2"},
      {"max_proposals", config.max_proposals >= 1, "must be >= 1"},
      {"noise_floor", config.noise_floor > 0, "must be > 0"},
  });
}

absl::StatusOr<std::vector<Candidate>> SeedDesign(const AdaptiveConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  absl::StatusOr<SeedCentre> centre = CentreOf(config);
  if (!centre.ok()) return centre.status();
  SparseSeed sparse(centre->budget);
  AddLengthLevels(*centre, &sparse);
  AddOtherBackbones(*centre, &sparse);
  AddAnchorStrides(config, *centre, &sparse);
  return WithDenseReferences(sparse.runs(), centre->budget);
}

namespace {

// Before a fit: the seed runs neither done nor in flight.
Decision SeedDecision(const AdaptiveConfig& config, const DesignState& state,
                      const std::vector<Candidate>& seed, const std::string& fit_error) {
  Decision d;
  d.fit_error = fit_error;
  const DenseCoverage dense = CoverageOf(state);
  double left = config.compute_budget - state.compute_spent;
  for (const Candidate& c : seed) {
    bool done = false;
    if (c.IsDense()) {
      done = dense.Covers(c);
    } else {
      for (const Observation& o : state.completed) {
        done = done ||
               (o.backbone == c.backbone && o.seq_len == c.seq_len && o.k == c.k && o.a == c.a);
      }
      for (const Candidate& f : state.in_flight) done = done || SameRun(f, c);
    }
    if (done || c.flops > left) continue;
    if (static_cast<int>(d.ranked.size()) >= config.max_proposals) break;
    left -= c.flops;
    Proposal p;
    p.run = c;
    p.cost_flops = c.flops;
    p.reason = absl::StrCat("seed design: the law cannot be fitted yet (", fit_error, ")");
    d.ranked.push_back(std::move(p));
  }
  if (d.ranked.empty() && state.in_flight.empty()) {
    d.stop = true;
    d.stop_reason = absl::StrCat("no seed run is left to start and the completed runs cannot be ",
                                 "fitted: ", fit_error);
  }
  return d;
}

// "2 partial runs in the fit: 556M L=4096 K=8 A=1 at 40% of its budget, final Δ forecast
// +0.0123 ± 0.0040 (stopped early); ..."
std::string DescribePartial(const std::vector<PartialRun>& partial) {
  if (partial.empty()) return "";
  std::string out = absl::StrFormat("%d partial run%s in the fit: ", partial.size(),
                                    partial.size() == 1 ? "" : "s");
  for (size_t i = 0; i < partial.size(); ++i) {
    const PartialRun& p = partial[i];
    absl::StrAppendFormat(&out,
                          "%s%s L=%d K=%d A=%g at %.0f%% of its budget, final Δ forecast "
                          "%+.4f ± %.4f%s",
                          i == 0 ? "" : "; ", p.forecast.backbone, p.forecast.seq_len, p.forecast.k,
                          p.forecast.a, 100 * p.last_fraction, p.forecast.delta, p.forecast_sd,
                          p.stopped ? " (stopped early)" : "");
  }
  return out;
}

double LargestBound(const std::vector<TargetAnswer>& answers) {
  double most = 0;
  for (const TargetAnswer& a : answers) most = std::max(most, a.regret_bound);
  return most;
}

bool SameAnswers(const std::vector<TargetAnswer>& x, const std::vector<TargetAnswer>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].k != y[i].k || x[i].a != y[i].a) return false;
  }
  return true;
}

absl::StatusOr<std::vector<TargetOptions>> TargetOptionsOf(const AdaptiveConfig& config) {
  std::vector<TargetOptions> targets;
  for (const Target& t : config.targets) {
    absl::StatusOr<TargetOptions> options = MakeTargetOptions(t, config.ks, config.as);
    if (!options.ok()) return options.status();
    targets.push_back(*std::move(options));
  }
  return targets;
}

// The ensemble fitted on the completed runs and the partial runs' forecasts.
absl::StatusOr<LawEnsemble> FitEvidence(const AdaptiveConfig& config, const DesignState& state) {
  EnsembleOptions ensemble_options;
  ensemble_options.members = config.bootstrap_samples;
  ensemble_options.seed = config.seed;
  ensemble_options.noise_floor = config.noise_floor;
  ensemble_options.cancelled = config.cancelled;
  std::vector<Observation> evidence = state.completed;
  for (const PartialRun& p : state.partial) {
    evidence.push_back(p.forecast);
    ensemble_options.forecast_sd[p.forecast.run_id] = p.forecast_sd;
  }
  return FitEnsemble(evidence, ensemble_options);
}

// The ensemble's answer at every target with its regret bound, and the streak of unchanged
// answers; deltas[t][m][o] gets the members' Δ at every target's options.
Decision AnswerTargets(const AdaptiveConfig& config, const DesignState& state,
                       const std::vector<TargetOptions>& targets, const LawEnsemble& ensemble,
                       std::vector<std::vector<std::vector<double>>>* deltas) {
  Decision d;
  d.partial_evidence = DescribePartial(state.partial);
  d.fit = ensemble.fit.params;
  d.noise_sd = ensemble.noise_sd;
  d.ensemble_size = static_cast<int>(ensemble.members.size());
  const int members = d.ensemble_size;
  const std::vector<double> uniform(members, 1.0 / members);
  for (const TargetOptions& t : targets) {
    deltas->push_back(MemberDeltas(ensemble.members, t.points));
    d.answers.push_back(AnswerTarget(t, deltas->back(), uniform));
    TargetAnswer& answer = d.answers.back();
    for (size_t o = 0; o < t.points.size(); ++o) {
      if (t.k[o] == answer.k && t.a[o] == answer.a) {
        answer.regret_bound = RegretQuantile(deltas->back(), o, config.confidence);
      }
    }
    answer.confidence = config.confidence;
  }
  d.streak = SameAnswers(d.answers, state.previous_answers) ? state.previous_streak + 1 : 1;
  return d;
}

// The stopping rule on settled answers (stable and within tolerance): true when `d` is final,
// stopping or waiting for the runs in flight; a disagreement with the runs holds it back.
bool ApplyStopRule(const AdaptiveConfig& config, const DesignState& state,
                   const std::vector<LawParams>& members, Decision* d) {
  bool settled = d->streak >= config.stable_decisions;
  for (const TargetAnswer& a : d->answers) {
    settled = settled && a.regret_bound <= config.tolerance;
  }
  if (!settled) return false;
  if (!state.in_flight.empty()) {
    // Their compute is committed and their results will come: an answer that ignored them
    // could be overturned by the design's own runs (a seed set not yet complete leaves a
    // stage of Eq. 14 unidentified). Wait for them; propose nothing meanwhile.
    d->held_back = absl::StrFormat(
        "confident, yet not stopping: %d run%s in flight, whose evidence the answer waits for",
        state.in_flight.size(), state.in_flight.size() == 1 ? "" : "s");
    return true;
  }
  std::optional<std::string> disagreement =
      DisagreementWithRuns(state.completed, d->answers, members, d->noise_sd, config.consistency_z);
  if (disagreement) {
    d->held_back = absl::StrCat("confident, yet not stopping: ", *disagreement);
    return false;
  }
  d->stop = true;
  d->stop_reason = absl::StrFormat(
      "answers unchanged for %d decisions, every target's regret <= %g nats with "
      "confidence %g (largest bound %.2g), and the runs at the targets agree with the law",
      d->streak, config.tolerance, config.confidence, LargestBound(d->answers));
  return true;
}

std::vector<double> MemberPredictions(const std::vector<LawParams>& members,
                                      const LawPoint& point) {
  std::vector<double> p(members.size());
  for (size_t m = 0; m < members.size(); ++m) p[m] = PredictDelta(members[m], point);
  return p;
}

// The candidate space and the members' predictions there.
struct CandidateSpace {
  std::vector<Candidate> candidates;
  std::vector<std::vector<double>> predictions;  // [candidate][member]
};

bool InFlight(const DesignState& state, const Candidate& c) {
  bool queued = false;
  for (const Candidate& q : state.in_flight) queued = queued || SameRun(q, c);
  return queued;
}

CandidateSpace CandidatesOf(const AdaptiveConfig& config, const DesignState& state,
                            const std::vector<LawParams>& members) {
  CandidateSpace space;
  for (const std::string& b : config.backbones) {
    for (int l : config.seq_lens) {
      for (double f : config.flop_budgets) {
        for (int k : config.ks) {
          for (double a : config.as) {
            const Candidate c{b, l, k, a, f};
            LawPoint point;
            if (c.IsDense() || !PointOf(c, &point) || InFlight(state, c)) continue;
            space.candidates.push_back(c);
            space.predictions.push_back(MemberPredictions(members, point));
          }
        }
      }
    }
  }
  return space;
}

// Conditions the value model on the outcomes of the sparse runs in flight.
void ConditionOnInFlight(const DesignState& state, const std::vector<LawParams>& members,
                         ValueModel* model) {
  for (const Candidate& q : state.in_flight) {
    LawPoint point;
    if (q.IsDense() || !PointOf(q, &point)) continue;
    model->Condition(MemberPredictions(members, point));
  }
}

// Greedy proposals within the budget left: each pick is the best expected regret reduction
// per FLOP, after conditioning the model on the picks before it.
class ProposalRanker {
 public:
  ProposalRanker(const AdaptiveConfig& config, const DesignState& state,
                 const CandidateSpace& space, ValueModel* model)
      : config_(config),
        space_(space),
        model_(*model),
        dense_(CoverageOf(state)),
        left_(config.compute_budget - state.compute_spent),
        scored_(space.candidates.size()),
        picked_(space.candidates.size(), false),
        order_(space.candidates.size()) {}

  // Appends the proposals to d->ranked; CANCELLED once config.cancelled returned true.
  absl::Status Rank(Decision* d) {
    before_ = model_.ExpectedRegrets(nullptr);
    for (size_t i = 0; i < scored_.size(); ++i) {
      if (Cancelled()) return Stopped();
      scored_[i] = Value(i);
    }
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = i;
    while (static_cast<int>(d->ranked.size()) < config_.max_proposals) {
      if (!d->ranked.empty()) {
        if (absl::Status s = Revalue(); !s.ok()) return s;
      }
      const size_t best = BestAffordable();
      if (best == order_.size()) break;
      Pick(best, d);
    }
    return absl::OkStatus();
  }

 private:
  bool Cancelled() const { return config_.cancelled && config_.cancelled(); }
  static absl::Status Stopped() { return absl::CancelledError("design decision cancelled"); }

  double CostOf(size_t i, bool* needs_dense) const {
    *needs_dense = !dense_.Covers(space_.candidates[i]);
    return space_.candidates[i].flops * (*needs_dense ? 2 : 1);
  }

  Scored Value(size_t i) const {
    Scored s;
    s.index = i;
    s.cost = CostOf(i, &s.needs_dense) / kFlopUnit;
    s.value = std::max(0.0, Sum(before_) - Sum(model_.ExpectedRegrets(&space_.predictions[i])));
    s.spread = StdDev(space_.predictions[i]);
    return s;
  }

  // Re-value the best candidates and those whose dense reference is now covered.
  absl::Status Revalue() {
    before_ = model_.ExpectedRegrets(nullptr);
    for (size_t r = 0; r < order_.size(); ++r) {
      const size_t i = order_[r];
      if (picked_[i]) continue;
      if (Cancelled()) return Stopped();
      bool needs_dense = false;
      const bool cost_changed = (CostOf(i, &needs_dense) / kFlopUnit) != scored_[i].cost;
      if (r < kLazyRevalue || cost_changed) scored_[i] = Value(i);
    }
    return absl::OkStatus();
  }

  // The best unpicked candidate within the budget left, or order_.size() when none is.
  size_t BestAffordable() {
    std::sort(order_.begin(), order_.end(), [&](size_t x, size_t y) {
      if (picked_[x] != picked_[y]) return !picked_[x];
      return Better(scored_[x], scored_[y]);
    });
    for (size_t i : order_) {
      if (!picked_[i] && scored_[i].cost * kFlopUnit <= left_ * (1 + 1e-9)) return i;
    }
    return order_.size();
  }

  void Pick(size_t best, Decision* d) {
    const Scored& s = scored_[best];
    const Candidate& c = space_.candidates[best];
    picked_[best] = true;
    Proposal p;
    p.run = c;
    p.needs_dense = s.needs_dense;
    p.cost_flops = s.cost * kFlopUnit;
    p.value = s.value;
    p.score = s.Key();
    p.reason = Reason(s, before_, model_.ExpectedRegrets(&space_.predictions[best]), d->answers,
                      d->noise_sd);
    if (!d->partial_evidence.empty()) absl::StrAppend(&p.reason, "; ", d->partial_evidence);
    d->ranked.push_back(std::move(p));
    left_ -= s.cost * kFlopUnit;
    dense_.Add(c.backbone, c.seq_len, c.flops);
    model_.Condition(space_.predictions[best]);
  }

  const AdaptiveConfig& config_;
  const CandidateSpace& space_;
  ValueModel& model_;
  DenseCoverage dense_;
  double left_;
  std::vector<Scored> scored_;
  std::vector<bool> picked_;
  std::vector<size_t> order_;
  std::vector<double> before_;  // expected regrets before the next pick
};

}  // namespace

absl::StatusOr<Decision> Decide(const AdaptiveConfig& config, const DesignState& state) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  absl::StatusOr<std::vector<TargetOptions>> targets = TargetOptionsOf(config);
  if (!targets.ok()) return targets.status();
  absl::StatusOr<LawEnsemble> ensemble = FitEvidence(config, state);
  if (absl::IsCancelled(ensemble.status())) return ensemble.status();
  if (!ensemble.ok()) {
    absl::StatusOr<std::vector<Candidate>> seed = SeedDesign(config);
    if (!seed.ok()) return seed.status();
    return SeedDecision(config, state, *seed, std::string(ensemble.status().message()));
  }
  std::vector<std::vector<std::vector<double>>> deltas;  // [target][member][option]
  Decision d = AnswerTargets(config, state, *targets, *ensemble, &deltas);
  if (ApplyStopRule(config, state, ensemble->members, &d)) return d;
  const CandidateSpace space = CandidatesOf(config, state, ensemble->members);
  ValueModel model(deltas, d.noise_sd);
  ConditionOnInFlight(state, ensemble->members, &model);
  if (absl::Status s = ProposalRanker(config, state, space, &model).Rank(&d); !s.ok()) return s;
  if (d.ranked.empty() && state.in_flight.empty()) {
    d.stop = true;
    d.stop_reason = absl::StrFormat("compute budget spent: %.3g of %.3g FLOPs, no candidate fits",
                                    state.compute_spent, config.compute_budget);
  }
  return d;
}

}  // namespace xmod::fitter
