// The load benchmark's baselines: the metric rows the coordinator stored, inserted again by
// one thread straight into a fresh database of the same schema (resultsdb/schema.h), with
// the coordinator's pragmas (WAL, synchronous=FULL) and its insert statement
// (coordinator/store/store_writes.h), `rows_per_transaction` rows per commit (a commit ends after
// the batch that reaches it), in one of two orders (RawInsertOrder). Thread-compatible.
#ifndef XMOD_BENCH_LOAD_RAW_INSERT_H_
#define XMOD_BENCH_LOAD_RAW_INSERT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace xmod::bench {

struct RawInsertResult {
  int64_t rows = 0;
  double seconds = 0;      // inserting only, not reading the source
  double cpu_seconds = 0;  // the inserting thread's CPU time (user + system) meanwhile
};

// The order the rows are inserted in.
struct RawInsertOrder {
  // 0: sorted by run, attempt and sequence number, each attempt's rows one after the other
  // (every B-tree page filled once, at the end of the run's rows: the fastest order).
  // N > 0: as N workers reporting at once deliver them ("arrival order"): batches of
  // `rows_per_report` consecutive rows of an attempt, round-robin over N attempts, each
  // replaced by the next attempt (in run order) once its rows are in. Every batch then lands
  // inside the B-trees beside other attempts' rows, as the coordinator's batches do.
  int concurrent_attempts = 0;
  int rows_per_report = 100;
};

// Reads every row of `source_db`'s metrics table, then times inserting them into a new
// database at `target_db` (which must not exist).
absl::StatusOr<RawInsertResult> RawInsertMetrics(const std::string& source_db,
                                                 const std::string& target_db,
                                                 int rows_per_transaction,
                                                 const RawInsertOrder& order);

}  // namespace xmod::bench

#endif  // XMOD_BENCH_LOAD_RAW_INSERT_H_
