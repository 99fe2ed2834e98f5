// Seed design, value-of-information proposals and the stopping rule. See adaptive_design.h.
#include "fitter/adaptive_design.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/field_path.h"
#include "fitter/backbones.h"
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
  if (config.targets.empty()) return InvalidField("targets", "at least one target is needed");
  if (config.ks.empty()) return InvalidField("ks", "empty");
  if (config.as.empty()) return InvalidField("as", "empty");
  if (config.seq_lens.empty()) return InvalidField("seq_lens", "empty");
  if (config.backbones.empty()) return InvalidField("backbones", "empty");
  if (config.flop_budgets.empty()) return InvalidField("flop_budgets", "empty");
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
  for (const Target& t : config.targets) {
    if (!(t.flops > 0) || t.seq_len < 1 || t.backbone.empty()) {
      return InvalidField(
          "targets", absl::StrCat(t.Describe(), " needs flops > 0, seq_len >= 1 and a backbone"));
    }
  }
  if (!(config.compute_budget > 0)) return InvalidField("compute_budget", "must be > 0");
  if (!(config.tolerance >= 0)) return InvalidField("tolerance", "must be >= 0");
  if (!(config.confidence > 0 && config.confidence < 1)) {
    return InvalidField("confidence", "must be in (0, 1)");
  }
  if (!(config.consistency_z > 0)) return InvalidField("consistency_z", "must be > 0");
  if (config.stable_decisions < 1) return InvalidField("stable_decisions", "must be >= 1");
  if (config.bootstrap_samples < 2) return InvalidField("bootstrap_samples", "must be >= 2");
  if (config.max_proposals < 1) return InvalidField("max_proposals", "must be >= 1");
  if (!(config.noise_floor > 0)) return InvalidField("noise_floor", "must be > 0");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Candidate>> SeedDesign(const AdaptiveConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  // Backbones by nominal size.
  std::vector<std::pair<double, std::string>> sized;
  for (const std::string& b : config.backbones) sized.push_back({*NominalActiveParams(b), b});
  std::sort(sized.begin(), sized.end());
  std::vector<std::string> target_backbones;
  std::vector<int> target_lens;
  std::vector<double> target_flops;
  for (const Target& t : config.targets) {
    target_backbones.push_back(t.backbone);
    target_lens.push_back(t.seq_len);
    target_flops.push_back(t.flops);
  }
  std::string centre_backbone = MostFrequent(target_backbones, config.backbones);
  if (centre_backbone.empty()) centre_backbone = sized[sized.size() / 2].second;
  std::vector<int> lens = config.seq_lens;
  std::sort(lens.begin(), lens.end());
  lens.erase(std::unique(lens.begin(), lens.end()), lens.end());
  int centre_len = MostFrequent(target_lens, lens);
  if (centre_len == 0) centre_len = lens.back();
  std::sort(target_flops.begin(), target_flops.end());
  const double median_flops = target_flops[target_flops.size() / 2];
  double budget = config.flop_budgets.front();
  for (double f : config.flop_budgets) {
    if (std::fabs(std::log(f / median_flops)) < std::fabs(std::log(budget / median_flops))) {
      budget = f;
    }
  }
  std::vector<int> ks;
  for (int k : config.ks) {
    if (k >= 2) ks.push_back(k);
  }
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  if (ks.empty()) return InvalidField("ks", "no sparse K (>= 2) to run");
  const int k_lo = ks.front(), k_hi = ks.back();
  int k_mid = k_lo;
  const double log_mid = 0.5 * (std::log(k_lo) + std::log(k_hi));
  for (int k : ks) {
    if (std::fabs(std::log(k) - log_mid) < std::fabs(std::log(k_mid) - log_mid)) k_mid = k;
  }

  std::vector<Candidate> sparse;
  auto add = [&](const std::string& backbone, int seq_len, int k, double a) {
    Candidate c{backbone, seq_len, k, a, budget};
    LawPoint point;
    if (!PointOf(c, &point)) return false;
    for (const Candidate& s : sparse) {
      if (SameRun(s, c)) return true;
    }
    sparse.push_back(c);
    return true;
  };
  std::set<int> len_levels = {lens.front(), lens[lens.size() / 2], lens.back(), centre_len};
  for (int l : len_levels) {
    for (int k : {k_lo, k_mid, k_hi}) add(centre_backbone, l, k, 1.0);
  }
  std::set<std::string> others;
  for (const auto& [size, b] : sized) {
    if (b != centre_backbone) {
      others.insert(b);
      break;
    }
  }
  for (auto it = sized.rbegin(); it != sized.rend(); ++it) {
    if (it->second != centre_backbone) {
      others.insert(it->second);
      break;
    }
  }
  for (const std::string& b : others) {
    for (int k : {k_lo, k_hi}) add(b, centre_len, k, 1.0);
  }
  std::vector<double> anchors;
  for (double a : config.as) {
    if (a != 1.0) anchors.push_back(a);
  }
  std::sort(anchors.begin(), anchors.end());
  if (!anchors.empty()) {
    for (double a : std::set<double>{anchors.front(), anchors.back()}) {
      for (int wanted : {k_mid, k_hi}) {
        // The admissible K nearest to the wanted one, preferring larger.
        std::vector<int> order = ks;
        std::stable_sort(order.begin(), order.end(), [wanted](int x, int y) {
          return std::abs(x - wanted) < std::abs(y - wanted) ||
                 (std::abs(x - wanted) == std::abs(y - wanted) && x > y);
        });
        for (int k : order) {
          if (add(centre_backbone, centre_len, k, a)) break;
        }
      }
    }
  }
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

}  // namespace

absl::StatusOr<Decision> Decide(const AdaptiveConfig& config, const DesignState& state) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  std::vector<TargetOptions> targets;
  for (const Target& t : config.targets) {
    absl::StatusOr<TargetOptions> options = MakeTargetOptions(t, config.ks, config.as);
    if (!options.ok()) return options.status();
    targets.push_back(*std::move(options));
  }
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
  absl::StatusOr<LawEnsemble> ensemble = FitEnsemble(evidence, ensemble_options);
  if (absl::IsCancelled(ensemble.status())) return ensemble.status();
  if (!ensemble.ok()) {
    absl::StatusOr<std::vector<Candidate>> seed = SeedDesign(config);
    if (!seed.ok()) return seed.status();
    return SeedDecision(config, state, *seed, std::string(ensemble.status().message()));
  }

  Decision d;
  d.partial_evidence = DescribePartial(state.partial);
  d.fit = ensemble->fit.params;
  d.noise_sd = ensemble->noise_sd;
  d.ensemble_size = static_cast<int>(ensemble->members.size());
  const int members = d.ensemble_size;
  const std::vector<double> uniform(members, 1.0 / members);
  std::vector<std::vector<std::vector<double>>> deltas;  // [target][member][option]
  for (const TargetOptions& t : targets) {
    deltas.push_back(MemberDeltas(ensemble->members, t.points));
    d.answers.push_back(AnswerTarget(t, deltas.back(), uniform));
    TargetAnswer& answer = d.answers.back();
    for (size_t o = 0; o < t.points.size(); ++o) {
      if (t.k[o] == answer.k && t.a[o] == answer.a) {
        answer.regret_bound = RegretQuantile(deltas.back(), o, config.confidence);
      }
    }
    answer.confidence = config.confidence;
  }
  d.streak = SameAnswers(d.answers, state.previous_answers) ? state.previous_streak + 1 : 1;
  bool settled = d.streak >= config.stable_decisions;
  for (const TargetAnswer& a : d.answers) settled = settled && a.regret_bound <= config.tolerance;
  if (settled && !state.in_flight.empty()) {
    // Their compute is committed and their results will come: an answer that ignored them
    // could be overturned by the design's own runs (a seed set not yet complete leaves a
    // stage of Eq. 14 unidentified). Wait for them; propose nothing meanwhile.
    d.held_back = absl::StrFormat(
        "confident, yet not stopping: %d run%s in flight, whose evidence the answer waits for",
        state.in_flight.size(), state.in_flight.size() == 1 ? "" : "s");
    return d;
  }
  if (settled) {
    std::optional<std::string> disagreement = DisagreementWithRuns(
        state.completed, d.answers, ensemble->members, d.noise_sd, config.consistency_z);
    if (disagreement) {
      d.held_back = absl::StrCat("confident, yet not stopping: ", *disagreement);
    } else {
      d.stop = true;
      d.stop_reason = absl::StrFormat(
          "answers unchanged for %d decisions, every target's regret <= %g nats with "
          "confidence %g (largest bound %.2g), and the runs at the targets agree with the law",
          d.streak, config.tolerance, config.confidence, LargestBound(d.answers));
      return d;
    }
  }

  // The candidate space and the members' predictions there.
  std::vector<Candidate> candidates;
  std::vector<std::vector<double>> predictions;  // [candidate][member]
  for (const std::string& b : config.backbones) {
    for (int l : config.seq_lens) {
      for (double f : config.flop_budgets) {
        for (int k : config.ks) {
          for (double a : config.as) {
            const Candidate c{b, l, k, a, f};
            LawPoint point;
            if (c.IsDense() || !PointOf(c, &point)) continue;
            bool queued = false;
            for (const Candidate& q : state.in_flight) queued = queued || SameRun(q, c);
            if (queued) continue;
            candidates.push_back(c);
            std::vector<double> p(members);
            for (int m = 0; m < members; ++m) p[m] = PredictDelta(ensemble->members[m], point);
            predictions.push_back(std::move(p));
          }
        }
      }
    }
  }
  ValueModel model(deltas, d.noise_sd);
  for (const Candidate& q : state.in_flight) {
    LawPoint point;
    if (q.IsDense() || !PointOf(q, &point)) continue;
    std::vector<double> p(members);
    for (int m = 0; m < members; ++m) p[m] = PredictDelta(ensemble->members[m], point);
    model.Condition(p);
  }

  DenseCoverage dense = CoverageOf(state);
  double left = config.compute_budget - state.compute_spent;
  std::vector<Scored> scored(candidates.size());
  std::vector<bool> picked(candidates.size(), false);
  auto cost_of = [&](size_t i, bool* needs_dense) {
    *needs_dense = !dense.Covers(candidates[i]);
    return candidates[i].flops * (*needs_dense ? 2 : 1);
  };
  std::vector<double> before = model.ExpectedRegrets(nullptr);
  auto value = [&](size_t i) {
    Scored s;
    s.index = i;
    s.cost = cost_of(i, &s.needs_dense) / kFlopUnit;
    s.value = std::max(0.0, Sum(before) - Sum(model.ExpectedRegrets(&predictions[i])));
    s.spread = StdDev(predictions[i]);
    return s;
  };
  const auto cancelled = [&config] { return config.cancelled && config.cancelled(); };
  const absl::Status stopped = absl::CancelledError("design decision cancelled");
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (cancelled()) return stopped;
    scored[i] = value(i);
  }
  std::vector<size_t> order(candidates.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  bool first = true;
  while (static_cast<int>(d.ranked.size()) < config.max_proposals) {
    if (!first) {
      // Re-value the best candidates and those whose dense reference is now covered.
      before = model.ExpectedRegrets(nullptr);
      for (size_t r = 0; r < order.size(); ++r) {
        const size_t i = order[r];
        if (picked[i]) continue;
        if (cancelled()) return stopped;
        bool needs_dense = false;
        const bool cost_changed = (cost_of(i, &needs_dense) / kFlopUnit) != scored[i].cost;
        if (r < kLazyRevalue || cost_changed) scored[i] = value(i);
      }
    }
    first = false;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
      if (picked[x] != picked[y]) return !picked[x];
      return Better(scored[x], scored[y]);
    });
    size_t best = order.size();
    for (size_t i : order) {
      if (!picked[i] && scored[i].cost * kFlopUnit <= left * (1 + 1e-9)) {
        best = i;
        break;
      }
    }
    if (best == order.size()) break;
    const Scored& s = scored[best];
    picked[best] = true;
    Proposal p;
    p.run = candidates[best];
    p.needs_dense = s.needs_dense;
    p.cost_flops = s.cost * kFlopUnit;
    p.value = s.value;
    p.score = s.Key();
    p.reason = Reason(s, before, model.ExpectedRegrets(&predictions[best]), d.answers, d.noise_sd);
    if (!d.partial_evidence.empty()) absl::StrAppend(&p.reason, "; ", d.partial_evidence);
    d.ranked.push_back(std::move(p));
    left -= s.cost * kFlopUnit;
    dense.Add(candidates[best].backbone, candidates[best].seq_len, candidates[best].flops);
    model.Condition(predictions[best]);
  }
  if (d.ranked.empty() && state.in_flight.empty()) {
    d.stop = true;
    d.stop_reason = absl::StrFormat("compute budget spent: %.3g of %.3g FLOPs, no candidate fits",
                                    state.compute_spent, config.compute_budget);
  }
  return d;
}

}  // namespace xmod::fitter
