// See store.h. The writer thread, the reader pool and the user query path.
#include "coordinator/store.h"

#include <chrono>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/schema.h"
#include "glog/logging.h"

namespace xmod {

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

std::future<absl::Status> Store::Write(WriteFn fn) {
  PendingWrite pending{std::move(fn), {}};
  std::future<absl::Status> future = pending.done.get_future();
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (closing_) {
      pending.done.set_value(absl::UnavailableError("the store is closed"));
      return future;
    }
    queue_.push_back(std::move(pending));
  }
  queue_cv_.notify_one();
  return future;
}

void Store::WriterLoop() {
  std::vector<PendingWrite> batch;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing and drained
      while (!queue_.empty() && static_cast<int>(batch.size()) < options_.max_batch) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    CommitBatch(batch);
    batch.clear();
  }
}

void Store::CommitBatch(std::vector<PendingWrite>& batch) {
  const auto start = std::chrono::steady_clock::now();
  Db& db = *writer_db_;
  std::vector<absl::Status> results(batch.size());
  absl::Status txn = db.Exec("BEGIN IMMEDIATE");
  for (size_t i = 0; txn.ok() && i < batch.size(); ++i) {
    txn = db.Exec("SAVEPOINT w");
    if (!txn.ok()) break;
    results[i] = batch[i].fn(db);
    if (!results[i].ok()) txn = db.Exec("ROLLBACK TO w");
    if (txn.ok()) txn = db.Exec("RELEASE w");
  }
  if (txn.ok()) txn = db.Exec("COMMIT");
  if (!txn.ok()) {
    LOG(ERROR) << "store: transaction of " << batch.size() << " writes failed: " << txn;
    db.Exec("ROLLBACK").IgnoreError();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options_.on_commit) options_.on_commit(seconds, static_cast<int>(batch.size()));
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].done.set_value(txn.ok() ? results[i] : txn);
  }
}

absl::StatusOr<std::unique_ptr<Db>> Store::TakeReader() {
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    if (!idle_readers_.empty()) {
      std::unique_ptr<Db> db = std::move(idle_readers_.back());
      idle_readers_.pop_back();
      return db;
    }
  }
  return Db::Open(path_, SQLITE_OPEN_READONLY, options_.busy_timeout_ms);
}

void Store::ReturnReader(std::unique_ptr<Db> db) {
  std::lock_guard<std::mutex> lock(readers_mu_);
  idle_readers_.push_back(std::move(db));
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

namespace {

// Skips whitespace and SQL comments; returns the first keyword, upper-cased.
std::string FirstKeyword(absl::string_view sql) {
  size_t i = 0;
  while (i < sql.size()) {
    if (absl::ascii_isspace(static_cast<unsigned char>(sql[i]))) {
      ++i;
    } else if (sql.substr(i, 2) == "--") {
      const size_t end = sql.find('\n', i);
      i = end == absl::string_view::npos ? sql.size() : end + 1;
    } else if (sql.substr(i, 2) == "/*") {
      const size_t end = sql.find("*/", i + 2);
      i = end == absl::string_view::npos ? sql.size() : end + 2;
    } else {
      break;
    }
  }
  size_t j = i;
  while (j < sql.size() && absl::ascii_isalpha(static_cast<unsigned char>(sql[j]))) ++j;
  return absl::AsciiStrToUpper(sql.substr(i, j - i));
}

struct Deadline {
  std::chrono::steady_clock::time_point at;
};

int InterruptAfterDeadline(void* arg) {
  return std::chrono::steady_clock::now() > static_cast<Deadline*>(arg)->at ? 1 : 0;
}

}  // namespace

absl::StatusOr<QueryResult> Store::Query(const std::string& sql, int max_rows, int time_limit_ms) {
  const std::string keyword = FirstKeyword(sql);
  if (keyword != "SELECT" && keyword != "WITH") {
    return absl::InvalidArgumentError(
        absl::StrCat("sql: only SELECT or WITH queries are allowed, not \"", keyword, "\""));
  }
  // A separate connection opened read-only: even a statement sqlite misjudges cannot write.
  absl::StatusOr<std::unique_ptr<Db>> db =
      Db::Open(path_, SQLITE_OPEN_READONLY, options_.busy_timeout_ms);
  if (!db.ok()) return db.status();
  sqlite3* raw = (*db)->raw();
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(raw, sql.c_str(), static_cast<int>(sql.size()), &stmt, &tail) !=
      SQLITE_OK) {
    return absl::InvalidArgumentError(absl::StrCat("sql: ", sqlite3_errmsg(raw)));
  }
  Stmt owned(db->get(), stmt);
  if (tail != nullptr && !FirstKeyword(tail).empty()) {
    return absl::InvalidArgumentError("sql: exactly one statement is allowed");
  }
  if (!sqlite3_stmt_readonly(stmt)) {
    return absl::InvalidArgumentError("sql: the statement would write; queries are read-only");
  }
  Deadline deadline{std::chrono::steady_clock::now() + std::chrono::milliseconds(time_limit_ms)};
  sqlite3_progress_handler(raw, 10000, InterruptAfterDeadline, &deadline);

  QueryResult result;
  for (int c = 0; c < owned.ColumnCount(); ++c) {
    result.columns.push_back(sqlite3_column_name(stmt, c));
  }
  while (true) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      if (rc == SQLITE_INTERRUPT) {
        return absl::DeadlineExceededError(
            absl::StrCat("sql: query ran past its limit of ", time_limit_ms, " ms"));
      }
      return absl::InvalidArgumentError(absl::StrCat("sql: ", sqlite3_errmsg(raw)));
    }
    if (static_cast<int>(result.rows.size()) >= max_rows) {
      result.truncated = true;
      break;
    }
    std::vector<std::string> row;
    std::vector<bool> nulls;
    for (int c = 0; c < owned.ColumnCount(); ++c) {
      nulls.push_back(owned.IsNull(c));
      row.push_back(owned.Text(c));
    }
    result.rows.push_back(std::move(row));
    result.nulls.push_back(std::move(nulls));
  }
  sqlite3_progress_handler(raw, 0, nullptr, nullptr);
  return result;
}

}  // namespace xmod
