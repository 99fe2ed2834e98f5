// Store: the coordinator's SQLite database (one file, WAL mode), the only place state is
// kept (docs/design.md, "Storage").
//
// Writes: ONE writer thread owns the read-write connection. Callers enqueue write closures;
// the thread drains the queue and runs many closures in one transaction (each inside its own
// SAVEPOINT, so a failing closure rolls back alone), commits, and only then fulfils each
// caller's future. A fulfilled OK future means the write is durable (synchronous=FULL).
// Two lanes: Write() for the coordinator's state (scheduling, submissions) and WriteBulk()
// for metric points. A transaction starts with closures of one lane; Write()'s go first
// whenever any wait. Once a Write() waits while a bulk transaction runs, that transaction
// returns the bulk closures it has not run to the front of the bulk lane, runs the waiting
// Write()s in their place and commits them with the bulk closures it ran: one commit for
// both. So a lease or an attempt's end waits behind at most one bulk closure before it runs,
// not behind every metric batch queued before it, while bulk transactions grow when nothing
// else waits. Within a lane, closures commit in the order queued; a Write() may commit
// before WriteBulk() closures queued earlier, never the other way round (a caller that needs
// a bulk write stored first queues behind it in the bulk lane: WriteBulk()).
// Reads: each reading thread borrows a read-only connection from a pool of at most
// max_readers, opened on demand and reused; in WAL mode readers see the last commit and never
// block the writer.
// Thread-safe: every public method may be called from any thread.
#ifndef XMOD_COORDINATOR_STORE_STORE_H_
#define XMOD_COORDINATOR_STORE_STORE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "resultsdb/sqlite_db.h"

namespace xmod {

struct StoreOptions {
  // PRAGMA synchronous: FULL (fsync at every commit: a commit survives power loss) or NORMAL
  // (survives a process crash only). Acknowledgements promise FULL.
  bool synchronous_full = true;
  // Most write closures committed in one transaction: of Write(), of WriteBulk().
  int max_batch = 4096;
  int max_bulk_batch = 256;
  int busy_timeout_ms = 10000;
  // Read-only connections of Read() at most; a reader waits up to reader_wait_ms for one.
  int max_readers = 16;
  int reader_wait_ms = 10000;
  // Called by the writer thread after each transaction with its duration, closure count and
  // outcome: OK once committed, else the storage fault every write of it failed with (see
  // Write()). The coordinator's /metrics say from these whether the database can be written.
  std::function<void(double seconds, int batch_size, const absl::Status& status)> on_commit;
};

// Server-side ceilings of a user's SQL query, whatever the client asks for. Memory per query
// is bounded by max_response_bytes plus one cell, and by max_concurrent queries at once.
struct QueryLimits {
  int max_rows = 10000;                   // more rows are cut off (truncated = true)
  int max_cell_bytes = 1 << 20;           // any string or blob the query makes (sqlite3_limit)
  int64_t max_response_bytes = 16 << 20;  // column names and cells together
  // Execution time: a watchdog thread interrupts the statement (sqlite3_interrupt) when it
  // passes, between two virtual-machine steps.
  int time_limit_ms = 10000;
  // Bytes of a LIKE or GLOB pattern (sqlite3_limit): one match of a pattern of p bytes against
  // a value of n bytes runs inside one virtual-machine step, in time up to n * p.
  int max_like_pattern_bytes = 256;
  // SQLite heap the query may add (sorts, temporary tables: kept in memory, never spilled to
  // disk), checked by the progress handler against sqlite3_memory_used().
  int64_t max_memory_bytes = 256 << 20;
  int max_concurrent = 2;  // queries at once; others wait up to time_limit_ms
};

// Result of a user's read-only SQL query.
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::vector<bool>> nulls;  // parallel to rows
  bool truncated = false;
};

class Store {
 public:
  // The writer thread's name (pthread_setname_np; /proc/PID/task/TID/comm), which
  // bench/load reads to measure the writer's CPU.
  static constexpr char kWriterThreadName[] = "xmod-db-writer";

  using WriteFn = std::function<absl::Status(Db& db)>;
  using ReadFn = std::function<absl::Status(Db& db)>;

  // Opens (creating if needed) the database at `path`, switches it to WAL, migrates the
  // schema and starts the writer thread. UNAVAILABLE when the file cannot be opened,
  // FAILED_PRECONDITION when its schema is newer than this binary's.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const StoreOptions& options);
  // Drains the queue (every accepted write is committed) and closes.
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Enqueues `fn` to run on the writer thread inside a transaction. The future yields fn's
  // status once the transaction committed (or the commit's error). After Close(),
  // UNAVAILABLE at once. A full disk or database fails the write with RESOURCE_EXHAUSTED
  // (an I/O error with UNAVAILABLE), naming the database file and SQLite's cause, and
  // nothing of it is stored; the writer keeps going, so writes succeed again once space
  // returns, without a restart.
  std::future<absl::Status> Write(WriteFn fn);
  // Write() in the bulk lane (header comment): for metric points, and for a write that must
  // follow bulk writes queued before it.
  std::future<absl::Status> WriteBulk(WriteFn fn);
  // Write() and wait.
  absl::Status WriteAndWait(WriteFn fn) { return Write(std::move(fn)).get(); }

  // Runs `fn` on a read-only connection inside one read transaction (a consistent snapshot).
  // RESOURCE_EXHAUSTED naming the limit when all max_readers connections stay busy for
  // reader_wait_ms.
  absl::Status Read(const ReadFn& fn);
  // Read() of one value: `load` (Db& -> absl::StatusOr<T>) in one snapshot; its value, or
  // its error or the read's.
  template <typename Load>
  auto ReadValue(Load load) -> decltype(load(std::declval<Db&>())) {
    typename decltype(load(std::declval<Db&>()))::value_type out;
    absl::Status read = Read([&](Db& db) {
      auto value = load(db);
      if (!value.ok()) return value.status();
      out = *std::move(value);
      return absl::OkStatus();
    });
    if (!read.ok()) return read;
    return out;
  }

  // A user's SQL: one SELECT or WITH statement, run on a read-only connection
  // (SQLITE_OPEN_READONLY) that serves one query at a time, with at most
  // min(max_rows, limits.max_rows) rows (then truncated = true; max_rows <= 0 = the limit).
  // INVALID_ARGUMENT for anything else or a SQL error; RESOURCE_EXHAUSTED naming the limit
  // when a value is longer than max_cell_bytes or a LIKE / GLOB pattern longer than
  // max_like_pattern_bytes, the result outgrows max_response_bytes, the query runs past
  // time_limit_ms or needs more than max_memory_bytes, or max_concurrent queries keep it
  // waiting that long. CANCELLED once `cancelled` (polled while the query waits or runs; may
  // be empty) returns true: the caller went away, and its connection is free again.
  absl::StatusOr<QueryResult> Query(const std::string& sql, int max_rows, const QueryLimits& limits,
                                    const std::function<bool()>& cancelled = nullptr);

  // Stops accepting writes, commits what is queued and joins the writer. Idempotent.
  void Close();

  // Test hook: while `status` is not OK, every transaction is rolled back instead of
  // committed and its writes fail with `status` (e.g. RESOURCE_EXHAUSTED, a full disk).
  // OkStatus() lets commits through again.
  void TEST_FailCommits(absl::Status status);

  const std::string& path() const { return path_; }
  // Read-only connections of Read() open now (idle or lent), at most max_readers.
  int open_readers();
  // User queries running now (not those waiting for a connection), at most max_concurrent.
  int queries_running();

 private:
  struct PendingWrite {
    WriteFn fn;
    std::promise<absl::Status> done;
  };
  class ReaderLease;

  Store(std::string path, StoreOptions options, std::unique_ptr<Db> writer);
  std::future<absl::Status> Enqueue(WriteFn fn, std::deque<PendingWrite>& lane);
  void WriterLoop();
  // Commits `batch` (of one lane); a bulk one ends with the main-lane writes that waited
  // while it ran, in place of the bulk writes it had not run (header comment).
  void CommitBatch(std::vector<PendingWrite>& batch, bool bulk);
  // Runs `batch`'s closures in the open transaction, each in its own savepoint, into
  // `results`; a bulk batch may swap its rest for main-lane writes (CommitBatch), and
  // `results` follows the batch. Not OK when the transaction itself failed.
  absl::Status RunClosures(std::vector<PendingWrite>& batch, bool bulk,
                           std::vector<absl::Status>& results);
  // Appends up to max_batch main-lane writes, in order, to `batch`. Needs queue_mu_.
  void TakeMainWritesLocked(std::vector<PendingWrite>& batch);
  // Moves batch[from...] back to the front of the bulk lane, in order, and appends the
  // main-lane writes that wait (TakeMainWritesLocked).
  void SwapRestOfBulkForMainWrites(std::vector<PendingWrite>& batch, size_t from);
  absl::Status TEST_CommitFailure();
  absl::StatusOr<std::unique_ptr<Db>> TakeReader();
  // Gives a connection of TakeReader() back; null: the one it was to open failed to.
  void ReturnReader(std::unique_ptr<Db> db);
  // A user query's connection (store_query.cc), once fewer than limits.max_concurrent
  // queries run: an idle one, else a new read-only one. RESOURCE_EXHAUSTED at `deadline`,
  // CANCELLED once `cancelled` (may be empty) says so, while waiting.
  absl::StatusOr<std::unique_ptr<Db>> TakeQueryDb(std::chrono::steady_clock::time_point deadline,
                                                  const std::function<bool()>& cancelled,
                                                  const QueryLimits& limits);
  // Gives a connection of TakeQueryDb() back; null: the one it opened failed to set up.
  void ReturnQueryDb(std::unique_ptr<Db> used);

  const std::string path_;
  const StoreOptions options_;
  std::unique_ptr<Db> writer_db_;  // used only by writer_thread_

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<PendingWrite> queue_;       // Write(); guarded by queue_mu_
  std::deque<PendingWrite> bulk_queue_;  // WriteBulk(); guarded by queue_mu_
  bool closing_ = false;                 // guarded by queue_mu_
  std::atomic<int> main_queued_{0};      // queue_.size(), read without the lock
  std::thread writer_thread_;
  std::once_flag close_once_;
  std::mutex fail_mu_;
  absl::Status fail_commits_;  // guarded by fail_mu_; see TEST_FailCommits

  std::mutex readers_mu_;
  std::condition_variable readers_cv_;
  std::vector<std::unique_ptr<Db>> idle_readers_;  // guarded by readers_mu_
  int open_readers_ = 0;                           // guarded by readers_mu_

  // Connections of user queries, each used by one query at a time (store_query.cc).
  std::mutex query_mu_;
  std::condition_variable query_cv_;
  int queries_running_ = 0;                          // guarded by query_mu_
  std::vector<std::unique_ptr<Db>> idle_query_dbs_;  // guarded by query_mu_
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_STORE_STORE_H_
