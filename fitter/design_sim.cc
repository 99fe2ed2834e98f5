// The grid and adaptive strategies on synthetic sweeps. See design_sim.h.
#include "fitter/design_sim.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fitter/adaptive_design.h"
#include "fitter/design_ensemble.h"
#include "fitter/synthetic.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace xmod::fitter {
namespace {

constexpr double kSweepFlops = 5e19;  // K x L and N_act sweeps (examples/paper/b4_kxl.textpb)
constexpr double kAxkFlops = 3e19;    // A x K sweep (examples/paper/b4_axk.textpb)

std::vector<Target> PaperTargets() {
  std::vector<Target> out;
  for (int l : {2048, 4096, 8192, 16384, 32768}) out.push_back({kSweepFlops, l, "556M"});
  for (const char* b : {"165M", "298M", "936M"}) out.push_back({kSweepFlops, 32768, b});
  return out;
}

std::vector<int> OptionKs() {
  std::vector<int> ks = PaperSweepKs();
  ks.push_back(3);
  std::sort(ks.begin(), ks.end());
  return ks;
}

const std::vector<double>& OptionAs() {
  static const std::vector<double>* as = new std::vector<double>{0.5, 1, 2, 3, 4, 5};
  return *as;
}

// The truth at every target: Δ of each option and the best.
struct TruthTable {
  std::vector<TargetOptions> targets;
  std::vector<std::map<std::pair<int, double>, double>> delta;  // [target][(k, a)]
  std::vector<double> best;
  std::vector<int> best_k;
};

absl::StatusOr<TruthTable> MakeTruth(const LawParams& truth) {
  TruthTable out;
  for (const Target& t : PaperTargets()) {
    absl::StatusOr<TargetOptions> options = MakeTargetOptions(t, OptionKs(), OptionAs());
    if (!options.ok()) return options.status();
    std::map<std::pair<int, double>, double> d;
    double best = INFINITY;
    int best_k = 0;
    for (size_t o = 0; o < options->points.size(); ++o) {
      const double v = CandidateDelta(truth, options->points[o]);
      d[{options->k[o], options->a[o]}] = v;
      if (v < best) {
        best = v;
        best_k = options->k[o];
      }
    }
    out.targets.push_back(*std::move(options));
    out.delta.push_back(std::move(d));
    out.best.push_back(best);
    out.best_k.push_back(best_k);
  }
  return out;
}

// One repetition's record.
struct RepResult {
  std::vector<std::pair<double, double>> curve;  // (compute spent, regret)
  std::vector<TargetAnswer> answers;             // the final ones
  double compute = 0;
};

double Regret(const TruthTable& truth, const std::vector<TargetAnswer>& answers) {
  double sum = 0;
  for (size_t t = 0; t < answers.size(); ++t) {
    sum += truth.delta[t].at({answers[t].k, answers[t].a}) - truth.best[t];
  }
  return sum / answers.size();
}

// The grid's answers: an ensemble of the paper's two-stage fit on `observations`, or an empty
// vector when they cannot be fitted yet.
std::vector<TargetAnswer> Answers(const TruthTable& truth,
                                  const std::vector<Observation>& observations,
                                  const DesignSimOptions& options, uint64_t seed) {
  EnsembleOptions ensemble_options;
  ensemble_options.members = options.bootstrap_samples;
  ensemble_options.seed = seed;
  ensemble_options.joint = false;  // the paper's two-stage fit, which the B.4 grid is made for
  absl::StatusOr<LawEnsemble> ensemble = FitEnsemble(observations, ensemble_options);
  std::vector<TargetAnswer> out;
  if (!ensemble.ok()) return out;
  const std::vector<double> uniform(ensemble->members.size(), 1.0 / ensemble->members.size());
  for (const TargetOptions& t : truth.targets) {
    out.push_back(AnswerTarget(t, MemberDeltas(ensemble->members, t.points), uniform));
  }
  return out;
}

absl::StatusOr<std::vector<Observation>> GridObservations(const DesignSimOptions& options,
                                                          uint64_t seed) {
  SyntheticOptions synthetic;
  synthetic.truth = options.truth;
  synthetic.sigma = options.sigma;
  synthetic.seed = seed;
  absl::StatusOr<std::vector<Observation>> obs = PaperSweepObservations(synthetic);
  if (!obs.ok()) return obs.status();
  for (Observation& o : *obs) o.flops = o.a == 1.0 ? kSweepFlops : kAxkFlops;
  return obs;
}

absl::StatusOr<double> GridCompute(const DesignSimOptions& options) {
  absl::StatusOr<std::vector<Observation>> obs = GridObservations(options, options.seed);
  if (!obs.ok()) return obs.status();
  double total = 0;
  std::set<std::pair<std::string, int>> dense;
  for (const Observation& o : *obs) {
    total += o.flops;
    if (dense.insert({o.backbone, o.seq_len}).second) total += kSweepFlops;
  }
  return total;
}

absl::StatusOr<RepResult> GridRep(const DesignSimOptions& options, const TruthTable& truth,
                                  uint64_t seed) {
  absl::StatusOr<std::vector<Observation>> obs = GridObservations(options, seed);
  if (!obs.ok()) return obs.status();
  // Jobs: dense references (index -1 - d) and X-MoD runs (index i), in a random order.
  std::vector<std::pair<std::string, int>> dense;
  for (const Observation& o : *obs) {
    if (std::find(dense.begin(), dense.end(), std::make_pair(o.backbone, o.seq_len)) ==
        dense.end()) {
      dense.push_back({o.backbone, o.seq_len});
    }
  }
  std::vector<int> jobs;
  for (int d = 0; d < static_cast<int>(dense.size()); ++d) jobs.push_back(-1 - d);
  for (int i = 0; i < static_cast<int>(obs->size()); ++i) jobs.push_back(i);
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::shuffle(jobs.begin(), jobs.end(), rng);
  RepResult rep;
  std::set<std::pair<std::string, int>> dense_done;
  std::vector<bool> run_done(obs->size(), false);
  for (size_t start = 0; start < jobs.size(); start += options.slots) {
    for (size_t j = start; j < std::min(jobs.size(), start + options.slots); ++j) {
      if (jobs[j] < 0) {
        dense_done.insert(dense[-1 - jobs[j]]);
        rep.compute += kSweepFlops;
      } else {
        run_done[jobs[j]] = true;
        rep.compute += (*obs)[jobs[j]].flops;
      }
    }
    std::vector<Observation> completed;
    for (size_t i = 0; i < obs->size(); ++i) {
      if (run_done[i] && dense_done.count({(*obs)[i].backbone, (*obs)[i].seq_len})) {
        completed.push_back((*obs)[i]);
      }
    }
    std::vector<TargetAnswer> answers = Answers(truth, completed, options, seed);
    if (answers.empty()) continue;
    rep.curve.push_back({rep.compute, Regret(truth, answers)});
    rep.answers = std::move(answers);
  }
  return rep;
}

AdaptiveConfig SimConfig(const DesignSimOptions& options, double grid_compute, uint64_t seed) {
  AdaptiveConfig config;
  config.targets = PaperTargets();
  config.ks = OptionKs();
  config.as = OptionAs();
  config.seq_lens = {2048, 4096, 8192, 16384, 32768};
  config.backbones = {"165M", "298M", "556M", "936M"};
  config.flop_budgets = {kSweepFlops};
  config.compute_budget = options.budget_fraction * grid_compute;
  config.tolerance = options.tolerance;
  config.bootstrap_samples = options.bootstrap_samples;
  config.seed = seed;
  config.max_proposals = options.slots;
  return config;
}

absl::StatusOr<RepResult> AdaptiveRep(const DesignSimOptions& options, const TruthTable& truth,
                                      double grid_compute, uint64_t seed) {
  const AdaptiveConfig config = SimConfig(options, grid_compute, seed);
  absl::StatusOr<std::vector<Candidate>> seed_runs = SeedDesign(config);
  if (!seed_runs.ok()) return seed_runs.status();
  std::mt19937_64 noise_rng(seed);
  std::normal_distribution<double> noise(0.0, options.sigma);
  DesignState state;
  RepResult rep;
  size_t next_seed = 0;
  int64_t run_number = 0;
  while (true) {
    absl::StatusOr<Decision> decision = Decide(config, state);
    if (!decision.ok()) return decision.status();
    if (!decision->answers.empty()) {
      rep.curve.push_back({state.compute_spent, Regret(truth, decision->answers)});
      rep.answers = decision->answers;
      state.previous_answers = decision->answers;
      state.previous_streak = decision->streak;
    }
    if (decision->stop) break;
    // This round: the seed runs still to start, then the best proposals.
    std::vector<Candidate> round;
    double committed = state.compute_spent;
    while (next_seed < seed_runs->size() && static_cast<int>(round.size()) < options.slots &&
           committed + (*seed_runs)[next_seed].flops <= config.compute_budget) {
      committed += (*seed_runs)[next_seed].flops;
      round.push_back((*seed_runs)[next_seed++]);
    }
    if (static_cast<int>(round.size()) < options.slots && next_seed == seed_runs->size()) {
      absl::StatusOr<Decision> fill = decision;
      if (!round.empty()) {
        DesignState busy = state;
        busy.in_flight = round;
        busy.compute_spent = committed;
        fill = Decide(config, busy);
        if (!fill.ok()) return fill.status();
      }
      for (const Proposal& p : fill->ranked) {
        const int needed = p.needs_dense ? 2 : 1;
        if (static_cast<int>(round.size()) + needed > options.slots) continue;
        if (p.needs_dense) round.push_back({p.run.backbone, p.run.seq_len, 1, 1.0, p.run.flops});
        round.push_back(p.run);
      }
    }
    if (round.empty()) break;
    for (const Candidate& c : round) {
      state.compute_spent += c.flops;
      if (c.IsDense()) {
        state.dense_done.push_back(c);
        continue;
      }
      absl::StatusOr<Observation> o =
          MakeDeltaObservation(absl::StrCat("sim-", ++run_number, " ", c.Describe()), c.backbone,
                               c.seq_len, c.k, c.a, 0.0);
      if (!o.ok()) return o.status();
      o->delta = PredictDelta(options.truth, o->point()) + noise(noise_rng);
      o->run_id = run_number;
      o->flops = c.flops;
      state.completed.push_back(*std::move(o));
    }
  }
  rep.compute = state.compute_spent;
  if (rep.answers.empty()) {
    return absl::FailedPreconditionError("adaptive design: the runs could never be fitted");
  }
  return rep;
}

// Mean of the reps' step functions at every compute where all of them have a point. Compute
// values equal up to rounding (sums of the same budgets in another order) are one mark.
std::vector<std::pair<double, double>> MeanCurve(const std::vector<RepResult>& reps) {
  constexpr double kSame = 1e-9;  // relative
  std::set<double> all;
  double start = 0;
  for (const RepResult& r : reps) {
    for (const auto& [c, regret] : r.curve) all.insert(c);
    start = std::max(start, r.curve.front().first);
  }
  std::vector<double> marks;
  for (double c : all) {
    if (!marks.empty() && c <= marks.back() * (1 + kSame)) {
      marks.back() = c;
    } else {
      marks.push_back(c);
    }
  }
  std::vector<std::pair<double, double>> out;
  for (double mark : marks) {
    if (mark < start * (1 - kSame)) continue;
    double sum = 0;
    for (const RepResult& r : reps) {
      double value = r.curve.front().second;
      for (const auto& [c, regret] : r.curve) {
        if (c <= mark * (1 + kSame)) value = regret;
      }
      sum += value;
    }
    out.push_back({mark, sum / reps.size()});
  }
  return out;
}

}  // namespace

absl::StatusOr<xmod::v1::DesignSimReport> RunDesignSim(const DesignSimOptions& options) {
  if (options.strategy != "grid" && options.strategy != "adaptive") {
    return absl::InvalidArgumentError(
        absl::StrCat("strategy: must be grid or adaptive, got \"", options.strategy, "\""));
  }
  if (options.reps < 1) return absl::InvalidArgumentError("reps: must be >= 1");
  if (options.slots < 2) return absl::InvalidArgumentError("slots: must be >= 2");
  if (!(options.sigma >= 0)) return absl::InvalidArgumentError("sigma: must be >= 0");
  if (!(options.budget_fraction > 0)) {
    return absl::InvalidArgumentError("budget_fraction: must be > 0");
  }
  absl::StatusOr<TruthTable> truth = MakeTruth(options.truth);
  if (!truth.ok()) return truth.status();
  absl::StatusOr<double> grid_compute = GridCompute(options);
  if (!grid_compute.ok()) return grid_compute.status();
  std::vector<RepResult> reps;
  for (int r = 0; r < options.reps; ++r) {
    const uint64_t seed = options.seed + 1000003ULL * static_cast<uint64_t>(r);
    absl::StatusOr<RepResult> rep = options.strategy == "grid"
                                        ? GridRep(options, *truth, seed)
                                        : AdaptiveRep(options, *truth, *grid_compute, seed);
    if (!rep.ok()) return rep.status();
    if (rep->curve.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(options.strategy, " repetition ", r, ": no fit succeeded"));
    }
    reps.push_back(*std::move(rep));
  }
  xmod::v1::DesignSimReport report;
  report.set_strategy(options.strategy);
  report.set_reps(options.reps);
  double compute = 0, regret = 0, exact = 0, sq = 0;
  int n = 0;
  for (const RepResult& rep : reps) {
    compute += rep.compute;
    regret += Regret(*truth, rep.answers);
    for (size_t t = 0; t < rep.answers.size(); ++t) {
      const TargetAnswer& a = rep.answers[t];
      exact += a.k == truth->best_k[t] ? 1 : 0;
      const double err = a.delta - truth->delta[t].at({a.k, a.a});
      sq += err * err;
      ++n;
    }
  }
  report.set_compute_flops(compute / reps.size());
  report.set_regret(regret / reps.size());
  report.set_k_star_exact(exact / n);
  report.set_delta_rmse_at_targets(std::sqrt(sq / n));
  for (const auto& [c, r] : MeanCurve(reps)) {
    xmod::v1::DesignSimCurvePoint* p = report.add_curve();
    p->set_compute_flops(c);
    p->set_regret(r);
  }
  return report;
}

absl::StatusOr<LawParams> LawParamsFromJson(const std::string& json) {
  google::protobuf::Struct object;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &object); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("law parameters: not a JSON object: ", std::string(s.message())));
  }
  // Table 8's keys are required; the exposure term's (Eq. 24) optional.
  auto index_of = [](const std::string& key) {
    for (int i = 0; i < kAllParamCount; ++i) {
      const int n = static_cast<int>(kLawParamNames.size());
      if (key == (i < n ? kLawParamNames[i] : kExposureParamNames[i - n])) return i;
    }
    return -1;
  };
  LawParams p;
  for (const auto& [key, value] : object.fields()) {
    const int i = index_of(key);
    if (i < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "law parameters: unknown key \"", key,
          "\"; expected e, u, eta_n, rho_n, w, eta_l, rho_l, z, rho_k, rho_a (and optionally v, "
          "eta_d, rho_d)"));
    }
    if (value.kind_case() != google::protobuf::Value::kNumberValue ||
        !std::isfinite(value.number_value())) {
      return absl::InvalidArgumentError(
          absl::StrCat("law parameters: \"", key, "\" must be a finite number"));
    }
    ParamAt(p, i) = value.number_value();
  }
  for (const char* name : kLawParamNames) {
    if (object.fields().count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("law parameters: missing key \"", name, "\""));
    }
  }
  return p;
}

}  // namespace xmod::fitter
