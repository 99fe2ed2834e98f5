// Domain writes on the coordinator database. Each function runs inside a write closure on
// the store's writer thread (Store::Write), so it is part of a batched transaction.
// What is not known yet or does not apply is stored NULL, never as a 0 or '' that would read
// like a value (docs/results-database.md, "Conventions"). Errors are INTERNAL (sqlite) unless
// stated.
#ifndef XMOD_COORDINATOR_STORE_STORE_WRITES_H_
#define XMOD_COORDINATOR_STORE_STORE_WRITES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/types.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

// A new sweep row submitted by credential `submitter` ("" = anonymous); returns its id.
absl::StatusOr<int64_t> InsertSweep(Db& db, const xmod::v1::SweepSpec& spec,
                                    const std::string& submitter, int64_t now_ms);

// A new run row in state QUEUED from an expanded run (sweep_id, label, name, spec,
// priority, max_attempts, held_out, forward_flops_per_token, total_params, preemptible are
// read from `run`); returns its id. Column `a` is NULL for an architecture without anchors
// (A = 0 in the spec), `moe` NULL unless the architecture is MOE; start, end and progress
// losses stay NULL until they happen.
absl::StatusOr<int64_t> InsertRun(Db& db, int64_t sweep_id, const xmod::v1::Run& run,
                                  int64_t now_ms);

// Changes to a run row; unset fields are left alone. A started_ms or finished_ms of 0 stores
// NULL (not started, not finished: a resumed run's finished_ms is cleared so).
struct RunUpdate {
  int64_t run_id = 0;
  std::optional<xmod::v1::RunState> state;
  std::optional<int> attempts;
  std::optional<int> failures;
  std::optional<int> max_attempts;
  std::optional<int64_t> not_before_ms;
  std::optional<std::string> error;
  std::optional<int64_t> started_ms;
  std::optional<int64_t> finished_ms;
  std::optional<int> oom_failures;  // out-of-memory failures since submission or last resume
};
absl::Status UpdateRun(Db& db, const RunUpdate& update);

// Sets started_ms (NULL until then) on a run's first start; later starts leave it alone.
absl::Status MarkRunStarted(Db& db, int64_t run_id, int64_t now_ms);

// Progress columns from a heartbeat or the latest metric points. Zero losses and rates are
// "unknown" and leave the stored value alone (NULL until the first known one).
absl::Status UpdateProgress(Db& db, int64_t run_id, const xmod::v1::Progress& progress);

struct AttemptStart {
  int64_t run_id = 0;
  int attempt = 0;
  int64_t worker_id = 0;
  std::string worker;
  std::string slots;  // "0,1"
  int64_t started_ms = 0;
  int64_t resumed_from_step = 0;
  int64_t lease_expires_ms = 0;
  std::string rendezvous;  // a gang's TCPStore address; empty (stored NULL) otherwise
  // What its memory plan changed in the spec (MemoryPlan::description); empty (stored NULL):
  // the spec as submitted.
  std::string memory_plan;
};
absl::Status InsertAttempt(Db& db, const AttemptStart& start);

// Closes an open attempt (ended_ms NULL) with its outcome; a closed one is left alone. A note
// already in its error (NoteResumeFallback) is kept after `error`. The exit code is stored
// NULL for outcome "lost": no exit of the trainer was seen.
absl::Status EndAttempt(Db& db, int64_t run_id, int attempt, const std::string& outcome,
                        int exit_code, const std::string& error, int64_t now_ms);

absl::Status RenewLease(Db& db, int64_t run_id, int attempt, int64_t lease_expires_ms);

// Appends points numbered first_seq, first_seq + 1, ...; points already stored (same run,
// attempt, seq) are left as they are, so a replay is harmless. A NaN flops or value is
// stored as the text 'NaN' (sqlite has no NaN REAL); LoadMetrics reads it back as NaN.
absl::Status InsertMetrics(Db& db, int64_t run_id, int attempt, int64_t first_seq,
                           const std::vector<xmod::v1::MetricPoint>& points);
// The same for the points of a request as they arrived (no copy of them is made).
absl::Status InsertMetrics(Db& db, int64_t run_id, int attempt, int64_t first_seq,
                           const google::protobuf::RepeatedPtrField<xmod::v1::MetricPoint>& points);

absl::Status InsertCheckpoint(Db& db, int64_t run_id, int attempt,
                              const xmod::v1::Checkpoint& checkpoint, int64_t now_ms);

// Forgets all but the `keep` newest recorded checkpoints of `run_id`. With keep = 2 the rows
// follow the worker, which deletes a run's checkpoint files older than the two newest
// acknowledged ones (worker/agent.h), so no retry is offered a file that is gone.
absl::Status KeepNewestCheckpoints(Db& db, int64_t run_id, int keep);

// Forgets the recorded checkpoint of `run_id` at `path` (a resume candidate a trainer
// refused: digest mismatch, missing, does not load), so it is never offered again.
absl::Status DeleteCheckpoint(Db& db, int64_t run_id, const std::string& path);

// Notes on attempt (run_id, attempt) that it resumes from `resumed_from_step` instead (0:
// from scratch) and why: `note` is added to the attempt's error, which EndAttempt keeps.
absl::Status NoteResumeFallback(Db& db, int64_t run_id, int attempt, int64_t resumed_from_step,
                                const std::string& note);

// Inserts or updates the worker named `request.worker_name`, with its slots, advertised host
// and rendezvous ports (in the `slots` blob); returns its id (stable across re-registrations).
absl::StatusOr<int64_t> UpsertWorker(Db& db, const xmod::v1::RegisterRequest& request,
                                     int64_t now_ms);
absl::Status TouchWorker(Db& db, int64_t worker_id, int64_t now_ms);

absl::Status MarkSweepCancelled(Db& db, int64_t sweep_id);

// Counts that survive coordinator restarts (the counters table; Prometheus starts from them).
inline constexpr char kLeasesLostCounter[] = "leases_lost";  // attempts lost to lease expiry
inline constexpr char kOomExitsCounter[] = "oom_exits";      // trainers out of memory (exit 5)
// PREEMPT orders by cause: "preemptions_priority", "preemptions_quota".
inline constexpr char kPreemptionsCounterPrefix[] = "preemptions_";
// Adds `delta` to counter `name` (created at 0).
absl::Status AddToCounter(Db& db, const std::string& name, int64_t delta);

// A row of the fits table from `fit` (sweep_id, or study_id with sweep_id 0 for a study's
// fit, created_unix_ms and the rest; `id` is ignored); returns its id. The owner that is not
// fitted (sweep_id of a study's fit, study_id of a sweep's) is stored NULL. A fit with
// `error` set is a failed attempt: only its sweep or study, time and error are stored
// (params, r2, rmse, mae, n_obs, cv and the blob NULL). Otherwise params and cv are stored as
// JSON (proto field names, e.g. "eta_n") next to the binary Fit.
absl::StatusOr<int64_t> InsertFit(Db& db, const xmod::v1::Fit& fit);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_STORE_WRITES_H_
