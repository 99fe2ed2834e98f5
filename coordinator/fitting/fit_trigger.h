// FitTrigger: refits a sweep's scaling law (paper Eq. 14, fitter/sweep_fit.h) in the
// background as its runs succeed, and stores every fit in the `fits` table.
// It does the same for studies (coordinator/fitting/studies.h, fitter/study_fit.h): a study is
// refitted whenever the succeeded-run count of any member sweep changes, whatever the
// members' fit.enabled; its rows have study_id set and sweep_id 0.
//
// When. Poll(), called by the coordinator's ticker, counts the SUCCEEDED runs of every sweep
// whose spec has fit.enabled and requests a refit of each sweep whose count changed since the
// last poll, and of every study whose members' count changed (a study created after its
// members finished counts as changed at the next poll). Only succeeded runs enter the fit
// (fitter/db_source.h reads no others), so a run ending FAILED or CANCELLED changes nothing
// the fit sees and requests nothing. The first Poll() (at start, after a restart) requests a
// refit of every fit-enabled sweep and every study with a succeeded run that finished after
// its newest fits row, or without any row.
//
// Coalescing. One background thread runs the fits one at a time. Per sweep or study at most
// one fit is queued or running; a request while it runs sets a pending flag that causes
// exactly one more fit after it, however many requests came.
//
// A fit. On the fit thread: the sweep's spec and state and, in the same read transaction of
// a read-only store connection, the run curves through fitter::LoadSweepRuns (val/loss of the
// canonical metric rows against training FLOPs), fitter::FitSweep seeded with the FitPlan's seed
// and bootstrap_samples, then one row through the store's writer (Store::Write; the writer never
// waits for a fit). Each run carries its grid label (GridSpec.label), which names its sweep of the
// paper's B.4 design (kxl, nact, axk; fitter::SweepRoleOfLabel): a sweep whose grids are so
// labelled is fitted by sweep as B.5 prescribes (fitter/two_stage.h), any other by A. While the
// sweep still has queued or running runs, a sparse run whose (L, backbone) group has no succeeded
// dense run yet is left out: its reference is still coming (the provisional fit uses the complete
// groups). A study's fit reads each member sweep so, gives every run of a member its role (kxl,
// nact, axk; "design" keeps the labels), and is seeded with the StudySpec's seed and
// bootstrap_samples; it counts as "still running" while any member does.
//
// What is stored (xmod_fits_total{result}, xmod_fit_seconds):
//  - success: params, R², RMSE, MAE, n_obs, cv (JSON) and the binary Fit; result="ok".
//  - failure, stored as a row with only `error` (the fitter's message, naming the run or
//    group), result="error", when it cannot be repaired by more runs — a succeeded run with a
//    non-finite val/loss or FLOP value, or without any val/loss point — or when the sweep
//    has no queued or running run left (what is missing will not come).
//  - failure for lack of data while the sweep still runs (too few observations or a single K
//    in a stage, a sparse run past its dense reference's FLOPs): nothing stored or counted,
//    logged at INFO; the next succeeded run retries. Such "not yet" states are normal during
//    a sweep and would otherwise fill the table with one row per completion.
// A failure to read or write the database is logged and counted as result="error".
// A failed fit never writes a successful row, so GetFit keeps serving the previous fit.
//
// Bounds. A fit runs at most max_bootstrap_samples bootstrap refits whatever the stored spec
// says (specs stored before the limit existed are clamped, with a warning), so no spec makes
// the fit thread allocate without bound, after a restart neither.
//
// Cancellation. CancelFit(sweep) (CancelSweep calls it) drops a queued fit of the sweep and
// stops a running one within moments: the fitter's search and bootstrap check a cancel flag
// (fitter/de_search.h); a cancelled fit stores nothing and counts as nothing.
//
// Thread-safe. Shutdown() (or the destructor) cancels a running fit, drops queued requests
// and joins the thread; the store must outlive the trigger.
#ifndef XMOD_COORDINATOR_FITTING_FIT_TRIGGER_H_
#define XMOD_COORDINATOR_FITTING_FIT_TRIGGER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "coordinator/spec/sweep_expansion.h"
#include "coordinator/store/store.h"
#include "fitter/sweep_fit.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace xmod {

struct FitTriggerOptions {
  // DE sizes, exponent bounds, cross-validation, bootstrap threads. The seed
  // (fit.search.seed) and bootstrap_samples are replaced by each sweep's FitPlan.
  fitter::SweepFitOptions fit;
  // Most bootstrap refits of one fit (the spec limit, see sweep_expansion.h).
  int max_bootstrap_samples = SpecLimits().max_bootstrap_samples;
  // Test hook: called on the fit thread before each fit attempt (the sweep id; 0 for a
  // study's fit), outside any lock; a test may block in it to hold a fit "running".
  std::function<void(int64_t sweep_id)> TEST_before_fit;
};

class FitTrigger {
 public:
  // Starts the fit thread. `store` and `clock` must outlive the trigger; `registry` (may be
  // null: no metrics) receives xmod_fits_total and xmod_fit_seconds.
  FitTrigger(Store* store, Clock* clock, prometheus::Registry* registry, FitTriggerOptions options);
  ~FitTrigger();
  FitTrigger(const FitTrigger&) = delete;
  FitTrigger& operator=(const FitTrigger&) = delete;

  // Looks for sweeps and studies with newly succeeded runs and requests their refits (see
  // top of file). Cheap: one grouped count over the runs table, plus the spec of sweeps not
  // seen before, and one over the runs of the studies' member sweeps.
  // INTERNAL with sqlite's message when the database cannot be read.
  absl::Status Poll();

  // Schedules a refit of `sweep_id`, coalesced as described at the top. A sweep that does
  // not exist or whose spec has no fit.enabled is skipped when its turn comes.
  void RequestFit(int64_t sweep_id);
  // The same for a study; one that does not exist is skipped.
  void RequestStudyFit(int64_t study_id);

  // Drops a queued fit of `sweep_id` and cancels its running fit, if any (see top of file).
  void CancelFit(int64_t sweep_id);

  // Blocks until no fit is queued or running. For tests and orderly shutdown.
  void WaitIdle();

  // Drops queued requests, cancels a running fit and joins the thread. Idempotent.
  void Shutdown();

  // Fit attempts made (each call of the fitter), for tests and diagnostics.
  int attempts() const;

 private:
  struct SweepSeen {
    bool fit_enabled = false;
    int64_t succeeded = 0;  // SUCCEEDED runs at the last poll
  };
  // What one fit is of: a sweep or a study (the other id is 0).
  struct Target {
    int64_t sweep_id = 0;
    int64_t study_id = 0;
    bool operator<(const Target& o) const {
      return sweep_id != o.sweep_id ? sweep_id < o.sweep_id : study_id < o.study_id;
    }
    bool operator==(const Target& o) const {
      return sweep_id == o.sweep_id && study_id == o.study_id;
    }
  };
  struct Job;       // what a fit attempt read (fit_trigger.cc)
  struct PollRows;  // what a poll read (fit_trigger.cc)

  void Request(const Target& target);
  void Loop();
  // One fit attempt of `target`: read, fit, store, count.
  void FitOnce(const Target& target);
  // Reads what a fit of the sweep or the study needs. NOT_FOUND when it is gone; a sweep
  // without fit.enabled reads as OK with job->skip set.
  absl::Status ReadSweepJob(int64_t sweep_id, Job* job);
  absl::Status ReadStudyJob(int64_t study_id, Job* job);
  // The trigger's fit options with the job's seed and (clamped) bootstrap samples.
  fitter::SweepFitOptions FitOptionsFor(const Job& job);
  // The fit to store: the report's, or its error; nullopt while an active job may still get
  // the data it lacks.
  static std::optional<xmod::v1::Fit> FitToStore(const Job& job,
                                                 const absl::StatusOr<fitter::FitReport>& report);
  // Stores the fit of `target`, then counts and logs it.
  void RecordFit(const Target& target, const Job& job, double seconds, xmod::v1::Fit fit);
  void CountFitError();
  absl::Status ReadPollRows(PollRows* rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // Requests the refits the poll's rows call for (see top of file).
  void RequestSweepFits(const PollRows& rows, bool first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  void RequestStudyFits(const PollRows& rows, bool first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(poll_mu_);
  // Writes `fit` through the store's writer and waits for the commit.
  absl::Status StoreFit(const xmod::v1::Fit& fit);

  Store* const store_;
  Clock* const clock_;
  const FitTriggerOptions options_;
  prometheus::Counter* fits_ok_ = nullptr;
  prometheus::Counter* fits_error_ = nullptr;
  prometheus::Histogram* fit_seconds_ = nullptr;

  mutable absl::Mutex mu_;
  std::deque<Target> queue_ ABSL_GUARDED_BY(mu_);      // fits waiting for their turn
  std::set<Target> queued_ ABSL_GUARDED_BY(mu_);       // the same, as a set
  Target running_ ABSL_GUARDED_BY(mu_);                // being fitted; both ids 0 = none
  bool running_pending_ ABSL_GUARDED_BY(mu_) = false;  // requested again while running
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Set to stop the running fit; cleared (under mu_) before each fit starts.
  std::atomic<bool> cancel_running_{false};
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex poll_mu_;  // serializes Poll()
  bool polled_ ABSL_GUARDED_BY(poll_mu_) = false;
  std::map<int64_t, SweepSeen> seen_ ABSL_GUARDED_BY(poll_mu_);
  std::map<int64_t, int64_t> study_seen_ ABSL_GUARDED_BY(poll_mu_);  // succeeded runs

  std::thread thread_;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_FITTING_FIT_TRIGGER_H_
