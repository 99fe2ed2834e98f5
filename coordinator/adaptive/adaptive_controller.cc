// See adaptive_controller.h. A decision is one of two kinds, each its own function: the
// controller's step of an adaptive sweep's design (DecideDesignStep) and a ProposeRuns
// answer (DecideProposal). Both read a snapshot (design_snapshot.h), take the candidate
// space from the stored spec's grids (seeding.h), fit (Fit) and queue and store what they
// decide (StoreDecision).
#include "coordinator/adaptive/adaptive_controller.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "coordinator/adaptive/design_snapshot.h"
#include "coordinator/adaptive/seeding.h"
#include "coordinator/spec/request_limits.h"
#include "coordinator/store/design_rows.h"
#include "coordinator/store/design_store.h"
#include "coordinator/store/event_rows.h"
#include "glog/logging.h"

namespace xmod {

// The runs a decision queues and the proposals they train.
struct QueuedRuns {
  std::vector<xmod::v1::Run> runs;
  std::vector<std::pair<int, size_t>> proposals;  // (proposal index, index in runs)
};

namespace {

constexpr int kDefaultProposals = 5;
// ProposeRuns without compute_left: no limit worth naming.
constexpr double kUnlimitedCompute = 1e300;

// What a decision works from: its snapshot, the candidate runs of the sweep's grids, the
// design's configuration (defaults filled in) and the fitter's state.
struct DecisionInputs {
  SweepSnapshot snap;
  std::vector<xmod::v1::Run> candidates;
  fitter::AdaptiveConfig config;
  fitter::DesignState state;
  int in_flight = 0;  // runs of the sweep queued or running
};

absl::StatusOr<DecisionInputs> InputsOf(SweepSnapshot snap) {
  DecisionInputs in;
  in.snap = std::move(snap);
  const xmod::v1::SweepSpec& spec = in.snap.sweep.spec();
  absl::StatusOr<std::vector<xmod::v1::Run>> candidates = ExpandCandidates(spec);
  if (!candidates.ok()) return candidates.status();
  in.candidates = *std::move(candidates);
  absl::StatusOr<fitter::AdaptiveConfig> config = DesignSpaceOf(spec, in.candidates);
  if (!config.ok()) return config.status();
  in.config = *std::move(config);
  in.state = StateOf(in.snap);
  for (const xmod::v1::Run& run : in.snap.runs) in.in_flight += InFlight(run) ? 1 : 0;
  return in;
}

// The request's settings over the sweep's (ProposeRuns): targets, compute left, ensemble,
// seed and count. INVALID_ARGUMENT when there is no target at all.
absl::Status ApplyAsk(const xmod::v1::ProposeRunsRequest& ask, DecisionInputs* in) {
  fitter::AdaptiveConfig& config = in->config;
  if (ask.targets_size() > 0) {
    absl::StatusOr<std::vector<fitter::Target>> targets = TargetsOf(ask.targets(), "targets");
    if (!targets.ok()) return targets.status();
    config.targets = *std::move(targets);
  }
  if (config.targets.empty()) {
    return InvalidField("targets", "give at least one target (the sweep has no adaptive targets)");
  }
  if (ask.compute_left() > 0) {
    config.compute_budget = in->state.compute_spent + ask.compute_left();
  } else if (!(config.compute_budget > 0)) {
    config.compute_budget = kUnlimitedCompute;
  }
  if (ask.bootstrap_samples() > 0) config.bootstrap_samples = ask.bootstrap_samples();
  if (ask.seed() != 0) config.seed = ask.seed();
  config.max_proposals = ask.count() > 0 ? ask.count() : kDefaultProposals;
  return absl::OkStatus();
}

// The decision as stored and answered, before its runs are queued.
xmod::v1::DesignDecision DescribeDecision(const fitter::Decision& decided, const DecisionInputs& in,
                                          int64_t sweep_id, int64_t now_ms,
                                          const std::string& source, const std::string& study) {
  xmod::v1::DesignDecision decision = DecisionProto(decided);
  decision.set_sweep_id(sweep_id);
  decision.set_created_unix_ms(now_ms);
  decision.set_source(source);
  decision.set_study(study);
  decision.set_compute_spent(in.state.compute_spent);
  decision.set_compute_budget(
      in.config.compute_budget < kUnlimitedCompute ? in.config.compute_budget : 0);
  decision.set_observations(static_cast<int>(in.state.completed.size()));
  return decision;
}

// The top `to_queue` proposals of `decided` (and their dense references) as runs of the
// sweep's grids, skipping runs the sweep already has by name; none once it stops.
absl::StatusOr<QueuedRuns> RunsToQueue(const fitter::Decision& decided, const DecisionInputs& in,
                                       int to_queue) {
  QueuedRuns queued;
  if (decided.stop) return queued;
  std::set<std::string> names;
  for (const xmod::v1::Run& run : in.snap.runs) names.insert(run.name());
  const int proposals = static_cast<int>(decided.ranked.size());
  for (int i = 0; i < proposals && static_cast<int>(queued.proposals.size()) < to_queue; ++i) {
    const fitter::Proposal& p = decided.ranked[i];
    std::vector<fitter::Candidate> wanted;
    if (p.needs_dense && !p.run.IsDense()) {
      wanted.push_back({p.run.backbone, p.run.seq_len, 1, 1, p.run.flops});
    }
    wanted.push_back(p.run);
    for (const fitter::Candidate& c : wanted) {
      std::optional<xmod::v1::Run> run = RunFor(c, in.candidates);
      if (!run) {
        return absl::InternalError(
            absl::StrCat("proposal ", c.Describe(), " is not a run of the sweep's grids"));
      }
      if (!names.insert(run->name()).second) continue;
      if (&c == &wanted.back()) queued.proposals.emplace_back(i, queued.runs.size());
      queued.runs.push_back(*std::move(run));
    }
  }
  return queued;
}

// Specs stored before the limits existed are held to them; then fitter::ValidateConfig.
absl::Status ClampAndValidate(int max_ensemble_size, fitter::AdaptiveConfig* config) {
  config->bootstrap_samples = std::min(config->bootstrap_samples, max_ensemble_size);
  config->max_proposals = std::min(config->max_proposals, kMaxProposals);
  return fitter::ValidateConfig(*config);
}

// A proposal's inputs: the snapshot (a proposal compares with any stored decision) with the
// request's settings applied. FAILED_PRECONDITION when the sweep to submit to was cancelled.
absl::StatusOr<DecisionInputs> ProposalInputs(Store* store,
                                              const xmod::v1::ProposeRunsRequest& ask) {
  absl::StatusOr<SweepSnapshot> snap = ReadSnapshot(store, ask.sweep_id(), ask.study(), "");
  if (!snap.ok()) return snap.status();
  if (ask.submit() && snap->sweep.state() == xmod::v1::SWEEP_CANCELLED) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", ask.sweep_id(), " was cancelled"));
  }
  absl::StatusOr<DecisionInputs> in = InputsOf(*std::move(snap));
  if (!in.ok()) return in.status();
  if (absl::Status s = ApplyAsk(ask, &*in); !s.ok()) return s;
  return in;
}

// The request's targets are named as the request names them; the rest is the spec's.
absl::Status AsProposalError(const absl::Status& s) {
  const std::optional<std::string> path = FieldPathOf(s);
  return path && absl::StartsWith(*path, "targets") ? s : InSpec(s);
}

void LogDecision(const xmod::v1::DesignDecision& decision, size_t runs_queued) {
  LOG(INFO) << "sweep " << decision.sweep_id() << " design decision " << decision.id() << " ("
            << decision.source() << "): " << decision.proposals_size() << " proposals, "
            << runs_queued << " runs queued" << (decision.stop() ? ", stop: " : "")
            << decision.stop_reason();
}

}  // namespace

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

AdaptiveController::AdaptiveController(Store* store, Scheduler* scheduler, ChangeFeed* feed,
                                       Clock* clock, prometheus::Registry* registry,
                                       AdaptiveControllerOptions options)
    : store_(store),
      scheduler_(scheduler),
      feed_(feed),
      clock_(clock),
      options_(std::move(options)) {
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
  std::vector<SweepRunCounts> sweeps;
  absl::Status status = store_->Read([&](Db& db) {
    absl::StatusOr<std::vector<SweepRunCounts>> counts = LoadSweepRunCounts(db);
    if (!counts.ok()) return counts.status();
    sweeps = *std::move(counts);
    return absl::OkStatus();
  });
  if (!status.ok()) {
    LOG(WARNING) << "adaptive designs: " << status;
    return;
  }
  for (const SweepRunCounts& row : sweeps) {
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
    absl::StatusOr<xmod::v1::DesignDecision> decision = DecideDesignStep(row.sweep_id);
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
    const xmod::v1::ProposeRunsRequest& request, const std::function<bool()>& caller_gone,
    const std::optional<std::string>& actor) {
  if (shutting_down_) return Interrupted(nullptr);
  if (request.sweep_id() <= 0) {
    return InvalidField("sweep_id", request.study().empty()
                                        ? "must be > 0"
                                        : "name the member sweep of the study that the candidates "
                                          "come from (and submitted runs go to)");
  }
  if (absl::Status s = CheckRange("count", request.count(), 0, kMaxProposals); !s.ok()) return s;
  if (absl::Status s = CheckRange("targets", request.targets_size(), 0, kMaxDesignTargets);
      !s.ok()) {
    return s;
  }
  if (request.compute_left() < 0) {
    return InvalidField("compute_left", "must be >= 0");
  }
  if (request.bootstrap_samples() < 0 || request.bootstrap_samples() == 1) {
    return InvalidField("bootstrap_samples", "must be 0 or >= 2");
  }
  if (absl::Status s = CheckRange("bootstrap_samples", request.bootstrap_samples(), 0,
                                  options_.max_ensemble_size);
      !s.ok()) {
    return s;
  }
  return DecideProposal(request, caller_gone, actor);
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

absl::StatusOr<xmod::v1::DesignDecision> AdaptiveController::DecideDesignStep(int64_t sweep_id) {
  SweepGuard guard(this, sweep_id);
  // The controller goes on from its own decisions.
  absl::StatusOr<SweepSnapshot> snap = ReadSnapshot(store_, sweep_id, "", "adaptive");
  if (!snap.ok()) return snap.status();
  const std::vector<int64_t> signature = Signature(snap->runs);
  if (snap->last && snap->last->stop()) {
    absl::MutexLock lock(&sweeps_mu_);
    seen_[sweep_id].stopped = true;  // decided before a restart
    return *snap->last;
  }
  if (snap->sweep.state() == xmod::v1::SWEEP_CANCELLED) {
    return absl::FailedPreconditionError(absl::StrCat("sweep ", sweep_id, " was cancelled"));
  }
  absl::StatusOr<DecisionInputs> in = InputsOf(*std::move(snap));
  if (!in.ok()) return in.status();
  // Queue up to max_in_flight runs, counting those in flight.
  const int to_queue = std::max(0, in->config.max_proposals - in->in_flight);
  in->config.max_proposals = std::max(1, to_queue);
  if (absl::Status s = ClampAndValidate(options_.max_ensemble_size, &in->config); !s.ok()) {
    return InSpec(s);
  }
  absl::StatusOr<fitter::Decision> decided = Fit(sweep_id, in->config, in->state, nullptr);
  if (!decided.ok()) return decided.status();
  xmod::v1::DesignDecision decision =
      DescribeDecision(*decided, *in, sweep_id, clock_->NowMillis(), "adaptive", "");
  absl::StatusOr<QueuedRuns> queued = RunsToQueue(*decided, *in, to_queue);
  if (!queued.ok()) return queued.status();
  if (!decision.stop() && queued->runs.empty() && in->in_flight == 0) {
    // What it proposes was tried and ended without success: waiting would wait forever.
    decision.set_stop(true);
    decision.set_stop_reason(
        "no proposal can be queued: the runs proposed already ended without success");
  }
  if (absl::Status s = StoreDecision(sweep_id, &*queued, &decision, std::nullopt); !s.ok()) {
    return s;
  }
  RecordDesignStep(decision, signature, queued->runs.size());
  LogDecision(decision, queued->runs.size());
  return decision;
}

absl::StatusOr<xmod::v1::DesignDecision> AdaptiveController::DecideProposal(
    const xmod::v1::ProposeRunsRequest& ask, const std::function<bool()>& caller_gone,
    const std::optional<std::string>& actor) {
  const int64_t sweep_id = ask.sweep_id();
  std::optional<SweepGuard> guard;
  if (ask.submit()) guard.emplace(this, sweep_id);
  absl::StatusOr<DecisionInputs> in = ProposalInputs(store_, ask);
  if (!in.ok()) return in.status();
  const int to_queue = ask.submit() ? in->config.max_proposals : 0;
  if (absl::Status s = ClampAndValidate(options_.max_ensemble_size, &in->config); !s.ok()) {
    return AsProposalError(s);
  }
  absl::StatusOr<fitter::Decision> decided = Fit(sweep_id, in->config, in->state, caller_gone);
  if (!decided.ok()) return decided.status();
  xmod::v1::DesignDecision decision =
      DescribeDecision(*decided, *in, sweep_id, clock_->NowMillis(), "propose", ask.study());
  absl::StatusOr<QueuedRuns> queued = RunsToQueue(*decided, *in, to_queue);
  if (!queued.ok()) return queued.status();
  if (!ask.submit()) {
    if (decisions_ok_ != nullptr) decisions_ok_->Increment();
    return decision;  // a look, not a step of the design: nothing is stored
  }
  if (absl::Status s = StoreDecision(sweep_id, &*queued, &decision, actor); !s.ok()) return s;
  if (decisions_ok_ != nullptr) decisions_ok_->Increment();
  LogDecision(decision, queued->runs.size());
  return decision;
}

absl::StatusOr<fitter::Decision> AdaptiveController::Fit(int64_t sweep_id,
                                                         const fitter::AdaptiveConfig& config,
                                                         const fitter::DesignState& state,
                                                         const std::function<bool()>& caller_gone) {
  fitter::AdaptiveConfig fitting = config;
  fitting.cancelled = [&] { return !Interrupted(caller_gone).ok(); };
  if (options_.TEST_before_decide) options_.TEST_before_decide(sweep_id, fitting.cancelled);
  absl::StatusOr<fitter::Decision> decided = fitter::Decide(fitting, state);
  if (absl::Status s = Interrupted(caller_gone); !s.ok()) return s;  // before anything is stored
  return decided;
}

absl::Status AdaptiveController::StoreDecision(int64_t sweep_id, QueuedRuns* queued,
                                               xmod::v1::DesignDecision* decision,
                                               const std::optional<std::string>& actor) {
  const int64_t now = clock_->NowMillis();
  // The decision's row, and for a user's proposal its event.
  const auto insert = [&](Db& db) -> absl::Status {
    absl::StatusOr<int64_t> id = InsertDecision(db, decision);
    if (!id.ok() || !actor.has_value()) return id.status();
    return InsertEvent(db, now, xmod::v1::EVENT_PROPOSAL_SUBMITTED, sweep_id, 0,
                       absl::StrCat("decision ", *id, ": ", queued->runs.size(), " runs queued"),
                       actor);
  };
  absl::Status stored;
  if (queued->runs.empty()) {
    stored = store_->WriteAndWait(insert);
  } else {
    stored = scheduler_->AddRuns(
        sweep_id, &queued->runs,
        [&](Db& db) {
          for (const auto& [proposal, run] : queued->proposals) {
            decision->mutable_proposals(proposal)->set_run_id(queued->runs[run].id());
          }
          return insert(db);
        },
        actor);
  }
  // A stop with nothing in flight is the sweep's end: its watchers must read the sweep again.
  if (stored.ok()) feed_->Publish(sweep_id, 0);
  return stored;
}

void AdaptiveController::RecordDesignStep(const xmod::v1::DesignDecision& decision,
                                          std::vector<int64_t> signature, size_t runs_queued) {
  signature[3] += static_cast<int64_t>(runs_queued);
  {
    absl::MutexLock lock(&sweeps_mu_);
    Seen& seen = seen_[decision.sweep_id()];
    seen.signature = std::move(signature);
    seen.stopped = decision.stop();
  }
  if (decisions_ok_ != nullptr) decisions_ok_->Increment();
  if (spent_ == nullptr) return;
  const prometheus::Labels labels{{"sweep", std::to_string(decision.sweep_id())}};
  spent_->Add(labels).Set(decision.compute_spent());
  budget_->Add(labels).Set(decision.compute_budget());
  stopped_->Add(labels).Set(decision.stop() ? 1 : 0);
  double regret = 0;
  for (const auto& r : decision.recommendations()) regret = std::max(regret, r.expected_regret());
  regret_->Add(labels).Set(regret);
}

}  // namespace xmod
