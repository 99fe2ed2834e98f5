// Thin RAII wrappers over the sqlite3 C API: a connection (Db) and a prepared statement
// (Stmt) with absl::Status errors. The one SQLite access of xmod: the coordinator's store
// and the fitter's database reads (resultsdb/run_curves.h) both go through it. A Db is
// thread-compatible: one thread at a time (the store gives each thread its own connection).
#ifndef XMOD_RESULTSDB_SQLITE_DB_H_
#define XMOD_RESULTSDB_SQLITE_DB_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

class Stmt;

class Db {
 public:
  // Opens `path` with sqlite3_open_v2 `flags` (e.g. SQLITE_OPEN_READWRITE|SQLITE_OPEN_CREATE).
  // UNAVAILABLE naming the path when it cannot be opened.
  static absl::StatusOr<std::unique_ptr<Db>> Open(const std::string& path, int flags,
                                                  int busy_timeout_ms);
  // Open(path, SQLITE_OPEN_READONLY, busy_timeout_ms): for readers that change nothing.
  static absl::StatusOr<std::unique_ptr<Db>> OpenReadOnly(const std::string& path,
                                                          int busy_timeout_ms);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Errors carry sqlite's message with the code of its cause: RESOURCE_EXHAUSTED when the
  // database or the disk is full (SQLITE_FULL), UNAVAILABLE for I/O errors, a busy or locked
  // database or a file that cannot be opened, INTERNAL for the rest.
  // Runs one or more statements without results.
  absl::Status Exec(absl::string_view sql);
  // Prepares one statement.
  absl::StatusOr<Stmt> Prepare(absl::string_view sql);
  // Prepares a fixed statement once per connection and hands out the same one again once
  // its Stmt is gone (which resets it): for the SQL of hot paths, such as metric inserts and
  // the writer's savepoints, that would otherwise be parsed for every batch. Only for SQL
  // written in the code (the cache keeps every distinct text); the same text in use twice
  // at once gets a fresh, uncached statement the second time.
  absl::StatusOr<Stmt> PrepareCached(absl::string_view sql);
  // Runs one fixed statement without results, prepared through PrepareCached; its errors
  // read as Exec's.
  absl::Status ExecCached(absl::string_view sql);
  int64_t LastInsertRowId() const;
  int Changes() const;
  sqlite3* raw() const { return db_; }
  // A status carrying `what` and the connection's last error message, coded as above.
  absl::Status Error(absl::string_view what) const;

 private:
  struct CachedStmt {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;  // a Stmt holds it
  };

  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  // By SQL text; nodes stay where they are, so a Stmt may point at its entry's in_use.
  absl::node_hash_map<std::string, CachedStmt> cache_;
};

// A prepared statement. Bind indexes start at 1 (sqlite's convention); columns at 0.
class Stmt {
 public:
  // `in_use` is the connection's mark of a cached statement (Db::PrepareCached), cleared
  // when this Stmt is gone; null for a statement this Stmt owns and finalizes.
  Stmt(Db* db, sqlite3_stmt* stmt, bool* in_use = nullptr)
      : db_(db), stmt_(stmt), in_use_(in_use) {}
  Stmt(Stmt&& other) noexcept : db_(other.db_), stmt_(other.stmt_), in_use_(other.in_use_) {
    other.stmt_ = nullptr;
    other.in_use_ = nullptr;
  }
  Stmt& operator=(Stmt&&) = delete;
  ~Stmt();

  Stmt& Bind(int index, int64_t value);
  Stmt& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Stmt& Bind(int index, double value);
  Stmt& Bind(int index, absl::string_view text);
  Stmt& Bind(int index, const char* text) { return Bind(index, absl::string_view(text)); }
  Stmt& BindBlob(int index, absl::string_view bytes);
  Stmt& BindNull(int index);
  // The value, or NULL for nullopt (a value that is not known or does not apply).
  Stmt& BindOptional(int index, std::optional<int64_t> value);
  Stmt& BindOptional(int index, std::optional<double> value);
  // The text, or NULL when it is empty.
  Stmt& BindTextOrNull(int index, absl::string_view text);

  // Advances: true with a row, false when done; an error otherwise.
  absl::StatusOr<bool> Step();
  // Steps to completion (for INSERT/UPDATE/DELETE).
  absl::Status Run();
  // Clears bindings and rewinds, for reuse with new values.
  void Reset();

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string Text(int col) const;
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  // nullopt for NULL, else the value.
  std::optional<double> OptionalDouble(int col) const;
  // A REAL cell, or NaN when it holds no number: NULL, or text such as the 'NaN' the store
  // writes for a NaN metric (sqlite would turn a bound NaN into NULL).
  double RealOrNaN(int col) const;
  int ColumnCount() const { return sqlite3_column_count(stmt_); }
  sqlite3_stmt* raw() const { return stmt_; }

 private:
  Db* db_;
  sqlite3_stmt* stmt_;
  bool* in_use_;
};

// `text` as an SQL string literal: in single quotes, each quote doubled.
std::string SqlString(absl::string_view text);

}  // namespace xmod

#endif  // XMOD_RESULTSDB_SQLITE_DB_H_
