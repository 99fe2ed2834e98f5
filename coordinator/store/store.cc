// See store.h. The writer thread and the reader pool (user queries: store_query.cc).
#include "coordinator/store/store.h"

#include <pthread.h>

#include <chrono>
#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "resultsdb/schema.h"

namespace xmod {
namespace {

// A failed transaction's status for its callers: the same code, naming the database file,
// SQLite's cause and what the coordinator does until the volume recovers.
absl::Status DescribeWriteFault(const std::string& path, const absl::Status& cause) {
  const char* until = absl::IsResourceExhausted(cause) ? "space returns on its volume"
                                                       : "its volume can be written again";
  return absl::Status(cause.code(),
                      absl::StrCat("the database ", path, " cannot be written (", cause.message(),
                                   "): nothing of this request was stored; new work is refused "
                                   "until ",
                                   until, ", while reads and running runs go on"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const StoreOptions& options) {
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, options.busy_timeout_ms);
  if (!db.ok()) return db.status();
  {
    absl::StatusOr<Stmt> mode = (*db)->Prepare("PRAGMA journal_mode=WAL");
    if (!mode.ok()) return mode.status();
    absl::StatusOr<bool> row = mode->Step();
    if (!row.ok()) return row.status();
    if (!*row || absl::AsciiStrToLower(mode->Text(0)) != "wal") {
      return absl::UnavailableError(absl::StrCat("cannot switch ", path, " to WAL mode"));
    }
  }
  if (absl::Status s = (*db)->Exec(options.synchronous_full ? "PRAGMA synchronous=FULL"
                                                            : "PRAGMA synchronous=NORMAL");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Migrate(**db); !s.ok()) return s;
  return std::unique_ptr<Store>(new Store(path, options, *std::move(db)));
}

Store::Store(std::string path, StoreOptions options, std::unique_ptr<Db> writer)
    : path_(std::move(path)), options_(std::move(options)), writer_db_(std::move(writer)) {
  writer_thread_ = std::thread([this] { WriterLoop(); });
}

Store::~Store() { Close(); }

void Store::Close() {
  std::call_once(close_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      closing_ = true;
    }
    queue_cv_.notify_all();
    writer_thread_.join();
  });
}

std::future<absl::Status> Store::Write(WriteFn fn) { return Enqueue(std::move(fn), queue_); }

std::future<absl::Status> Store::WriteBulk(WriteFn fn) {
  return Enqueue(std::move(fn), bulk_queue_);
}

std::future<absl::Status> Store::Enqueue(WriteFn fn, std::deque<PendingWrite>& lane) {
  PendingWrite pending{std::move(fn), {}};
  std::future<absl::Status> future = pending.done.get_future();
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (closing_) {
      pending.done.set_value(absl::UnavailableError("the store is closed"));
      return future;
    }
    lane.push_back(std::move(pending));
    if (&lane == &queue_) main_queued_.fetch_add(1, std::memory_order_relaxed);
  }
  queue_cv_.notify_one();
  return future;
}

void Store::WriterLoop() {
  pthread_setname_np(pthread_self(), kWriterThreadName);
  std::vector<PendingWrite> batch;
  while (true) {
    bool bulk = false;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return closing_ || !queue_.empty() || !bulk_queue_.empty(); });
      if (queue_.empty() && bulk_queue_.empty()) return;  // closing and drained
      // Write()'s lane first (header comment).
      bulk = queue_.empty();
      if (bulk) {
        while (!bulk_queue_.empty() && static_cast<int>(batch.size()) < options_.max_bulk_batch) {
          batch.push_back(std::move(bulk_queue_.front()));
          bulk_queue_.pop_front();
        }
      } else {
        TakeMainWritesLocked(batch);
      }
    }
    CommitBatch(batch, bulk);
    batch.clear();
  }
}

void Store::TakeMainWritesLocked(std::vector<PendingWrite>& batch) {
  int taken = 0;
  while (!queue_.empty() && taken < options_.max_batch) {
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
    ++taken;
  }
  main_queued_.fetch_sub(taken, std::memory_order_relaxed);
}

void Store::SwapRestOfBulkForMainWrites(std::vector<PendingWrite>& batch, size_t from) {
  std::lock_guard<std::mutex> lock(queue_mu_);
  bulk_queue_.insert(bulk_queue_.begin(), std::make_move_iterator(batch.begin() + from),
                     std::make_move_iterator(batch.end()));
  batch.erase(batch.begin() + from, batch.end());
  TakeMainWritesLocked(batch);
}

absl::Status Store::RunClosures(std::vector<PendingWrite>& batch, bool bulk,
                                std::vector<absl::Status>& results) {
  Db& db = *writer_db_;
  for (size_t i = 0; i < batch.size(); ++i) {
    // Once a main-lane write waits, a bulk transaction takes it in place of the bulk writes
    // it has not run, and ends with it (header comment).
    if (bulk && i > 0 && main_queued_.load(std::memory_order_relaxed) > 0) {
      SwapRestOfBulkForMainWrites(batch, i);
      results.resize(batch.size());
      bulk = false;
    }
    if (absl::Status s = db.ExecCached("SAVEPOINT w"); !s.ok()) return s;
    results[i] = batch[i].fn(db);
    if (!results[i].ok() && sqlite3_get_autocommit(db.raw()) != 0) {
      // sqlite rolled the whole transaction back itself (SQLITE_FULL, SQLITE_IOERR, ...):
      // the writes before this one are gone too.
      return results[i];
    }
    if (!results[i].ok()) {
      if (absl::Status s = db.Exec("ROLLBACK TO w"); !s.ok()) return s;
    }
    if (absl::Status s = db.ExecCached("RELEASE w"); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void Store::CommitBatch(std::vector<PendingWrite>& batch, bool bulk) {
  const auto start = std::chrono::steady_clock::now();
  Db& db = *writer_db_;
  std::vector<absl::Status> results(batch.size());
  absl::Status txn = db.ExecCached("BEGIN IMMEDIATE");
  if (txn.ok()) txn = RunClosures(batch, bulk, results);
  if (txn.ok()) {
    absl::Status injected = TEST_CommitFailure();
    txn = injected.ok() ? db.ExecCached("COMMIT") : injected;
  }
  if (!txn.ok()) {
    LOG_EVERY_N(ERROR, 100) << "store: transaction of " << batch.size()
                            << " writes failed: " << txn;
    if (sqlite3_get_autocommit(db.raw()) == 0) db.Exec("ROLLBACK").IgnoreError();
    txn = DescribeWriteFault(path_, txn);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options_.on_commit) options_.on_commit(seconds, static_cast<int>(batch.size()), txn);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].done.set_value(txn.ok() ? results[i] : txn);
  }
}

void Store::TEST_FailCommits(absl::Status status) {
  std::lock_guard<std::mutex> lock(fail_mu_);
  fail_commits_ = std::move(status);
}

absl::Status Store::TEST_CommitFailure() {
  std::lock_guard<std::mutex> lock(fail_mu_);
  return fail_commits_;
}

absl::StatusOr<std::unique_ptr<Db>> Store::TakeReader() {
  {
    std::unique_lock<std::mutex> lock(readers_mu_);
    if (!readers_cv_.wait_for(lock, std::chrono::milliseconds(options_.reader_wait_ms), [this] {
          return !idle_readers_.empty() || open_readers_ < options_.max_readers;
        })) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "store: all ", options_.max_readers, " reader connections stayed busy for ",
          options_.reader_wait_ms, " ms (at most ", options_.max_readers, "); try again"));
    }
    if (!idle_readers_.empty()) {
      std::unique_ptr<Db> db = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return db;
    }
    ++open_readers_;  // this thread opens one more, outside the lock
  }
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(path_, SQLITE_OPEN_READONLY, options_.busy_timeout_ms);
  if (!db.ok()) ReturnReader(nullptr);
  return db;
}

void Store::ReturnReader(std::unique_ptr<Db> db) {
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    if (db == nullptr) {
      --open_readers_;  // it never opened
    } else {
      idle_readers_.push_back(std::move(db));
    }
  }
  readers_cv_.notify_one();
}

int Store::open_readers() {
  std::lock_guard<std::mutex> lock(readers_mu_);
  return open_readers_;
}

absl::Status Store::Read(const ReadFn& fn) {
  absl::StatusOr<std::unique_ptr<Db>> db = TakeReader();
  if (!db.ok()) return db.status();
  absl::Status status = (*db)->Exec("BEGIN");
  if (status.ok()) {
    status = fn(**db);
    absl::Status end = (*db)->Exec("COMMIT");
    if (status.ok()) status = end;
  }
  ReturnReader(*std::move(db));
  return status;
}

}  // namespace xmod
