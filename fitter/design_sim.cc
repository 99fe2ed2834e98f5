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
#include "fitter/partial_curve.h"
#include "fitter/synthetic.h"

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
bool SameCandidate(const Candidate& x, const Candidate& y) {
  return x.backbone == y.backbone && x.seq_len == y.seq_len && x.k == y.k && x.a == y.a &&
         x.flops == y.flops;
}

struct RepResult {
  std::vector<std::pair<double, double>> curve;  // (compute spent, regret)
  std::vector<TargetAnswer> answers;             // the final ones
  double compute = 0;
  bool confident_stop = false;  // adaptive: stopped on its regret bounds (answers' claims)
  int early_stops = 0;          // learning curves: runs stopped early ...
  int resumes = 0;              // ... and resumed
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
  config.confidence = options.confidence;
  config.bootstrap_samples = options.bootstrap_samples;
  config.seed = seed;
  config.max_proposals = options.slots;
  return config;
}

// The seed design's runs, started in order.
struct SeedQueue {
  std::vector<Candidate> runs;
  size_t next = 0;
  bool Exhausted() const { return next == runs.size(); }
  // Whether a next seed run is left and fits the budget after `committed` FLOPs.
  bool NextFits(double committed, double budget) const {
    return next < runs.size() && committed + runs[next].flops <= budget;
  }
};

// A run's law point with its true Δ (no noise), named and numbered `id`.
absl::StatusOr<Observation> TrueObservation(const Candidate& c, int64_t id,
                                            const LawParams& truth) {
  absl::StatusOr<Observation> o = MakeDeltaObservation(absl::StrCat("sim-", id, " ", c.Describe()),
                                                       c.backbone, c.seq_len, c.k, c.a, 0.0);
  if (!o.ok()) return o.status();
  o->delta = PredictDelta(truth, o->point());
  o->run_id = id;
  o->flops = c.flops;
  return o;
}

// What both adaptive repetitions share: the design's config, the random source, its seed runs
// and the record.
class AdaptiveSim {
 public:
  AdaptiveSim(const DesignSimOptions& options, const TruthTable& truth, double grid_compute,
              uint64_t seed)
      : options_(options),
        truth_(truth),
        config_(SimConfig(options, grid_compute, seed)),
        rng_(seed),
        noise_(0.0, options.sigma) {}

 protected:
  absl::Status LoadSeedRuns() {
    absl::StatusOr<std::vector<Candidate>> runs = SeedDesign(config_);
    if (!runs.ok()) return runs.status();
    seeds_.runs = *std::move(runs);
    return absl::OkStatus();
  }

  // Records a decision's answers (when it has any) at `compute` and carries them and their
  // streak into the design's next state; true when the decision stops, noting whether it
  // stopped on its regret bounds (its answers' claims).
  bool Record(const Decision& decision, double compute, DesignState* state) {
    if (!decision.answers.empty()) {
      rep_.curve.push_back({compute, Regret(truth_, decision.answers)});
      rep_.answers = decision.answers;
      state->previous_answers = decision.answers;
      state->previous_streak = decision.streak;
    }
    if (!decision.stop) return false;
    rep_.confident_stop = !decision.answers.empty();
    for (const TargetAnswer& a : decision.answers) {
      rep_.confident_stop = rep_.confident_stop && a.regret_bound <= config_.tolerance;
    }
    return true;
  }

  absl::StatusOr<RepResult> Result() const {
    if (rep_.answers.empty()) {
      return absl::FailedPreconditionError("adaptive design: the runs could never be fitted");
    }
    return rep_;
  }

  const DesignSimOptions& options_;
  const TruthTable& truth_;
  const AdaptiveConfig config_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> noise_;  // of every measured Δ
  SeedQueue seeds_;
  RepResult rep_;
};

// The adaptive design where every run reports only its end (DesignSimOptions::marks == 1).
class AdaptiveRep : private AdaptiveSim {
 public:
  using AdaptiveSim::AdaptiveSim;

  absl::StatusOr<RepResult> Run() {
    if (absl::Status s = LoadSeedRuns(); !s.ok()) return s;
    while (true) {
      absl::StatusOr<Decision> decision = Decide(config_, state_);
      if (!decision.ok()) return decision.status();
      if (Record(*decision, state_.compute_spent, &state_)) break;
      absl::StatusOr<std::vector<Candidate>> round = PlanRound(*decision);
      if (!round.ok()) return round.status();
      if (round->empty()) break;
      if (absl::Status s = TrainRound(*round); !s.ok()) return s;
    }
    rep_.compute = state_.compute_spent;
    return Result();
  }

 private:
  // This round: the seed runs still to start, then the best proposals.
  absl::StatusOr<std::vector<Candidate>> PlanRound(const Decision& decision) {
    std::vector<Candidate> round;
    double committed = state_.compute_spent;
    while (static_cast<int>(round.size()) < options_.slots &&
           seeds_.NextFits(committed, config_.compute_budget)) {
      committed += seeds_.runs[seeds_.next].flops;
      round.push_back(seeds_.runs[seeds_.next++]);
    }
    if (static_cast<int>(round.size()) < options_.slots && seeds_.Exhausted()) {
      const Decision* fill = &decision;
      absl::StatusOr<Decision> refill;
      if (!round.empty()) {
        DesignState busy = state_;
        busy.in_flight = round;
        busy.compute_spent = committed;
        refill = Decide(config_, busy);
        if (!refill.ok()) return refill.status();
        fill = &*refill;
      }
      AddProposals(fill->ranked, &round);
    }
    return round;
  }

  void AddProposals(const std::vector<Proposal>& ranked, std::vector<Candidate>* round) const {
    for (const Proposal& p : ranked) {
      const int needed = p.needs_dense ? 2 : 1;
      if (static_cast<int>(round->size()) + needed > options_.slots) continue;
      if (p.needs_dense) round->push_back({p.run.backbone, p.run.seq_len, 1, 1.0, p.run.flops});
      round->push_back(p.run);
    }
  }

  // Every run of the round completes with its Δ drawn around the truth.
  absl::Status TrainRound(const std::vector<Candidate>& round) {
    for (const Candidate& c : round) {
      state_.compute_spent += c.flops;
      if (c.IsDense()) {
        state_.dense_done.push_back(c);
        continue;
      }
      absl::StatusOr<Observation> o = TrueObservation(c, ++run_number_, options_.truth);
      if (!o.ok()) return o.status();
      o->delta += noise_(rng_);
      state_.completed.push_back(*std::move(o));
    }
    return absl::OkStatus();
  }

  DesignState state_;
  int64_t run_number_ = 0;
};

// A run of the adaptive design under learning curves (DesignSimOptions::marks > 1).
struct SimRun {
  Candidate run;
  Observation final_delta;       // its law point, with the final Δ truth + noise
  double slope = 0;              // b of its curve
  std::vector<DeltaMark> curve;  // marks reported so far
  bool running = false;
  bool stopped = false;
  int64_t id = 0;
  int MarksDone() const { return static_cast<int>(curve.size()); }
};

// The marks' fractions and the FLOPs trained by a run that reported `done` of `marks` marks.
double TrainedFlops(const SimRun& r, int marks) { return r.run.flops * r.MarksDone() / marks; }

// The design's state under learning curves: completed runs' final Δ, forecasts of the others.
DesignState CurvesState(const std::vector<SimRun>& runs, const DesignState& base, int marks) {
  DesignState state = base;
  state.completed.clear();
  state.partial.clear();
  state.in_flight.clear();
  std::vector<std::vector<DeltaMark>> completed_curves;
  double spent = 0;
  for (const SimRun& r : runs) {
    if (r.run.IsDense()) {
      spent += r.run.flops;
      continue;
    }
    spent += r.running ? r.run.flops : TrainedFlops(r, marks);
    if (r.running) state.in_flight.push_back(r.run);
    if (r.MarksDone() == marks) {
      Observation o = r.final_delta;
      o.delta = r.curve.back().delta;
      state.completed.push_back(o);
      completed_curves.push_back(r.curve);
    }
  }
  absl::StatusOr<PartialCurveModel> model = FitPartialCurveModel(completed_curves);
  for (const SimRun& r : runs) {
    if (!model.ok() || r.run.IsDense() || r.MarksDone() == 0 || r.MarksDone() == marks) continue;
    absl::StatusOr<Forecast> forecast = ForecastFinal(*model, r.curve);
    if (!forecast.ok()) continue;
    PartialRun p;
    p.forecast = r.final_delta;
    p.forecast.delta = forecast->mean;
    p.forecast_sd = forecast->sd;
    p.last_fraction = forecast->last_fraction;
    p.stopped = r.stopped;
    state.partial.push_back(p);
  }
  state.compute_spent = spent;
  return state;
}

// The adaptive design under learning curves (DesignSimOptions::marks > 1).
class AdaptiveCurvesRep : private AdaptiveSim {
 public:
  AdaptiveCurvesRep(const DesignSimOptions& options, const TruthTable& truth, double grid_compute,
                    uint64_t seed)
      : AdaptiveSim(options, truth, grid_compute, seed),
        marks_(options.marks),
        slope_(options.curve_slope_mean, options.curve_slope_sd) {}

  absl::StatusOr<RepResult> Run() {
    if (absl::Status s = LoadSeedRuns(); !s.ok()) return s;
    while (true) {
      DesignState state = CurvesState(runs_, base_, marks_);
      absl::StatusOr<Decision> decision = Decide(config_, state);
      if (!decision.ok()) return decision.status();
      const double trained = Trained();
      rep_.compute = trained;
      if (Record(*decision, trained, &base_)) break;
      StopEarly(state, decision->noise_sd);
      int busy = Busy();
      if (absl::Status s = StartSeedRuns(&busy); !s.ok()) return s;
      absl::StatusOr<bool> fill_stops = FillFreeSlots(&busy);
      if (!fill_stops.ok()) return fill_stops.status();
      // Early stops can leave nothing in flight, and a design that waited for its runs in
      // flight then stops: the next decision, on this same state, records that stop.
      if (busy == 0 && *fill_stops) continue;
      if (busy == 0) break;
      ReportNextMarks();
    }
    return Result();
  }

 private:
  // The FLOPs trained so far.
  double Trained() const {
    double trained = 0;
    for (const SimRun& r : runs_) {
      trained += r.run.IsDense() ? r.run.flops : TrainedFlops(r, marks_);
    }
    return trained;
  }

  int Busy() const {
    int busy = 0;
    for (const SimRun& r : runs_) busy += r.running ? 1 : 0;
    return busy;
  }

  // Early stopping: a run whose forecast is as certain as one more measurement (the fit's
  // noise sd; the design does not know σ) stops.
  void StopEarly(const DesignState& state, double noise_sd) {
    for (const PartialRun& p : state.partial) {
      SimRun& r = runs_[p.forecast.run_id - 1];
      if (r.running && p.forecast_sd <= noise_sd) {
        r.running = false;
        r.stopped = true;
        ++rep_.early_stops;
      }
    }
  }

  absl::Status StartSeedRuns(int* busy) {
    double committed = CurvesState(runs_, base_, marks_).compute_spent;
    while (*busy < options_.slots && seeds_.NextFits(committed, config_.compute_budget)) {
      committed += seeds_.runs[seeds_.next].flops;
      if (absl::Status s = Start(seeds_.runs[seeds_.next++]); !s.ok()) return s;
      *busy += runs_.back().running ? 1 : 0;
    }
    return absl::OkStatus();
  }

  // Once the seed runs are all started, the free slots go to the proposals; true when that
  // decision stops.
  absl::StatusOr<bool> FillFreeSlots(int* busy) {
    if (*busy >= options_.slots || !seeds_.Exhausted()) return false;
    absl::StatusOr<Decision> fill = Decide(config_, CurvesState(runs_, base_, marks_));
    if (!fill.ok()) return fill.status();
    for (const Proposal& p : fill->ranked) {
      if (*busy + (p.needs_dense ? 1 : 0) + 1 > options_.slots) continue;
      if (p.needs_dense) {  // trained in this round's slot, done by its end
        if (absl::Status s = Start({p.run.backbone, p.run.seq_len, 1, 1.0, p.run.flops}); !s.ok()) {
          return s;
        }
        ++*busy;
      }
      if (absl::Status s = Start(p.run); !s.ok()) return s;
      ++*busy;
    }
    return fill->stop;
  }

  absl::Status Start(const Candidate& c) {
    for (SimRun& r : runs_) {  // a stopped run resumes where it stopped
      if (r.stopped && SameCandidate(r.run, c)) {
        r.stopped = false;
        r.running = true;
        ++rep_.resumes;
        return absl::OkStatus();
      }
    }
    SimRun r;
    r.run = c;
    r.id = static_cast<int64_t>(runs_.size()) + 1;
    r.running = true;
    if (c.IsDense()) {
      r.running = false;  // a dense reference is not part of the curve model
      base_.dense_done.push_back(c);
      runs_.push_back(std::move(r));
      return absl::OkStatus();
    }
    absl::StatusOr<Observation> o = TrueObservation(c, r.id, options_.truth);
    if (!o.ok()) return o.status();
    r.final_delta = *std::move(o);
    r.slope = slope_(rng_);
    runs_.push_back(std::move(r));
    return absl::OkStatus();
  }

  // One round: every running run reports its next mark.
  void ReportNextMarks() {
    for (SimRun& r : runs_) {
      if (!r.running) continue;
      const double f = static_cast<double>(r.MarksDone() + 1) / marks_;
      const double g = std::pow(f, -options_.curve_alpha) - 1;
      r.curve.push_back({f, r.final_delta.delta + r.slope * g + noise_(rng_)});
      if (r.MarksDone() == marks_) r.running = false;
    }
  }

  const int marks_;
  std::normal_distribution<double> slope_;
  std::vector<SimRun> runs_;
  DesignState base_;
};

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

// The stopping claims of the repetitions that stopped on their confidence against the truth
// (DesignSimReport fields 8-16).
void ReportCalibration(const TruthTable& truth, const std::vector<RepResult>& reps,
                       double confidence, xmod::v1::DesignSimReport* report) {
  int stops = 0, claims = 0, exceeded = 0;
  double claimed = 0, actual = 0;
  for (const RepResult& rep : reps) {
    if (!rep.confident_stop) continue;
    ++stops;
    for (size_t t = 0; t < rep.answers.size(); ++t) {
      const TargetAnswer& a = rep.answers[t];
      const double regret = truth.delta[t].at({a.k, a.a}) - truth.best[t];
      ++claims;
      exceeded += regret > a.regret_bound ? 1 : 0;
      claimed += a.regret_bound;
      actual += regret;
    }
  }
  report->set_confident_stops(stops);
  report->set_stop_claims(claims);
  report->set_stop_claims_exceeded(exceeded);
  report->set_confidence(confidence);
  report->set_calibrated(true);
  if (claims == 0) return;
  const double share = static_cast<double>(exceeded) / claims;
  const double allowed = (1 - confidence) + 2 * std::sqrt(confidence * (1 - confidence) / claims);
  report->set_exceeded_share(share);
  report->set_allowed_share(allowed);
  report->set_calibrated(share <= allowed);
  report->set_claimed_regret_mean(claimed / claims);
  report->set_true_regret_mean(actual / claims);
}

absl::Status ValidateOptions(const DesignSimOptions& options) {
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
  if (!(options.confidence > 0 && options.confidence < 1)) {
    return absl::InvalidArgumentError("confidence: must be in (0, 1)");
  }
  if (options.marks < 1) return absl::InvalidArgumentError("marks: must be >= 1");
  return absl::OkStatus();
}

// One repetition of the options' strategy under `seed`.
absl::StatusOr<RepResult> RunRep(const DesignSimOptions& options, const TruthTable& truth,
                                 double grid_compute, uint64_t seed) {
  if (options.strategy == "grid") return GridRep(options, truth, seed);
  if (options.marks > 1) return AdaptiveCurvesRep(options, truth, grid_compute, seed).Run();
  return AdaptiveRep(options, truth, grid_compute, seed).Run();
}

// The means over the repetitions of compute, early stops, resumes, regret and the answers'
// accuracy at the targets.
void ReportMeans(const TruthTable& truth, const std::vector<RepResult>& reps,
                 xmod::v1::DesignSimReport* report) {
  double compute = 0, regret = 0, exact = 0, sq = 0, early_stops = 0, resumes = 0;
  int n = 0;
  for (const RepResult& rep : reps) {
    compute += rep.compute;
    early_stops += rep.early_stops;
    resumes += rep.resumes;
    regret += Regret(truth, rep.answers);
    for (size_t t = 0; t < rep.answers.size(); ++t) {
      const TargetAnswer& a = rep.answers[t];
      exact += a.k == truth.best_k[t] ? 1 : 0;
      const double err = a.delta - truth.delta[t].at({a.k, a.a});
      sq += err * err;
      ++n;
    }
  }
  report->set_compute_flops(compute / reps.size());
  report->set_early_stops(early_stops / reps.size());
  report->set_resumes(resumes / reps.size());
  report->set_regret(regret / reps.size());
  report->set_k_star_exact(exact / n);
  report->set_delta_rmse_at_targets(std::sqrt(sq / n));
}

}  // namespace

absl::StatusOr<xmod::v1::DesignSimReport> RunDesignSim(const DesignSimOptions& options) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  absl::StatusOr<TruthTable> truth = MakeTruth(options.truth);
  if (!truth.ok()) return truth.status();
  absl::StatusOr<double> grid_compute = GridCompute(options);
  if (!grid_compute.ok()) return grid_compute.status();
  std::vector<RepResult> reps;
  for (int r = 0; r < options.reps; ++r) {
    const uint64_t seed = options.seed + 1000003ULL * static_cast<uint64_t>(r);
    absl::StatusOr<RepResult> rep = RunRep(options, *truth, *grid_compute, seed);
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
  ReportMeans(*truth, reps, &report);
  ReportCalibration(*truth, reps, options.confidence, &report);
  for (const auto& [c, r] : MeanCurve(reps)) {
    xmod::v1::DesignSimCurvePoint* p = report.add_curve();
    p->set_compute_flops(c);
    p->set_regret(r);
  }
  return report;
}

}  // namespace xmod::fitter
