// MetricIngest: the owner of metric ingest. A worker's batch of metric points (ReportMetrics)
// is checked against this class's own small table of live attempts and stored without the
// scheduling lock (scheduler.h), so metric traffic and scheduling decisions never queue
// behind each other.
//
// The Scheduler owns attempts; it tells this table what it commits:
//   Open        once an attempt's start is stored (or rebuilt at start-up);
//   BeginClose  before the writes that end attempts are queued, and EndClose after they were
//               committed or refused. No batch is accepted after BeginClose (one arriving
//               in between waits for the outcome), and every batch accepted before it is
//               stored no later than the end: batches go to the store's bulk lane, and
//               when one of an ending attempt is still being written, BeginClose says so and
//               the end is queued behind it in that lane (Store::WriteBulk);
//   MarkCancelled once a cancellation of a running run is stored: its batches are still
//               stored, and the reply says stale.
// Lock order: the Scheduler's lock, then this class's; it never calls the Scheduler.
// Thread-safe.
#ifndef XMOD_COORDINATOR_SCHEDULING_METRIC_INGEST_H_
#define XMOD_COORDINATOR_SCHEDULING_METRIC_INGEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/scheduling/live_state.h"
#include "coordinator/store/change_feed.h"
#include "coordinator/store/store.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

class MetricIngest {
 public:
  // What ingest knows of an open attempt.
  struct LiveAttempt {
    int64_t reporter = 0;  // the worker that runs rank 0 (the gang's member 0)
    int64_t sweep_id = 0;
    std::string run_name;
    int64_t acked_seq = -1;  // highest seq with every earlier point durable (-1 = none)
  };

  // `store` and `feed` must outlive it; `metrics` may be null. At most `max_writes` batches
  // are being written at once; more wait (the store commits them in transactions of their
  // own, which scheduling writes overtake).
  MetricIngest(Store* store, ChangeFeed* feed, CoordinatorMetrics* metrics, int max_writes);

  // Stores points idempotently (by run, attempt, seq) and acknowledges the highest seq up to
  // which every point is durable. A stale attempt's points are acknowledged, not stored,
  // and the reply says stale.
  absl::StatusOr<xmod::v1::ReportMetricsResponse> ReportMetrics(
      const xmod::v1::ReportMetricsRequest& request);

  // The Scheduler's side (header comment).
  void Open(const scheduling::AttemptKey& key, LiveAttempt attempt);
  // True when a batch of one of `keys` is still being written (header comment).
  bool BeginClose(const std::vector<scheduling::AttemptKey>& keys);
  void EndClose(const std::vector<scheduling::AttemptKey>& keys, bool committed);
  void MarkCancelled(const scheduling::AttemptKey& key);
  // The attempt's acked_seq; -1 when it is not open.
  int64_t AckedSeq(const scheduling::AttemptKey& key);
  // Reports waiting for an end in flight to be committed or refused (tests, diagnostics).
  int WaitingForClose();
  // Batches queued in the store and not yet committed or refused (tests, diagnostics).
  int WritesInFlight();

 private:
  struct Entry {
    LiveAttempt attempt;
    bool cancelled = false;
    bool closing = false;  // between BeginClose and EndClose
    int writing = 0;       // its batches queued in the store and not yet committed or refused
  };

  // The open attempt `request` reports for, once no end of it is in flight and, when it has
  // points, a write may start (writes_ < max_writes_); null when it is not open or another
  // worker holds it (stale).
  Entry* AwaitReporterLocked(const xmod::v1::ReportMetricsRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once a batch is durable: its acknowledgement and the run's progress gauges.
  void NoteStoredLocked(const xmod::v1::ReportMetricsRequest& request, int64_t acked,
                        const xmod::v1::Progress& progress) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store* const store_;
  ChangeFeed* const feed_;
  CoordinatorMetrics* const metrics_;
  const int max_writes_;

  absl::Mutex mu_;
  absl::CondVar close_resolved_;         // signalled by EndClose
  absl::CondVar write_done_;             // signalled when a batch's write ends
  int writes_ ABSL_GUARDED_BY(mu_) = 0;  // batches being written
  std::map<scheduling::AttemptKey, Entry> attempts_ ABSL_GUARDED_BY(mu_);
  int waiting_for_close_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_SCHEDULING_METRIC_INGEST_H_
