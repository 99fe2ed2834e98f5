// See store.h: Store::Query, a user's read-only SQL under server-side ceilings. Each query
// borrows a read-only connection of its own (at most limits.max_concurrent at once) whose
// SQLITE_LIMIT_LENGTH caps every string or blob, SQLITE_LIMIT_LIKE_PATTERN_LENGTH every LIKE
// or GLOB pattern, whose trim, instr and replace run in linear time (linear_functions.h) and whose
// temporary storage stays in memory, with a progress handler that interrupts it when SQLite's
// heap has grown past the query's allowance and a watchdog thread that interrupts it at its
// deadline or when its caller cancels; rows are copied out only while the response stays
// under its byte limit.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "coordinator/store/linear_functions.h"
#include "coordinator/store/store.h"

namespace xmod {
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

// What the progress handler enforces, and whether it interrupted.
struct MemoryBudget {
  int64_t ceiling = 0;  // sqlite3_memory_used() bound
  bool exceeded = false;
};

int InterruptOverBudget(void* arg) {
  MemoryBudget* budget = static_cast<MemoryBudget*>(arg);
  budget->exceeded = sqlite3_memory_used() > budget->ceiling;
  return budget->exceeded ? 1 : 0;
}

// Whether the bytes of column `c` of the current row (text, or a blob's bytes) are valid
// UTF-8, as protobuf string fields must be: no overlong forms, surrogates or code points
// past U+10FFFF.
bool IsUtf8Text(sqlite3_stmt* stmt, int c) {
  const auto* p = sqlite3_column_type(stmt, c) == SQLITE_BLOB
                      ? static_cast<const unsigned char*>(sqlite3_column_blob(stmt, c))
                      : sqlite3_column_text(stmt, c);
  const int n = sqlite3_column_bytes(stmt, c);
  static constexpr unsigned int kMinimum[] = {0, 0x80, 0x800, 0x10000};
  for (int i = 0; i < n;) {
    const unsigned char lead = p[i];
    int extra;
    unsigned int code;
    if (lead < 0x80) {
      extra = 0, code = lead;
    } else if ((lead & 0xe0) == 0xc0) {
      extra = 1, code = lead & 0x1fu;
    } else if ((lead & 0xf0) == 0xe0) {
      extra = 2, code = lead & 0x0fu;
    } else if ((lead & 0xf8) == 0xf0) {
      extra = 3, code = lead & 0x07u;
    } else {
      return false;
    }
    for (int k = 1; k <= extra; ++k) {
      if (i + k >= n || (p[i + k] & 0xc0) != 0x80) return false;
      code = (code << 6) | (p[i + k] & 0x3fu);
    }
    if (code < kMinimum[extra] || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

// Column `c` of the current row as SQLite writes a blob literal: X'0A1B...'.
std::string BlobLiteral(sqlite3_stmt* stmt, int c) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(stmt, c));
  const int n = sqlite3_column_bytes(stmt, c);
  std::string out = "X'";
  out.reserve(2 * static_cast<size_t>(n) + 3);
  for (int i = 0; i < n; ++i) {
    out.push_back(kHex[p[i] >> 4]);
    out.push_back(kHex[p[i] & 0xf]);
  }
  out.push_back('\'');
  return out;
}

// How often a waiting or running query asks whether its caller cancelled.
constexpr std::chrono::milliseconds kCancelPoll(20);

// Why a query was stopped from outside.
enum class Stop { kNone, kDeadline, kCancelled };

// Stop::kDeadline once `deadline` passed, kCancelled once `cancelled` (may be empty) says so.
Stop StopReason(std::chrono::steady_clock::time_point deadline,
                const std::function<bool()>& cancelled) {
  if (std::chrono::steady_clock::now() >= deadline) return Stop::kDeadline;
  if (cancelled && cancelled()) return Stop::kCancelled;
  return Stop::kNone;
}

// A thread that interrupts the statement running on `db` (sqlite3_interrupt may be called
// from any thread) once StopReason is not kNone, so a query stops at its deadline or on
// cancel however long it goes between progress-handler calls. It interrupts again every
// kCancelPoll until the query returns: sqlite clears an interrupt when a statement starts
// stepping, so one issued while the statement was still being prepared would be lost and a
// runaway query would never stop. Joined when destroyed, before the connection is used again.
class Watchdog {
 public:
  Watchdog(sqlite3* db, std::chrono::steady_clock::time_point deadline,
           const std::function<bool()>& cancelled)
      : thread_([this, db, deadline, &cancelled] {
          std::unique_lock<std::mutex> lock(mu_);
          while (!done_) {
            if (stop_ == Stop::kNone) stop_ = StopReason(deadline, cancelled);
            if (stop_ != Stop::kNone) {
              sqlite3_interrupt(db);
              cv_.wait_for(lock, kCancelPoll);
              continue;
            }
            const auto wake = std::chrono::steady_clock::now() + kCancelPoll;
            cv_.wait_until(lock, cancelled ? std::min(deadline, wake) : deadline);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  Stop stop() {
    std::lock_guard<std::mutex> lock(mu_);
    return stop_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;        // guarded by mu_
  Stop stop_ = Stop::kNone;  // guarded by mu_
  std::thread thread_;       // last: starts once the members above exist
};

absl::Status StopError(Stop stop, const QueryLimits& limits) {
  if (stop == Stop::kCancelled) {
    return absl::CancelledError("sql: the caller cancelled the query; it was interrupted");
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("sql: the query ran past its time limit of ", limits.time_limit_ms, " ms"));
}

// sqlite3_result_error text of a LIKE or GLOB pattern past SQLITE_LIMIT_LIKE_PATTERN_LENGTH.
constexpr absl::string_view kPatternTooLong = "LIKE or GLOB pattern too complex";

// Virtual-machine steps between two progress checks: few enough that a sort of 1 MiB values
// cannot grow far past the memory allowance in between.
constexpr int kProgressSteps = 100;

// Every column-name and cell byte, plus a little per cell for its framing in the response.
constexpr int64_t kCellOverheadBytes = 4;

// A query's step that returned `rc` (neither a row nor done) as the error the caller gets.
absl::Status StepError(int rc, sqlite3* raw, const MemoryBudget& budget,
                       const QueryLimits& limits) {
  if ((rc & 0xff) == SQLITE_INTERRUPT && budget.exceeded) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sql: the query needs more than its memory limit of ", limits.max_memory_bytes,
                     " bytes (sorts and temporary tables)"));
  }
  if (sqlite3_errmsg(raw) == kPatternTooLong) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sql: a LIKE or GLOB pattern is longer than the limit of ",
                     limits.max_like_pattern_bytes, " bytes"));
  }
  if ((rc & 0xff) == SQLITE_TOOBIG) {
    return absl::ResourceExhaustedError(absl::StrCat("sql: a value exceeds the limit of ",
                                                     limits.max_cell_bytes, " bytes per cell"));
  }
  return absl::InvalidArgumentError(absl::StrCat("sql: ", sqlite3_errmsg(raw)));
}

// Appends the current row of `owned` to `out`, counting its bytes into `bytes`;
// RESOURCE_EXHAUSTED, before a cell is copied, once they pass limits.max_response_bytes.
absl::Status CopyRow(Stmt& owned, sqlite3_stmt* stmt, const QueryLimits& limits, int64_t& bytes,
                     QueryResult& out) {
  std::vector<std::string> row;
  std::vector<bool> nulls;
  for (int c = 0; c < owned.ColumnCount(); ++c) {
    // Size first: a cell that would overflow the response is never copied. A value
    // whose bytes are not UTF-8 travels as a blob literal, twice its size plus X''.
    const bool as_blob = !IsUtf8Text(stmt, c);
    const int64_t cell = sqlite3_column_bytes(stmt, c) * (as_blob ? 2 : 1) + (as_blob ? 3 : 0);
    bytes += cell + kCellOverheadBytes;
    if (bytes > limits.max_response_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("sql: the result exceeds the limit of ", limits.max_response_bytes,
                       " bytes per response after ", out.rows.size(),
                       " rows; select fewer rows or columns, or shorter values"));
    }
    nulls.push_back(owned.IsNull(c));
    row.push_back(as_blob ? BlobLiteral(stmt, c) : owned.Text(c));
  }
  out.rows.push_back(std::move(row));
  out.nulls.push_back(std::move(nulls));
  return absl::OkStatus();
}

// Prepares `sql` on `db` (one read-only statement) and copies out at most `max_rows` rows.
absl::StatusOr<QueryResult> RunQuery(Db& db, const std::string& sql, int max_rows,
                                     const QueryLimits& limits, const MemoryBudget& budget) {
  sqlite3* raw = db.raw();
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  if (sqlite3_prepare_v2(raw, sql.c_str(), static_cast<int>(sql.size()), &stmt, &tail) !=
      SQLITE_OK) {
    if (sqlite3_errcode(raw) == SQLITE_TOOBIG) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "sql: the statement is longer than the limit of ", limits.max_cell_bytes, " bytes"));
    }
    return absl::InvalidArgumentError(absl::StrCat("sql: ", sqlite3_errmsg(raw)));
  }
  Stmt owned(&db, stmt);
  if (tail != nullptr && !FirstKeyword(tail).empty()) {
    return absl::InvalidArgumentError("sql: exactly one statement is allowed");
  }
  if (!sqlite3_stmt_readonly(stmt)) {
    return absl::InvalidArgumentError("sql: the statement would write; queries are read-only");
  }
  QueryResult out;
  int64_t bytes = 0;
  for (int c = 0; c < owned.ColumnCount(); ++c) {
    out.columns.push_back(sqlite3_column_name(stmt, c));
    bytes += static_cast<int64_t>(out.columns.back().size()) + kCellOverheadBytes;
  }
  while (true) {
    const int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return StepError(rc, raw, budget, limits);
    if (static_cast<int>(out.rows.size()) >= max_rows) {
      out.truncated = true;
      break;
    }
    if (absl::Status s = CopyRow(owned, stmt, limits, bytes, out); !s.ok()) return s;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Db>> Store::TakeQueryDb(
    std::chrono::steady_clock::time_point deadline, const std::function<bool()>& cancelled,
    const QueryLimits& limits) {
  std::unique_ptr<Db> db;
  {
    std::unique_lock<std::mutex> lock(query_mu_);
    while (queries_running_ >= limits.max_concurrent) {
      const Stop stop = StopReason(deadline, cancelled);
      if (stop == Stop::kCancelled) return StopError(stop, limits);
      if (stop == Stop::kDeadline) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "sql: ", limits.max_concurrent, " queries kept running for the whole time limit of ",
            limits.time_limit_ms, " ms (at most ", limits.max_concurrent, " at once); try again"));
      }
      query_cv_.wait_until(lock,
                           std::min(deadline, std::chrono::steady_clock::now() + kCancelPoll));
    }
    ++queries_running_;
    if (!idle_query_dbs_.empty()) {
      db = std::move(idle_query_dbs_.back());
      idle_query_dbs_.pop_back();
    }
  }
  if (db != nullptr) return db;
  // A separate connection opened read-only: even a statement sqlite misjudges cannot write.
  absl::StatusOr<std::unique_ptr<Db>> opened =
      Db::Open(path_, SQLITE_OPEN_READONLY, options_.busy_timeout_ms);
  if (!opened.ok()) {
    ReturnQueryDb(nullptr);
    return opened.status();
  }
  // Sorts and temporary tables in memory, where the allowance counts them, not on disk.
  absl::Status s = (*opened)->Exec("PRAGMA temp_store = MEMORY");
  if (s.ok()) s = RegisterLinearFunctions((*opened)->raw());
  if (!s.ok()) {
    ReturnQueryDb(nullptr);
    return s;
  }
  return opened;
}

void Store::ReturnQueryDb(std::unique_ptr<Db> used) {
  {
    std::lock_guard<std::mutex> lock(query_mu_);
    --queries_running_;
    if (used != nullptr) idle_query_dbs_.push_back(std::move(used));
  }
  query_cv_.notify_one();
}

absl::StatusOr<QueryResult> Store::Query(const std::string& sql, int max_rows,
                                         const QueryLimits& limits,
                                         const std::function<bool()>& cancelled) {
  const std::string keyword = FirstKeyword(sql);
  if (keyword != "SELECT" && keyword != "WITH") {
    return absl::InvalidArgumentError(
        absl::StrCat("sql: only SELECT or WITH queries are allowed, not \"", keyword, "\""));
  }
  if (max_rows <= 0 || max_rows > limits.max_rows) max_rows = limits.max_rows;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.time_limit_ms);
  // One query per connection, at most max_concurrent at once.
  absl::StatusOr<std::unique_ptr<Db>> db = TakeQueryDb(deadline, cancelled, limits);
  if (!db.ok()) return db.status();
  sqlite3* raw = (*db)->raw();
  sqlite3_limit(raw, SQLITE_LIMIT_LENGTH, limits.max_cell_bytes);
  sqlite3_limit(raw, SQLITE_LIMIT_LIKE_PATTERN_LENGTH, limits.max_like_pattern_bytes);
  MemoryBudget budget;
  budget.ceiling = sqlite3_memory_used() + limits.max_memory_bytes;
  sqlite3_progress_handler(raw, kProgressSteps, InterruptOverBudget, &budget);

  std::optional<Watchdog> watchdog(std::in_place, raw, deadline, cancelled);
  absl::StatusOr<QueryResult> result = RunQuery(**db, sql, max_rows, limits, budget);
  const Stop stopped = watchdog->stop();
  watchdog.reset();  // joined: it can no longer interrupt the connection's next user
  sqlite3_progress_handler(raw, 0, nullptr, nullptr);
  ReturnQueryDb(*std::move(db));
  // Interrupted from outside (the statement fails with SQLITE_INTERRUPT or, inside prepare,
  // some other error): say why. A query that finished first keeps its result.
  if (!result.ok() && stopped != Stop::kNone && !budget.exceeded) return StopError(stopped, limits);
  return result;
}

int Store::queries_running() {
  std::lock_guard<std::mutex> lock(query_mu_);
  return queries_running_;
}

}  // namespace xmod
