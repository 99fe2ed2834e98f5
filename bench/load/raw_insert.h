// The load benchmark's baseline: the metric rows the coordinator stored, inserted again by
// one thread straight into a fresh database of the same schema (resultsdb/schema.h), with
// the coordinator's pragmas (WAL, synchronous=FULL) and its insert statement
// (coordinator/store/store_writes.h), `rows_per_transaction` rows per commit (a commit ends after
// the batch that reaches it). Thread-compatible.
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

// Reads every row of `source_db`'s metrics table, then times inserting them into a new
// database at `target_db` (which must not exist).
absl::StatusOr<RawInsertResult> RawInsertMetrics(const std::string& source_db,
                                                 const std::string& target_db,
                                                 int rows_per_transaction);

}  // namespace xmod::bench

#endif  // XMOD_BENCH_LOAD_RAW_INSERT_H_
