// AdaptiveController: runs law-guided adaptive sweeps and answers ProposeRuns
// (docs/adaptive-design.md; the criterion and the stopping rule are fitter/adaptive_design.h).
//
// An adaptive sweep (SweepSpec.adaptive.enabled) is submitted with only its seed set
// (seeding.h: ExpandForSubmission). The controller's thread then wakes at every Poll() (the
// coordinator's ticker) and, for each adaptive sweep that has not stopped and whose run counts
// changed since its last decision (a run succeeded, failed or was cancelled, or the queue drained),
// makes a decision: the sweep's succeeded runs become observations (as the fit trigger builds
// them), its queued and running runs the in-flight set, fitter::Decide ranks the candidates of the
// spec's grids, and the best proposals are queued as new runs of the sweep until
// max_in_flight runs are queued or running. The decision (proposals with their reasons and
// run ids, the recommendation per target, the point fit, compute spent, stop) is stored in
// the same transaction as the runs it queued (design_decisions, design_proposals). A stored
// decision with stop set ends the design; the sweep ends when its last run does, and a stored
// decision (stop or not) is published on the change feed as a change of the sweep (run id 0),
// so every open WatchSweep stream reads the sweep again and ends with it when the stop was
// the sweep's end. After a restart the controller reads the latest decision of each sweep and
// goes on.
//
// Metrics: xmod_design_decisions_total{result="ok"|"error"}, and per adaptive sweep
// xmod_design_compute_spent_flops{sweep}, xmod_design_compute_budget_flops{sweep},
// xmod_design_stopped{sweep}, xmod_design_expected_regret{sweep} (the largest over targets).
//
// ProposeRuns without submit stores nothing: it reads one snapshot, decides and answers. The
// controller's previous answer (streak, stop) is always its own latest decision (source
// "adaptive"), never a proposal.
//
// Stopping. A decision's fit stops within moments (fitter::AdaptiveConfig::cancelled, polled
// before every bootstrap refit and every candidate valued) when its caller goes away
// (CANCELLED) or the controller shuts down (UNAVAILABLE); a stopped decision stores nothing.
// How many proposals fit at once is the caller's to bound (CoordinatorService caps them).
//
// Thread-safe. Decisions that store (the thread's, submitted proposals) are serialized per
// sweep (a sweep guard held from the read to the write, so two never queue the same run);
// no lock shared across sweeps is held while a decision fits its ensemble.
#ifndef XMOD_COORDINATOR_ADAPTIVE_ADAPTIVE_CONTROLLER_H_
#define XMOD_COORDINATOR_ADAPTIVE_ADAPTIVE_CONTROLLER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/scheduling/scheduler.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"
#include "fitter/adaptive_design.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/types.pb.h"

namespace xmod {

struct QueuedRuns;  // adaptive_controller.cc

struct AdaptiveControllerOptions {
  // Most members of a decision's ensemble: ProposeRuns.bootstrap_samples beyond it is
  // refused; a stored spec's adaptive.bootstrap_samples beyond it is clamped.
  int max_ensemble_size = SpecLimits().max_ensemble_size;
  // Test hook: called before each decision's fit (fitter::Decide) with the sweep id and what
  // the fit polls to stop (true once its caller went away or the controller shuts down),
  // outside any lock; a test may block in it to hold a fit "running".
  std::function<void(int64_t sweep_id, const std::function<bool()>& stopping)> TEST_before_decide;
};

class AdaptiveController {
 public:
  // Starts the decision thread. `store`, `scheduler`, `feed` and `clock` must outlive the
  // controller; `registry` may be null (no metrics). Stored decisions are published on `feed`.
  AdaptiveController(Store* store, Scheduler* scheduler, ChangeFeed* feed, Clock* clock,
                     prometheus::Registry* registry, AdaptiveControllerOptions options = {});
  ~AdaptiveController();
  AdaptiveController(const AdaptiveController&) = delete;
  AdaptiveController& operator=(const AdaptiveController&) = delete;

  // Wakes the thread to look for adaptive sweeps that need a decision.
  void Poll();

  // One decision for the sweep (ProposeRuns): targets from the request or the sweep's
  // AdaptiveSpec. Without submit it is answered and not stored (id 0); with submit, its top
  // `count` proposals are queued as runs of the sweep and it is stored with source "propose".
  // NOT_FOUND for an unknown sweep, INVALID_ARGUMENT naming the request field
  // (targets[i].backbone, count, bootstrap_samples past its limit, ...) or the spec field it
  // inherits. `caller_gone` (may be empty) is polled while it fits: once it returns true the
  // fit stops, CANCELLED; UNAVAILABLE during and after Shutdown(). Either stores nothing.
  // A submitted decision is stored with an EVENT_PROPOSAL_SUBMITTED event whose actor is `actor`
  // (the credential that asked; whether it may change the sweep is the caller's to check).
  absl::StatusOr<xmod::v1::DesignDecision> Propose(
      const xmod::v1::ProposeRunsRequest& request,
      const std::function<bool()>& caller_gone = nullptr,
      const std::optional<std::string>& actor = std::nullopt);

  // Blocks until every adaptive sweep's counts have been decided on. For tests.
  void WaitIdle();
  // Stops the decisions in progress (they store nothing) and the thread. Idempotent.
  void Shutdown();

 private:
  struct Seen {
    bool adaptive = false;
    bool stopped = false;
    std::vector<int64_t> signature;  // run counts at its last decision
  };
  class SweepGuard;  // holds one sweep in deciding_ (adaptive_controller.cc)
  void Loop();
  // One pass over the sweeps; returns when each was decided on or skipped.
  void PollOnce();
  // The controller's step of an adaptive sweep's design, under the sweep's guard: decides
  // on its latest counts, queues up to max_in_flight runs in flight and stores the decision
  // (source "adaptive"); the stored decision when the design had stopped.
  absl::StatusOr<xmod::v1::DesignDecision> DecideDesignStep(int64_t sweep_id);
  // A ProposeRuns decision (see Propose); with ask.submit(), under the sweep's guard from
  // the read to the write.
  absl::StatusOr<xmod::v1::DesignDecision> DecideProposal(const xmod::v1::ProposeRunsRequest& ask,
                                                          const std::function<bool()>& caller_gone,
                                                          const std::optional<std::string>& actor);
  // fitter::Decide of `config` over `state`, stopping once `caller_gone` returns true or the
  // controller shuts down (see Interrupted).
  absl::StatusOr<fitter::Decision> Fit(int64_t sweep_id, const fitter::AdaptiveConfig& config,
                                       const fitter::DesignState& state,
                                       const std::function<bool()>& caller_gone);
  // Stores `decision` and queues `queued`'s runs in one transaction, setting the run ids of
  // the proposals they train; `actor` (nullopt: the controller's own decision) is the events'.
  absl::Status StoreDecision(int64_t sweep_id, QueuedRuns* queued,
                             xmod::v1::DesignDecision* decision,
                             const std::optional<std::string>& actor);
  // After a design step: the counts it decided on (`signature` plus the runs it queued),
  // whether it stopped, and the sweep's metrics.
  void RecordDesignStep(const xmod::v1::DesignDecision& decision, std::vector<int64_t> signature,
                        size_t runs_queued);
  // OK while the decision may go on; UNAVAILABLE once the controller shuts down, CANCELLED
  // once `caller_gone` (may be empty) returns true.
  absl::Status Interrupted(const std::function<bool()>& caller_gone) const;

  Store* const store_;
  Scheduler* const scheduler_;
  ChangeFeed* const feed_;
  Clock* const clock_;
  prometheus::Counter* decisions_ok_ = nullptr;
  prometheus::Counter* decisions_error_ = nullptr;
  prometheus::Family<prometheus::Gauge>* spent_ = nullptr;
  prometheus::Family<prometheus::Gauge>* budget_ = nullptr;
  prometheus::Family<prometheus::Gauge>* stopped_ = nullptr;
  prometheus::Family<prometheus::Gauge>* regret_ = nullptr;

  const AdaptiveControllerOptions options_;

  absl::Mutex sweeps_mu_;  // never held while deciding
  absl::CondVar sweep_released_;
  std::set<int64_t> deciding_ ABSL_GUARDED_BY(sweeps_mu_);  // sweeps whose guard is held
  std::map<int64_t, Seen> seen_ ABSL_GUARDED_BY(sweeps_mu_);

  std::atomic<bool> shutting_down_{false};  // set first by Shutdown(); decisions poll it

  absl::Mutex mu_;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_ADAPTIVE_ADAPTIVE_CONTROLLER_H_
