// See raw_insert.h.
#include "bench/load/raw_insert.h"

#include <sqlite3.h>
#include <time.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "coordinator/store/store_writes.h"
#include "resultsdb/schema.h"
#include "resultsdb/sqlite_db.h"

namespace xmod::bench {
namespace {

// CPU time (user + system) of the calling thread so far.
double CallingThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Consecutive points of one attempt, as InsertMetrics takes them.
struct Batch {
  int64_t run_id = 0;
  int attempt = 0;
  int64_t first_seq = 0;
  std::vector<xmod::v1::MetricPoint> points;
};

absl::StatusOr<std::vector<Batch>> ReadBatches(const std::string& path, int rows_per_batch) {
  absl::StatusOr<std::unique_ptr<Db>> db = Db::Open(path, SQLITE_OPEN_READONLY, 5000);
  if (!db.ok()) return db.status();
  absl::StatusOr<Stmt> rows = (*db)->Prepare(
      "SELECT run_id, attempt, seq, step, tokens, flops, name, value FROM metrics"
      " ORDER BY run_id, attempt, seq");
  if (!rows.ok()) return rows.status();
  std::vector<Batch> batches;
  while (true) {
    absl::StatusOr<bool> more = rows->Step();
    if (!more.ok()) return more.status();
    if (!*more) break;
    const int64_t run_id = rows->Int(0);
    const int attempt = static_cast<int>(rows->Int(1));
    const int64_t seq = rows->Int(2);
    if (batches.empty() || batches.back().run_id != run_id || batches.back().attempt != attempt ||
        batches.back().first_seq + static_cast<int64_t>(batches.back().points.size()) != seq ||
        static_cast<int>(batches.back().points.size()) >= rows_per_batch) {
      batches.push_back({run_id, attempt, seq, {}});
    }
    xmod::v1::MetricPoint& p = batches.back().points.emplace_back();
    p.set_step(rows->Int(3));
    p.set_tokens(rows->Int(4));
    p.set_flops(rows->Double(5));
    p.set_name(rows->Text(6));
    p.set_value(rows->Double(7));
  }
  return batches;
}

// `sorted` (by run, attempt and seq) reordered as `slots` workers deliver it: round-robin
// over `slots` attempts, a slot taking the next attempt once its attempt's batches are out.
std::vector<Batch> InArrivalOrder(std::vector<Batch> sorted, int slots) {
  struct Range {
    size_t next = 0, end = 0;  // batches of one attempt in `sorted`, [next, end)
  };
  std::vector<Range> attempts;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i == 0 || sorted[i].run_id != sorted[i - 1].run_id ||
        sorted[i].attempt != sorted[i - 1].attempt) {
      attempts.push_back({i, i});
    }
    attempts.back().end = i + 1;
  }
  size_t next_attempt = 0;
  std::vector<Range> active;
  while (active.size() < static_cast<size_t>(slots) && next_attempt < attempts.size()) {
    active.push_back(attempts[next_attempt++]);
  }
  std::vector<Batch> arrived;
  arrived.reserve(sorted.size());
  while (!active.empty()) {
    for (Range& slot : active) {
      arrived.push_back(std::move(sorted[slot.next++]));
      if (slot.next == slot.end && next_attempt < attempts.size()) {
        slot = attempts[next_attempt++];
      }
    }
    active.erase(std::remove_if(active.begin(), active.end(),
                                [](const Range& slot) { return slot.next == slot.end; }),
                 active.end());
  }
  return arrived;
}

// A new database at `path` with the coordinator's pragmas and schema.
absl::StatusOr<std::unique_ptr<Db>> CreateTarget(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 5000);
  if (!db.ok()) return db.status();
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL"}) {
    absl::StatusOr<Stmt> stmt = (*db)->Prepare(pragma);  // journal_mode returns a row
    if (!stmt.ok()) return stmt.status();
    if (absl::StatusOr<bool> stepped = stmt->Step(); !stepped.ok()) return stepped.status();
  }
  if (absl::Status s = Migrate(**db); !s.ok()) return s;
  return db;
}

}  // namespace

absl::StatusOr<RawInsertResult> RawInsertMetrics(const std::string& source_db,
                                                 const std::string& target_db,
                                                 int rows_per_transaction,
                                                 const RawInsertOrder& order) {
  const bool arrival = order.concurrent_attempts > 0;
  absl::StatusOr<std::vector<Batch>> batches =
      ReadBatches(source_db, arrival ? order.rows_per_report : rows_per_transaction);
  if (!batches.ok()) return batches.status();
  if (arrival) *batches = InArrivalOrder(std::move(*batches), order.concurrent_attempts);
  absl::StatusOr<std::unique_ptr<Db>> db = CreateTarget(target_db);
  if (!db.ok()) return db.status();
  RawInsertResult result;
  const absl::Time start = absl::Now();
  const double cpu_start = CallingThreadCpuSeconds();
  int64_t in_transaction = 0;  // rows since BEGIN
  for (const Batch& batch : *batches) {
    if (in_transaction == 0) {
      if (absl::Status s = (*db)->Exec("BEGIN"); !s.ok()) return s;
    }
    absl::Status s =
        InsertMetrics(**db, batch.run_id, batch.attempt, batch.first_seq, batch.points);
    if (!s.ok()) return s;
    in_transaction += static_cast<int64_t>(batch.points.size());
    result.rows += static_cast<int64_t>(batch.points.size());
    if (in_transaction >= rows_per_transaction || &batch == &batches->back()) {
      if (s = (*db)->Exec("COMMIT"); !s.ok()) return s;
      in_transaction = 0;
    }
  }
  result.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  result.cpu_seconds = CallingThreadCpuSeconds() - cpu_start;
  return result;
}

}  // namespace xmod::bench
