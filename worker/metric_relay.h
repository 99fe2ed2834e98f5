// MetricRelay: carries each attempt's metric points, checkpoints and outcome (FinishRun) from
// its xmod-train child to the coordinator without losing any: a metric is acknowledged only
// once durable, and the worker keeps every report until acknowledged, however long the
// coordinator is away, across its own restarts too.
//
// Points are numbered consecutively per attempt (seq from 1) and kept until a
// ReportMetrics reply acknowledges them (acked_seq); failed sends are retried with
// exponential backoff measured on the injected Clock's monotonic reading. A checkpoint is
// reported only once every point that arrived before it is acknowledged, so a retry that
// resumes from it never finds a gap in the metrics before its step; the attempt's FinishRun
// only once every point and checkpoint is, and the attempt is closed when the coordinator
// accepts it or refuses it for good. A reply marked `stale` (or NOT_FOUND /
// FAILED_PRECONDITION) means the attempt is no longer current: its points and checkpoints
// are dropped, the stale callback asks the agent to stop the child, and only its FinishRun
// is still sent (it may end a cancelled attempt; for an ended one it is refused or a no-op).
// A ReportMetrics refused for good (INVALID_ARGUMENT, PERMISSION_DENIED, ALREADY_EXISTS: a
// retry cannot help) ends the attempt's stream the same way, since the coordinator stores
// an attempt's points only contiguously (a dropped batch would hold back every later one):
// its points and checkpoints are dropped (counted), the callback stops the child, and its
// FinishRun goes out with the refusal in its error (a SUCCEEDED outcome becomes FAILED: the
// metrics are incomplete; the coordinator retries from the latest reported checkpoint, whose
// points are durable). A point whose name is longer than kMaxMetricNameBytes
// (common/metric_limits.h, the coordinator's limit) is dropped before it is numbered
// (logged, counted), so it never reaches the coordinator.
//
// Bounded memory: an attempt keeps at most max_memory_points unacknowledged points in
// memory, the oldest ones. Later points are appended to the attempt's spill file,
// <spill_dir>/run-<R>-a<A>.spill (a SpillFile, spill_file.h; fdatasync'ed after each
// append), and read back in order as
// acknowledgements make room. The file is deleted once every point in it is acknowledged,
// and when the attempt is closed or turns stale. If a spill write fails (a full or failing
// disk), the attempt's points stay in memory (logged), up to max_overflow_points more; the
// next point past that bound ends the attempt rather than drop a point the trainer reported
// or let memory grow without bound: that point and every later one (and any later
// checkpoint, whose points would be incomplete) are dropped and counted
// (reason="buffer_full"), the callback stops the child, and its FinishRun goes out FAILED
// saying so ("the metric buffer is full: ...") once the points it holds are delivered — the
// coordinator retries from the latest checkpoint reported before, whose points are durable.
//
// Across restarts: Keep() (the worker's last act when it stops, docs/fault-tolerance.md)
// writes what each attempt with a queued FinishRun still has to deliver: its unacknowledged
// points as a complete spill file (from acked_seq + 1), then <spill_dir>/run-<R>-a<A>.outcome
// (a KeptAttempt: acked_seq, pending checkpoints, the FinishRun), written atomically last, so
// its presence says the pair is complete. The next relay on that folder loads every kept
// attempt at construction and delivers it like any other (the coordinator's fencing by
// attempt decides what is still current: a stale one is dropped, not retried); both files
// go when the attempt is closed. An attempt kept by an earlier life is kept again outcome
// file first, then its spill file (replaced by rename; records up to acked_seq are skipped at
// load), and a Keep that fails deletes nothing of the earlier pair, so the pair on disk is
// always consistent. Spill files without an outcome are left by a worker that
// died and are deleted at construction: their points before the spilled ones were in memory,
// and the coordinator re-runs such an attempt from its latest checkpoint, whose earlier
// points were durable before the checkpoint was reported.
//
// Thread-safety: all methods are thread-safe. Sending happens in Pump(), called by one
// thread at a time (RunPumpLoop or a test); the mutex is never held during an RPC (spill
// file I/O happens under it).
#ifndef XMOD_WORKER_METRIC_RELAY_H_
#define XMOD_WORKER_METRIC_RELAY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/clock.h"
#include "worker/gateway_client.h"
#include "worker/worker_metrics.h"
#include "xmod/v1/types.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

struct AttemptKey {
  int64_t run_id = 0;
  int32_t attempt = 0;
  bool operator<(const AttemptKey& o) const {
    return std::tie(run_id, attempt) < std::tie(o.run_id, o.attempt);
  }
  bool operator==(const AttemptKey& o) const { return run_id == o.run_id && attempt == o.attempt; }
};

struct MetricRelayOptions {
  int max_batch_points = 512;        // points per ReportMetrics call
  int64_t initial_backoff_ms = 100;  // first retry delay after a failed call
  int64_t max_backoff_ms = 10'000;   // cap of the doubling delay
  // Unacknowledged points kept in memory per attempt; the rest wait in its spill file.
  int64_t max_memory_points = 50'000;
  // When the spill file cannot be written (a full or failing disk), the points held in memory
  // past max_memory_points, at most; past that the attempt is stopped (header comment).
  int64_t max_overflow_points = 50'000;
  // Folder of the spill files; "" = no spilling (memory unbounded).
  std::string spill_dir;
};

class SpillFile;

class MetricRelay {
 public:
  // `gateway` and `clock` must outlive the relay; `metrics` may be null. Creates
  // options.spill_dir, loads the attempts kept there by an earlier life (Keep) and deletes
  // the other spill files.
  MetricRelay(GatewayClient* gateway, Clock* clock, MetricRelayOptions options,
              WorkerMetrics* metrics = nullptr);
  ~MetricRelay();

  // The worker id sent with every call (from RegisterResponse).
  void set_worker_id(int64_t worker_id);
  // Called (without the lock) when the relay stops taking an attempt's reports: it turned
  // stale (`refusal` empty), the coordinator refused one of its metric reports for good, or
  // its buffer overflowed (`refusal` says what and why; the points it holds are still
  // delivered). Either way its child must stop.
  void set_stale_callback(std::function<void(AttemptKey, const std::string& refusal)> callback);

  // Starts relaying for `key`; seq restarts at 1. Re-opening an open attempt is a no-op.
  void Open(AttemptKey key);
  // Numbers `point` with the attempt's next seq, buffers it (in memory or in the spill file)
  // and returns the seq. Points of an attempt that is not open or stale, and points whose
  // name is longer than kMaxMetricNameBytes (logged, counted), are dropped (returns 0).
  int64_t AddMetric(AttemptKey key, const v1::MetricPoint& point);
  // Queues a checkpoint report (worker id and attempt fields are filled in here).
  void AddCheckpoint(AttemptKey key, v1::ReportCheckpointRequest checkpoint);
  // Forgets the attempt and whatever it still buffers; deletes its spill file.
  void Close(AttemptKey key);
  // Queues the attempt's FinishRun (opening the attempt if needed; run, attempt and last_seq
  // are filled in here, worker id and last_acked_seq when it is sent), sent once every point
  // and checkpoint is acknowledged. The attempt is closed once the coordinator accepts it or
  // refuses it for good (NOT_FOUND, FAILED_PRECONDITION, INVALID_ARGUMENT, ALREADY_EXISTS,
  // PERMISSION_DENIED); a refusal of the attempt's metrics is added to its error;
  // other errors are retried with backoff.
  void Finish(AttemptKey key, v1::FinishRunRequest finish);
  // Writes every open attempt that has a queued FinishRun to spill_dir for the next relay on
  // it (header comment) and forgets all of them; attempts without one are dropped. Returns
  // how many were kept. Call once nothing pumps any more.
  int Keep();

  // One sending pass: for each attempt whose retry delay has passed, reports the checkpoints
  // that are due and one batch of points. Returns whether anything was sent successfully.
  bool Pump();

  // Blocks until every point and checkpoint of `key` is acknowledged (true), or the attempt
  // is stale or `abandon` is notified (false).
  bool WaitDelivered(AttemptKey key, absl::Notification* abandon);
  // Blocks until `key` is closed (its FinishRun accepted or refused: true), or `abandon` is
  // notified (false).
  bool WaitFinished(AttemptKey key, absl::Notification* abandon);
  // Blocks until no attempt is open (true), or the Clock's monotonic reading passes
  // `deadline_ms` or `abandon` is notified (false). Real-time waits, decisions on the Clock.
  bool WaitIdle(int64_t deadline_ms, absl::Notification* abandon);

  // Pumps until `stop` is notified, sleeping while there is nothing due. Real-time waits,
  // decisions on the Clock.
  void RunPumpLoop(absl::Notification* stop);
  // Wakes RunPumpLoop and WaitDelivered to re-check their conditions (e.g. after `stop`).
  void Interrupt();

  // Inspection.
  int64_t last_seq(AttemptKey key) const;
  int64_t acked_seq(AttemptKey key) const;
  bool stale(AttemptKey key) const;
  bool Delivered(AttemptKey key) const;
  size_t buffered_points() const;  // unacknowledged, in memory and spilled
  size_t memory_points() const;    // unacknowledged and held in memory
  size_t spilled_points() const;   // waiting in spill files, not yet read back
  int64_t relayed_points() const;
  size_t pending_checkpoints(AttemptKey key) const;
  // Paths of the attempt's checkpoint reports the coordinator refused for good (dropped, not
  // held by the coordinator: garbage collection must not count them).
  std::set<std::string> refused_checkpoints(AttemptKey key) const;
  // Attempts not yet closed, kept ones of an earlier life included.
  std::vector<AttemptKey> open_attempts() const;
  // Of those, the ones worth holding a lease for: all but those whose reports the coordinator
  // has answered, for more than `max_stuck_ms` of the Clock's monotonic time, only with errors
  // the relay retries (a call that cannot reach the coordinator, UNAVAILABLE or
  // DEADLINE_EXCEEDED, does not count: an outage of any length stops nothing).
  std::vector<AttemptKey> attempts_to_hold(int64_t max_stuck_ms) const;

 private:
  struct PendingCheckpoint {
    int64_t after_seq;  // report once acked_seq reaches this
    v1::ReportCheckpointRequest request;
  };
  struct Stream {
    int64_t last_seq = 0;
    int64_t acked_seq = 0;
    // seq acked_seq+1 .. acked_seq+points.size(); the rest (up to last_seq) is unread in
    // `spill`.
    std::deque<v1::MetricPoint> points;
    std::unique_ptr<SpillFile> spill;  // null while nothing is spilled
    bool spill_failed = false;         // a spill write failed: memory only from then on
    std::string spill_error;           // why, for the overflow's message
    int64_t lost = 0;                  // points an unreadable spill file lost (not in last_seq)
    std::deque<PendingCheckpoint> checkpoints;
    std::set<std::string> refused_checkpoints;  // paths the coordinator refused for good
    int64_t next_try_ms = 0;
    int64_t backoff_ms = 0;
    bool stale = false;
    // Why the attempt's metrics are incomplete ("" while they are not): the coordinator
    // refused a metric report for good (stale then), or the buffer overflowed.
    std::string refusal;
    // Since when every answer of the coordinator was an error to retry (unset: the last one
    // made progress, or the coordinator could not be reached).
    std::optional<int64_t> stuck_since_ms;
    int64_t names_too_long = 0;  // points dropped for a name past kMaxMetricNameBytes
    std::optional<v1::FinishRunRequest> finish;  // queued by Finish(), sent last
    bool kept = false;                           // loaded from an outcome file (Keep)
  };

  // What Pump sends for one stream in one round.
  struct Batch {
    AttemptKey key;
    std::vector<v1::ReportCheckpointRequest> checkpoints;
    v1::ReportMetricsRequest metrics;
    std::optional<v1::FinishRunRequest> finish;  // only once everything else is delivered
  };

  // The batches of the streams whose retry delay has passed (metric_relay_send.cc).
  std::vector<Batch> BatchesDueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the batch's checkpoint reports in order; false when one could not be delivered
  // (stale, closed, or to be retried): its points wait. Sets `*progressed` for each one the
  // coordinator answered.
  bool SendCheckpoints(const Batch& batch, bool* progressed);
  // Sends the batch's points; true when the coordinator acknowledged some.
  bool SendMetrics(const Batch& batch);
  bool DeliveredLocked(const Stream& stream) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether Pump has something to send for the stream once its retry delay has passed.
  bool HasWorkLocked(const Stream& stream) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string SpillPath(AttemptKey key) const;
  std::string OutcomePath(AttemptKey key) const;
  // Loads every attempt an earlier start kept in the spill folder and deletes the files it
  // left that belong to none (metric_relay_spill.cc).
  void LoadSpillFolderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Loads the attempt kept in outcome file `path` (logged and deleted when unreadable).
  void LoadKeptLocked(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the stream's spill file (every unacknowledged point) and outcome file.
  absl::Status KeepLocked(AttemptKey key, Stream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One FinishRun call; closes the attempt unless it is to be retried. True when closed.
  bool SendFinish(AttemptKey key, const v1::FinishRunRequest& finish);
  // Waits until something changes, at most `timeout_ms` (real time).
  void AwaitChangeLocked(int64_t timeout_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the stream and its files.
  void CloseLocked(std::map<AttemptKey, Stream>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends to the spill file, creating it; false (logged) when that fails.
  // AddMetric under the lock; `*overflow` gets the reason when this point overflowed the
  // attempt's buffer (its callback is then the caller's to run, unlocked).
  int64_t AddMetricLocked(AttemptKey key, const v1::MetricPoint& point, std::string* overflow)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the attempt's buffer is past max_memory_points + max_overflow_points with its
  // spill file failed; the first time, records why (stream.refusal, `*overflow`).
  bool OverflowsLocked(AttemptKey key, Stream& stream, std::string* overflow)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SpillLocked(AttemptKey key, Stream& stream, int64_t seq, const v1::MetricPoint& point)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves spilled points back into memory while there is room (all of them with `all`), and
  // deletes the spill file once every point in it is acknowledged.
  void RefillLocked(Stream& stream, bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops everything the stream buffers, in memory and on disk.
  void DropLocked(Stream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A call failed with `status` and is retried after the backoff.
  void FailedLocked(Stream& stream, const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The coordinator answered a call of the stream other than with an error to retry.
  void ProgressLocked(Stream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the stream's refusal in its queued FinishRun, if there is one.
  void ApplyRefusalLocked(Stream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateGaugeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `key` stale (`refusal` empty) or refused; returns true the first time.
  bool MarkStale(AttemptKey key, const std::string& refusal = "");

  GatewayClient* const gateway_;
  Clock* const clock_;
  const MetricRelayOptions options_;
  WorkerMetrics* const metrics_;

  mutable absl::Mutex mu_;
  int64_t worker_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void(AttemptKey, const std::string&)> on_stale_ ABSL_GUARDED_BY(mu_);
  std::map<AttemptKey, Stream> streams_ ABSL_GUARDED_BY(mu_);
  size_t buffered_ ABSL_GUARDED_BY(mu_) = 0;  // in memory and spilled
  size_t spilled_ ABSL_GUARDED_BY(mu_) = 0;   // unread in spill files
  int64_t relayed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every change, wakes waiters
};

}  // namespace xmod

#endif  // XMOD_WORKER_METRIC_RELAY_H_
