// See adaptive_controller.h.
#include "coordinator/design/adaptive_controller.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/fitting/studies.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/store_reads.h"
#include "fitter/backbones.h"
#include "fitter/db_source.h"
#include "fitter/observations.h"
#include "fitter/study_fit.h"
#include "fitter/sweep_fit.h"
#include "glog/logging.h"

namespace xmod {
namespace {

constexpr int kDefaultMaxInFlight = 4;
constexpr int kDefaultEnsemble = 32;
constexpr int kDefaultProposals = 5;
constexpr double kDefaultTolerance = 2e-4;
// ProposeRuns without compute_left: no limit worth naming.
constexpr double kUnlimitedCompute = 1e300;

bool SameFlops(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); }

bool IsDenseRun(const xmod::v1::Run& run) { return run.spec().model().arch() == xmod::v1::DENSE; }
bool IsXmodRun(const xmod::v1::Run& run) {
  return run.spec().model().arch() == xmod::v1::XMOD && run.spec().model().k() >= 2;
}

// The fitter's candidate for an expanded run (nullopt for runs the design does not use).
std::optional<fitter::Candidate> CandidateOf(const xmod::v1::Run& run) {
  if (!IsDenseRun(run) && !IsXmodRun(run)) return std::nullopt;
  fitter::Candidate c;
  c.backbone = run.spec().model().backbone().name();
  c.seq_len = run.spec().training().seq_len();
  c.k = IsDenseRun(run) ? 1 : run.spec().model().k();
  c.a = IsDenseRun(run) ? 1 : run.spec().model().a();
  c.flops = run.spec().training().flop_budget();
  return c;
}

bool Matches(const fitter::Candidate& c, const xmod::v1::Run& run) {
  std::optional<fitter::Candidate> r = CandidateOf(run);
  return r && r->backbone == c.backbone && r->seq_len == c.seq_len && r->k == c.k &&
         (c.k == 1 || r->a == c.a) && SameFlops(r->flops, c.flops);
}

template <typename T>
void AddUnique(std::vector<T>* values, T v) {
  if (std::find(values->begin(), values->end(), v) == values->end()) values->push_back(v);
}

// Field paths: fitter::ValidateConfig names AdaptiveConfig fields; the spec's are under
// `adaptive.` (targets, budget, tolerance, ensemble) or come from the grids.
absl::Status InSpec(const absl::Status& status) {
  const std::string message(status.message());
  for (const char* field : {"targets", "compute_budget", "tolerance", "bootstrap_samples",
                            "max_proposals", "stable_decisions", "noise_floor"}) {
    if (absl::StartsWith(message, field)) {
      return absl::Status(status.code(), absl::StrCat("adaptive.", message));
    }
  }
  return absl::Status(status.code(), absl::StrCat("grids: ", message));
}

absl::StatusOr<std::vector<fitter::Target>> TargetsOf(
    const google::protobuf::RepeatedPtrField<xmod::v1::DesignTarget>& targets,
    const std::string& path) {
  std::vector<fitter::Target> out;
  for (int i = 0; i < targets.size(); ++i) {
    const xmod::v1::DesignTarget& t = targets[i];
    const std::string at = absl::StrCat(path, "[", i, "]");
    if (!(t.flops() > 0))
      return absl::InvalidArgumentError(absl::StrCat(at, ".flops: must be > 0"));
    if (t.seq_len() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".seq_len: must be >= 1"));
    }
    if (t.backbone().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".backbone: must not be empty"));
    }
    if (absl::StatusOr<double> n = fitter::NominalActiveParams(t.backbone()); !n.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".backbone: '", t.backbone(), "': ", n.status().message()));
    }
    out.push_back({t.flops(), t.seq_len(), t.backbone()});
  }
  return out;
}

// The candidate space and the settings of spec.adaptive (defaults filled in); targets
// and compute budget are left for the caller when the spec has no adaptive design.
absl::StatusOr<fitter::AdaptiveConfig> ConfigOf(const xmod::v1::SweepSpec& spec,
                                                const std::vector<xmod::v1::Run>& expanded) {
  fitter::AdaptiveConfig config;
  for (const xmod::v1::Run& run : expanded) {
    std::optional<fitter::Candidate> c = CandidateOf(run);
    if (!c) continue;
    AddUnique(&config.ks, c->k);
    if (c->k >= 2) AddUnique(&config.as, c->a);
    AddUnique(&config.seq_lens, c->seq_len);
    AddUnique(&config.backbones, c->backbone);
    AddUnique(&config.flop_budgets, c->flops);
  }
  std::sort(config.ks.begin(), config.ks.end());
  std::sort(config.as.begin(), config.as.end());
  std::sort(config.seq_lens.begin(), config.seq_lens.end());
  std::sort(config.flop_budgets.begin(), config.flop_budgets.end());
  const xmod::v1::AdaptiveSpec& adaptive = spec.adaptive();
  absl::StatusOr<std::vector<fitter::Target>> targets =
      TargetsOf(adaptive.targets(), "adaptive.targets");
  if (!targets.ok()) return targets.status();
  config.targets = *std::move(targets);
  config.compute_budget = adaptive.compute_budget();
  if (adaptive.tolerance() < 0) {
    return absl::InvalidArgumentError("adaptive.tolerance: must be >= 0");
  }
  config.tolerance = adaptive.tolerance() > 0 ? adaptive.tolerance() : kDefaultTolerance;
  if (adaptive.bootstrap_samples() < 0 || adaptive.bootstrap_samples() == 1) {
    return absl::InvalidArgumentError("adaptive.bootstrap_samples: must be 0 or >= 2");
  }
  config.bootstrap_samples =
      adaptive.bootstrap_samples() > 0 ? adaptive.bootstrap_samples() : kDefaultEnsemble;
  if (adaptive.max_in_flight() < 0) {
    return absl::InvalidArgumentError("adaptive.max_in_flight: must be >= 0");
  }
  config.max_proposals =
      adaptive.max_in_flight() > 0 ? adaptive.max_in_flight() : kDefaultMaxInFlight;
  config.seed = adaptive.seed();
  return config;
}

absl::StatusOr<std::vector<xmod::v1::Run>> ExpandCandidates(const xmod::v1::SweepSpec& spec) {
  ExpansionOptions options;
  options.check_data_paths = false;  // checked when the sweep was submitted
  return ExpandSweep(spec, options);
}

// The run that trains candidate `c`: the expanded run of the grids that matches it.
std::optional<xmod::v1::Run> RunFor(const fitter::Candidate& c,
                                    const std::vector<xmod::v1::Run>& expanded) {
  for (const xmod::v1::Run& run : expanded) {
    if (Matches(c, run)) return run;
  }
  return std::nullopt;
}

xmod::v1::DesignTarget TargetProto(const fitter::Target& t) {
  xmod::v1::DesignTarget out;
  out.set_flops(t.flops);
  out.set_seq_len(t.seq_len);
  out.set_backbone(t.backbone);
  return out;
}

xmod::v1::DesignDecision DecisionProto(const fitter::Decision& d) {
  xmod::v1::DesignDecision out;
  for (const fitter::Proposal& p : d.ranked) {
    xmod::v1::Proposal* q = out.add_proposals();
    q->set_backbone(p.run.backbone);
    q->set_seq_len(p.run.seq_len);
    q->set_k(p.run.k);
    q->set_a(p.run.a);
    q->set_flops(p.run.flops);
    q->set_needs_dense(p.needs_dense);
    q->set_cost_flops(p.cost_flops);
    q->set_value(p.value);
    q->set_score(p.score);
    q->set_reason(p.reason);
  }
  for (const fitter::TargetAnswer& a : d.answers) {
    xmod::v1::TargetRecommendation* r = out.add_recommendations();
    *r->mutable_target() = TargetProto(a.target);
    r->set_k(a.k);
    r->set_a(a.a);
    r->set_delta(a.delta);
    r->set_delta_sd(a.delta_sd);
    r->set_p_best(a.p_best);
    r->set_expected_regret(a.expected_regret);
  }
  out.set_stop(d.stop);
  out.set_stop_reason(d.stop_reason);
  out.set_streak(d.streak);
  if (d.fit_error.empty()) *out.mutable_fit() = fitter::LawParamsToProto(d.fit);
  out.set_fit_error(d.fit_error);
  out.set_noise_sd(d.noise_sd);
  out.set_ensemble_size(d.ensemble_size);
  return out;
}

std::vector<fitter::TargetAnswer> AnswersOf(const xmod::v1::DesignDecision& d) {
  std::vector<fitter::TargetAnswer> out;
  for (const xmod::v1::TargetRecommendation& r : d.recommendations()) {
    fitter::TargetAnswer a;
    a.target = {r.target().flops(), r.target().seq_len(), r.target().backbone()};
    a.k = r.k();
    a.a = r.a();
    a.delta = r.delta();
    a.delta_sd = r.delta_sd();
    a.p_best = r.p_best();
    a.expected_regret = r.expected_regret();
    out.push_back(a);
  }
  return out;
}

// What a decision reads, in one read transaction.
struct SweepSnapshot {
  xmod::v1::Sweep sweep;
  std::vector<xmod::v1::Run> runs;
  std::vector<fitter::RunCurve> succeeded;       // curves of the succeeded runs
  std::optional<xmod::v1::DesignDecision> last;  // the previous answer (see ReadSnapshot)
  // Under a study's fit: every member's succeeded runs in its role (the sweep's own
  // included), and the runs of the other members.
  std::vector<fitter::StudyMemberRuns> study_members;
  std::vector<xmod::v1::Run> other_members_runs;
};

absl::Status ReadStudy(Db& db, const std::string& name, int64_t sweep_id, SweepSnapshot* snap) {
  absl::StatusOr<xmod::v1::Study> study = LoadStudy(db, name);
  if (!study.ok()) return study.status();
  bool member = false;
  for (const xmod::v1::StudyMember& m : study->spec().members()) {
    absl::StatusOr<std::vector<fitter::RunCurve>> curves = fitter::LoadSweepRuns(db, m.sweep_id());
    if (!curves.ok()) return curves.status();
    fitter::DropSparseWithoutDense(&*curves);
    snap->study_members.push_back({absl::StrCat("sweep ", m.sweep_id(), " (", m.role(), ")"),
                                   *std::move(curves), MemberRole(m.role())});
    if (m.sweep_id() == sweep_id) {
      member = true;
      continue;
    }
    RunFilter filter;
    filter.sweep_id = m.sweep_id();
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
    if (!runs.ok()) return runs.status();
    snap->other_members_runs.insert(snap->other_members_runs.end(), runs->begin(), runs->end());
  }
  if (!member) {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep_id: sweep ", sweep_id, " is not a member of study '", name, "'"));
  }
  return absl::OkStatus();
}

// `last` is the latest stored decision of `source` ("" = any source).
absl::StatusOr<SweepSnapshot> ReadSnapshot(Store* store, int64_t sweep_id, const std::string& study,
                                           const std::string& source) {
  SweepSnapshot snap;
  absl::Status status = store->Read([&](Db& db) {
    absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id);
    if (!sweep.ok()) return sweep.status();
    snap.sweep = *std::move(sweep);
    RunFilter filter;
    filter.sweep_id = sweep_id;
    absl::StatusOr<std::vector<xmod::v1::Run>> runs = LoadRuns(db, filter);
    if (!runs.ok()) return runs.status();
    snap.runs = *std::move(runs);
    absl::StatusOr<std::vector<fitter::RunCurve>> curves = fitter::LoadSweepRuns(db, sweep_id);
    if (!curves.ok()) return curves.status();
    snap.succeeded = *std::move(curves);
    absl::StatusOr<std::optional<xmod::v1::DesignDecision>> last =
        LoadLatestDecision(db, sweep_id, source);
    if (!last.ok()) return last.status();
    snap.last = *std::move(last);
    return study.empty() ? absl::OkStatus() : ReadStudy(db, study, sweep_id, &snap);
  });
  if (!status.ok()) return status;
  return snap;
}

bool InFlight(const xmod::v1::Run& run) {
  return run.state() == xmod::v1::QUEUED || run.state() == xmod::v1::RUNNING;
}

// The design's state: observations of the succeeded runs (sparse runs whose reference has
// not succeeded yet are left out, as the fit trigger does; a study's as it is fitted), dense
// references done, runs in flight, compute spent (budgets of runs done or in flight, FLOPs
// of the ended rest), over the sweep or every member of the study.
fitter::DesignState StateOf(const SweepSnapshot& snap) {
  fitter::DesignState state;
  absl::StatusOr<std::vector<fitter::Observation>> obs;
  if (snap.study_members.empty()) {
    std::vector<fitter::RunCurve> curves = snap.succeeded;
    fitter::DropSparseWithoutDense(&curves);
    obs = fitter::BuildObservations(curves, {});
  } else {
    obs = fitter::StudyObservations(snap.study_members, {});
  }
  if (obs.ok()) {
    for (fitter::Observation& o : *obs) {
      if (!o.held_out) state.completed.push_back(std::move(o));
    }
  }
  for (const std::vector<xmod::v1::Run>* runs : {&snap.runs, &snap.other_members_runs}) {
    for (const xmod::v1::Run& run : *runs) {
      std::optional<fitter::Candidate> c = CandidateOf(run);
      const double budget = run.spec().training().flop_budget();
      if (run.state() == xmod::v1::SUCCEEDED || InFlight(run)) {
        state.compute_spent += budget;
      } else {
        state.compute_spent += std::min(budget, run.progress().flops());
      }
      if (!c) continue;
      if (InFlight(run)) state.in_flight.push_back(*c);
      if (run.state() == xmod::v1::SUCCEEDED && c->IsDense()) state.dense_done.push_back(*c);
    }
  }
  if (snap.last) {
    state.previous_answers = AnswersOf(*snap.last);
    state.previous_streak = snap.last->streak();
  }
  return state;
}

// Counts that change when a decision is due: succeeded, failed, cancelled and all runs.
std::vector<int64_t> Signature(const std::vector<xmod::v1::Run>& runs) {
  std::vector<int64_t> counts(4, 0);
  for (const xmod::v1::Run& run : runs) {
    if (run.state() == xmod::v1::SUCCEEDED) ++counts[0];
    if (run.state() == xmod::v1::FAILED) ++counts[1];
    if (run.state() == xmod::v1::CANCELLED) ++counts[2];
    ++counts[3];
  }
  return counts;
}

}  // namespace

absl::StatusOr<fitter::AdaptiveConfig> AdaptiveConfigOf(const xmod::v1::SweepSpec& spec) {
  if (!spec.adaptive().enabled()) {
    return absl::InvalidArgumentError("adaptive.enabled: the sweep has no adaptive design");
  }
  absl::StatusOr<std::vector<xmod::v1::Run>> expanded = ExpandCandidates(spec);
  if (!expanded.ok()) return expanded.status();
  absl::StatusOr<fitter::AdaptiveConfig> config = ConfigOf(spec, *expanded);
  if (!config.ok()) return config.status();
  if (config->targets.empty()) {
    return absl::InvalidArgumentError("adaptive.targets: give at least one target");
  }
  if (!(config->compute_budget > 0)) {
    return absl::InvalidArgumentError("adaptive.compute_budget: must be > 0");
  }
  if (absl::Status s = fitter::ValidateConfig(*config); !s.ok()) return InSpec(s);
  return config;
}

absl::StatusOr<std::vector<xmod::v1::Run>> SeedRuns(const xmod::v1::SweepSpec& spec,
                                                    const std::vector<xmod::v1::Run>& expanded) {
  absl::StatusOr<fitter::AdaptiveConfig> config = AdaptiveConfigOf(spec);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::vector<fitter::Candidate>> seed = fitter::SeedDesign(*config);
  if (!seed.ok()) return InSpec(seed.status());
  std::vector<xmod::v1::Run> out;
  std::set<std::string> taken;
  for (const fitter::Candidate& c : *seed) {
    bool found = false;
    for (const xmod::v1::Run& run : expanded) {  // every replicate (GridSpec.seeds)
      if (Matches(c, run) && taken.insert(run.name()).second) {
        out.push_back(run);
        found = true;
      }
    }
    if (!found && !std::any_of(out.begin(), out.end(),
                               [&](const xmod::v1::Run& r) { return Matches(c, r); })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grids: the seed run ", c.Describe(), " of the adaptive design is not in the grids"));
    }
  }
  return out;
}

// Holds `sweep_id` in deciding_ for its lifetime; waits while another decision holds it.
class AdaptiveController::SweepGuard {
 public:
  SweepGuard(AdaptiveController* controller, int64_t sweep_id)
      : controller_(controller), sweep_id_(sweep_id) {
    absl::MutexLock lock(&controller_->sweeps_mu_);
    while (controller_->deciding_.count(sweep_id_) > 0) {
      controller_->sweep_released_.Wait(&controller_->sweeps_mu_);
    }
    controller_->deciding_.insert(sweep_id_);
  }
  ~SweepGuard() {
    absl::MutexLock lock(&controller_->sweeps_mu_);
    controller_->deciding_.erase(sweep_id_);
    controller_->sweep_released_.SignalAll();
  }
  SweepGuard(const SweepGuard&) = delete;
  SweepGuard& operator=(const SweepGuard&) = delete;

 private:
  AdaptiveController* const controller_;
  const int64_t sweep_id_;
};

AdaptiveController::AdaptiveController(Store* store, Scheduler* scheduler, Clock* clock,
                                       prometheus::Registry* registry,
                                       AdaptiveControllerOptions options)
    : store_(store), scheduler_(scheduler), clock_(clock), options_(std::move(options)) {
  if (registry != nullptr) {
    auto& decisions = prometheus::BuildCounter()
                          .Name("xmod_design_decisions_total")
                          .Help("Decisions of law-guided designs, by result")
                          .Register(*registry);
    decisions_ok_ = &decisions.Add({{"result", "ok"}});
    decisions_error_ = &decisions.Add({{"result", "error"}});
    spent_ = &prometheus::BuildGauge()
                  .Name("xmod_design_compute_spent_flops")
                  .Help("Training FLOPs of an adaptive sweep's runs done or in flight")
                  .Register(*registry);
    budget_ = &prometheus::BuildGauge()
                   .Name("xmod_design_compute_budget_flops")
                   .Help("Training-FLOP budget of an adaptive sweep")
                   .Register(*registry);
    stopped_ = &prometheus::BuildGauge()
                    .Name("xmod_design_stopped")
                    .Help("1 once an adaptive sweep's design has stopped")
                    .Register(*registry);
    regret_ = &prometheus::BuildGauge()
                   .Name("xmod_design_expected_regret")
                   .Help("Largest expected regret (nats) over an adaptive sweep's targets")
                   .Register(*registry);
  }
  thread_ = std::thread([this] { Loop(); });
}

AdaptiveController::~AdaptiveController() { Shutdown(); }

void AdaptiveController::Shutdown() {
  shutting_down_ = true;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void AdaptiveController::Poll() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void AdaptiveController::WaitIdle() {
  Poll();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](AdaptiveController* c) { return c->stopping_ || (!c->wake_ && !c->busy_); }, this));
}

void AdaptiveController::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AdaptiveController* c) { return c->stopping_ || c->wake_; }, this));
      if (stopping_) return;
      wake_ = false;
      busy_ = true;
    }
    PollOnce();
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void AdaptiveController::PollOnce() {
  // Sweeps not cancelled, with their spec (read the first time a sweep is seen) and the run
  // counts that make a decision due (Signature), in one grouped query.
  struct Row {
    int64_t sweep_id;
    std::string spec;
    std::vector<int64_t> signature;
  };
  std::vector<Row> sweeps;
  absl::Status status = store_->Read([&](Db& db) {
    absl::StatusOr<Stmt> select = db.Prepare(
        "SELECT s.id, s.spec, TOTAL(r.state = 'SUCCEEDED'), TOTAL(r.state = 'FAILED'), "
        "TOTAL(r.state = 'CANCELLED'), COUNT(r.id) "
        "FROM sweeps s LEFT JOIN runs r ON r.sweep_id = s.id WHERE s.cancelled = 0 "
        "GROUP BY s.id");
    if (!select.ok()) return select.status();
    while (true) {
      absl::StatusOr<bool> row = select->Step();
      if (!row.ok()) return row.status();
      if (!*row) return absl::OkStatus();
      sweeps.push_back(
          {select->Int(0),
           select->Text(1),
           {static_cast<int64_t>(select->Double(2)), static_cast<int64_t>(select->Double(3)),
            static_cast<int64_t>(select->Double(4)), select->Int(5)}});
    }
  });
  if (!status.ok()) {
    LOG(WARNING) << "adaptive designs: " << status;
    return;
  }
  for (const Row& row : sweeps) {
    bool due = false;
    {
      absl::MutexLock lock(&sweeps_mu_);
      auto [it, inserted] = seen_.try_emplace(row.sweep_id);
      if (inserted) {
        xmod::v1::SweepSpec spec;
        spec.ParseFromString(row.spec);
        it->second.adaptive = spec.adaptive().enabled();
      }
      due = it->second.adaptive && !it->second.stopped && it->second.signature != row.signature;
    }
    if (!due) continue;
    xmod::v1::ProposeRunsRequest ask;
    ask.set_sweep_id(row.sweep_id);
    absl::StatusOr<xmod::v1::DesignDecision> decision = Decide(row.sweep_id, ask, true, nullptr);
    if (absl::IsUnavailable(decision.status()) && shutting_down_) return;  // stopped, unstored
    if (!decision.ok()) {
      LOG(WARNING) << "adaptive design of sweep " << row.sweep_id << ": " << decision.status();
      if (decisions_error_ != nullptr) decisions_error_->Increment();
      absl::MutexLock lock(&sweeps_mu_);
      seen_[row.sweep_id].signature = row.signature;  // retried when its runs change
    }
  }
}

absl::StatusOr<xmod::v1::DesignDecision> AdaptiveController::Propose(
    const xmod::v1::ProposeRunsRequest& request, const std::function<bool()>& caller_gone) {
  if (shutting_down_) return Interrupted(nullptr);
  if (request.sweep_id() <= 0) {
    return absl::InvalidArgumentError(request.study().empty()
                                          ? "sweep_id: must be > 0"
                                          : "sweep_id: name the member sweep of the study that the "
                                            "candidates come from (and submitted runs go to)");
  }
  if (absl::Status s = CheckRange("count", request.count(), 0, kMaxProposals); !s.ok()) return s;
  if (absl::Status s = CheckRange("targets", request.targets_size(), 0, kMaxDesignTargets);
      !s.ok()) {
    return s;
  }
  if (request.compute_left() < 0) {
    return absl::InvalidArgumentError("compute_left: must be >= 0");
  }
  if (request.bootstrap_samples() < 0 || request.bootstrap_samples() == 1) {
    return absl::InvalidArgumentError("bootstrap_samples: must be 0 or >= 2");
  }
  if (absl::Status s = CheckRange("bootstrap_samples", request.bootstrap_samples(), 0,
                                  options_.max_ensemble_size);
      !s.ok()) {
    return s;
  }
  return Decide(request.sweep_id(), request, false, caller_gone);
}

absl::Status AdaptiveController::Interrupted(const std::function<bool()>& caller_gone) const {
  if (shutting_down_) {
    return absl::UnavailableError(
        "the coordinator is shutting down: the design decision was stopped and stored nothing");
  }
  if (caller_gone && caller_gone()) {
    return absl::CancelledError(
        "the caller went away: the design decision was stopped and stored nothing");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<xmod::v1::DesignDecision>> AdaptiveController::Decisions(
    int64_t sweep_id, int limit) {
  std::vector<xmod::v1::DesignDecision> out;
  absl::Status status = store_->Read([&](Db& db) {
    if (absl::StatusOr<xmod::v1::Sweep> sweep = LoadSweep(db, sweep_id); !sweep.ok()) {
      return sweep.status();
    }
    absl::StatusOr<std::vector<xmod::v1::DesignDecision>> d = LoadDecisions(db, sweep_id, limit);
    if (!d.ok()) return d.status();
    out = *std::move(d);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<xmod::v1::DesignDecision> AdaptiveController::Decide(
    int64_t sweep_id, const xmod::v1::ProposeRunsRequest& ask, bool adaptive,
    const std::function<bool()>& caller_gone) {
  const bool stores = adaptive || ask.submit();
  std::optional<SweepGuard> guard;
  if (stores) guard.emplace(this, sweep_id);
  // The controller goes on from its own decisions; a proposal compares with any stored one.
  absl::StatusOr<SweepSnapshot> snap =
      ReadSnapshot(store_, sweep_id, ask.study(), adaptive ? "adaptive" : "");
  if (!snap.ok()) return snap.status();
  const std::vector<int64_t> signature = Signature(snap->runs);
  if (adaptive && snap->last && snap->last->stop()) {
    absl::MutexLock lock(&sweeps_mu_);
    seen_[sweep_id].stopped = true;  // decided before a restart
    return *snap->last;
  }
  if (stores && snap->sweep.state() == xmod::v1::SWEEP_CANCELLED) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " was cancelled"));
  }
  const xmod::v1::SweepSpec& spec = snap->sweep.spec();
  absl::StatusOr<std::vector<xmod::v1::Run>> expanded = ExpandCandidates(spec);
  if (!expanded.ok()) return expanded.status();
  absl::StatusOr<fitter::AdaptiveConfig> config = ConfigOf(spec, *expanded);
  if (!config.ok()) return config.status();
  fitter::DesignState state = StateOf(*snap);
  int in_flight = 0;
  for (const xmod::v1::Run& run : snap->runs) in_flight += InFlight(run) ? 1 : 0;
  int to_queue = 0;
  if (adaptive) {
    to_queue = std::max(0, config->max_proposals - in_flight);
    config->max_proposals = std::max(1, to_queue);
  } else {
    if (ask.targets_size() > 0) {
      absl::StatusOr<std::vector<fitter::Target>> targets = TargetsOf(ask.targets(), "targets");
      if (!targets.ok()) return targets.status();
      config->targets = *std::move(targets);
    }
    if (config->targets.empty()) {
      return absl::InvalidArgumentError(
          "targets: give at least one target (the sweep has no adaptive targets)");
    }
    if (ask.compute_left() > 0) {
      config->compute_budget = state.compute_spent + ask.compute_left();
    } else if (!(config->compute_budget > 0)) {
      config->compute_budget = kUnlimitedCompute;
    }
    if (ask.bootstrap_samples() > 0) config->bootstrap_samples = ask.bootstrap_samples();
    if (ask.seed() != 0) config->seed = ask.seed();
    config->max_proposals = ask.count() > 0 ? ask.count() : kDefaultProposals;
    to_queue = ask.submit() ? config->max_proposals : 0;
  }
  // Specs stored before the limits existed are held to them.
  config->bootstrap_samples = std::min(config->bootstrap_samples, options_.max_ensemble_size);
  config->max_proposals = std::min(config->max_proposals, kMaxProposals);
  if (absl::Status s = fitter::ValidateConfig(*config); !s.ok()) {
    return adaptive || !absl::StartsWith(s.message(), "targets") ? InSpec(s) : s;
  }
  config->cancelled = [&] { return !Interrupted(caller_gone).ok(); };
  if (options_.TEST_before_decide) options_.TEST_before_decide(sweep_id, config->cancelled);
  absl::StatusOr<fitter::Decision> decided = fitter::Decide(*config, state);
  if (absl::Status s = Interrupted(caller_gone); !s.ok()) return s;  // before anything is stored
  if (!decided.ok()) return decided.status();

  xmod::v1::DesignDecision decision = DecisionProto(*decided);
  decision.set_sweep_id(sweep_id);
  decision.set_created_unix_ms(clock_->NowMillis());
  decision.set_source(adaptive ? "adaptive" : "propose");
  decision.set_study(ask.study());
  decision.set_compute_spent(state.compute_spent);
  decision.set_compute_budget(config->compute_budget < kUnlimitedCompute ? config->compute_budget
                                                                         : 0);
  decision.set_observations(static_cast<int>(state.completed.size()));

  // The runs to queue: the top proposals (and their dense references), skipping runs the
  // sweep already has by name.
  std::set<std::string> names;
  for (const xmod::v1::Run& run : snap->runs) names.insert(run.name());
  std::vector<xmod::v1::Run> runs;
  std::vector<std::pair<int, size_t>> queued;  // (proposal index, index in runs)
  if (!decided->stop) {
    for (int i = 0; i < decision.proposals_size() && static_cast<int>(queued.size()) < to_queue;
         ++i) {
      const fitter::Proposal& p = decided->ranked[i];
      std::vector<fitter::Candidate> wanted;
      if (p.needs_dense && !p.run.IsDense()) {
        wanted.push_back({p.run.backbone, p.run.seq_len, 1, 1, p.run.flops});
      }
      wanted.push_back(p.run);
      for (const fitter::Candidate& c : wanted) {
        std::optional<xmod::v1::Run> run = RunFor(c, *expanded);
        if (!run) {
          return absl::InternalError(
              absl::StrCat("proposal ", c.Describe(), " is not a run of the sweep's grids"));
        }
        if (!names.insert(run->name()).second) continue;
        if (&c == &wanted.back()) queued.emplace_back(i, runs.size());
        runs.push_back(*std::move(run));
      }
    }
  }
  if (adaptive && !decision.stop() && runs.empty() && in_flight == 0) {
    // What it proposes was tried and ended without success: waiting would wait forever.
    decision.set_stop(true);
    decision.set_stop_reason(
        "no proposal can be queued: the runs proposed already ended without success");
  }
  if (!stores) {
    if (decisions_ok_ != nullptr) decisions_ok_->Increment();
    return decision;  // a look, not a step of the design: nothing is stored
  }
  absl::Status stored;
  if (runs.empty()) {
    stored = store_->WriteAndWait([&](Db& db) { return InsertDecision(db, &decision).status(); });
  } else {
    stored = scheduler_->AddRuns(sweep_id, &runs, [&](Db& db) {
      for (const auto& [proposal, run] : queued) {
        decision.mutable_proposals(proposal)->set_run_id(runs[run].id());
      }
      return InsertDecision(db, &decision).status();
    });
  }
  if (!stored.ok()) return stored;
  if (adaptive) {
    std::vector<int64_t> after = signature;
    after[3] += static_cast<int64_t>(runs.size());
    absl::MutexLock lock(&sweeps_mu_);
    Seen& seen = seen_[sweep_id];
    seen.signature = after;
    seen.stopped = decision.stop();
  }
  if (decisions_ok_ != nullptr) decisions_ok_->Increment();
  if (adaptive && spent_ != nullptr) {
    const prometheus::Labels labels{{"sweep", std::to_string(sweep_id)}};
    spent_->Add(labels).Set(decision.compute_spent());
    budget_->Add(labels).Set(decision.compute_budget());
    stopped_->Add(labels).Set(decision.stop() ? 1 : 0);
    double regret = 0;
    for (const auto& r : decision.recommendations()) regret = std::max(regret, r.expected_regret());
    regret_->Add(labels).Set(regret);
  }
  LOG(INFO) << "sweep " << sweep_id << " design decision " << decision.id() << " ("
            << decision.source() << "): " << decision.proposals_size() << " proposals, "
            << runs.size() << " runs queued" << (decision.stop() ? ", stop: " : "")
            << decision.stop_reason();
  return decision;
}

}  // namespace xmod
