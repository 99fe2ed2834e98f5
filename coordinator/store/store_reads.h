// Domain reads on the coordinator database, run inside Store::Read (a read-only connection
// and a consistent snapshot). NOT_FOUND names the missing id; other errors are INTERNAL.
#ifndef XMOD_COORDINATOR_STORE_STORE_READS_H_
#define XMOD_COORDINATOR_STORE_STORE_READS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"
#include "xmod/v1/coordinator.pb.h"
#include "xmod/v1/types.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod {

struct RunFilter {
  int64_t sweep_id = 0;                    // 0 = every sweep
  std::vector<xmod::v1::RunState> states;  // empty = every state
  std::vector<int64_t> run_ids;            // empty = every run
  int limit = 0;                           // 0 = no limit
};

// The columns of a Run over `runs r` (kRunColumnCount of them, in RunFromRow's order), for
// reads that select runs with their own WHERE and ORDER BY (run_pages.h).
extern const char* const kRunColumns;
inline constexpr int kRunColumnCount = 32;
xmod::v1::Run RunFromRow(const Stmt& s);

absl::StatusOr<xmod::v1::Run> LoadRun(Db& db, int64_t run_id);
// Runs ordered by id.
absl::StatusOr<std::vector<xmod::v1::Run>> LoadRuns(Db& db, const RunFilter& filter);

// A sweep with its run counts and state (ACTIVE while a run is queued or running; then
// CANCELLED if the sweep was cancelled, FAILED if a run failed, DONE otherwise).
absl::StatusOr<xmod::v1::Sweep> LoadSweep(Db& db, int64_t sweep_id);
// Newest first; limit 0 = all.
absl::StatusOr<std::vector<xmod::v1::Sweep>> LoadSweeps(Db& db, int limit);

absl::StatusOr<std::vector<xmod::v1::Attempt>> LoadAttempts(Db& db, int64_t run_id);
absl::StatusOr<std::vector<xmod::v1::Checkpoint>> LoadCheckpoints(Db& db, int64_t run_id);
// The run's checkpoint with the highest step over all its attempts, if any.
absl::StatusOr<std::optional<xmod::v1::Checkpoint>> LatestCheckpoint(Db& db, int64_t run_id);

// The most points per series a client may ask LoadMetrics for (GetMetrics, the HTTP API).
inline constexpr int kMaxMetricPoints = 100000;
// Points per series when a client asks for none (max_points 0 or absent): GetMetrics and the
// HTTP API alike; xmodctl and the Python client send 0 by default.
inline constexpr int kDefaultMetricPoints = 500;

// Canonical metric series of a run (canonical_metrics view), each ordered by flops and
// downsampled to at most max_points (evenly by index, the last point always kept). A value
// stored as NaN (see InsertMetrics) reads as NaN.
absl::StatusOr<std::vector<xmod::v1::MetricSeries>> LoadMetrics(
    Db& db, int64_t run_id, const std::vector<std::string>& names, int max_points);

// The answer to a GetMetrics request (its limits already checked) into `out`: NOT_FOUND for
// an unknown run, kDefaultMetricPoints points per series when it asks for none.
absl::Status LoadRunMetrics(Db& db, const xmod::v1::GetMetricsRequest& request,
                            xmod::v1::GetMetricsResponse* out);

// The fits table holds one row per stored fit attempt: a successful fit, or a failed one
// with only `error` set (see fit_trigger.h for which failures are stored). Failed rows
// load with only id, sweep_id, study_id, created_unix_ms and error set.
struct LatestFits {
  std::optional<xmod::v1::Fit> ok;      // the newest successful fit
  std::optional<xmod::v1::Fit> failed;  // the newest failed attempt, if newer than `ok`
};
absl::StatusOr<LatestFits> LoadLatestFits(Db& db, int64_t sweep_id);
// The same for a study's fits (rows with study_id set; studies.h).
absl::StatusOr<LatestFits> LoadLatestStudyFits(Db& db, int64_t study_id);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_STORE_READS_H_
