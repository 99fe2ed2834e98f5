// See sqlite_db.h.
#include "resultsdb/sqlite_db.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace xmod {
namespace {

// The status code for a failed sqlite call with (extended) result code `rc`.
absl::StatusCode CodeOf(int rc) {
  switch (rc & 0xff) {
    case SQLITE_FULL:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_IOERR:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path, int flags,
                                             int busy_timeout_ms) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close(raw);
    return absl::UnavailableError(absl::StrCat("cannot open database ", path, ": ", message));
  }
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  return std::unique_ptr<Db>(new Db(raw));
}

absl::StatusOr<std::unique_ptr<Db>> Db::OpenReadOnly(const std::string& path, int busy_timeout_ms) {
  return Open(path, SQLITE_OPEN_READONLY, busy_timeout_ms);
}

Db::~Db() {
  for (auto& [sql, cached] : cache_) sqlite3_finalize(cached.stmt);
  sqlite3_close_v2(db_);
}

absl::Status Db::Error(absl::string_view what) const {
  return absl::Status(CodeOf(sqlite3_extended_errcode(db_)),
                      absl::StrCat(what, ": ", sqlite3_errmsg(db_)));
}

absl::Status Db::Exec(absl::string_view sql) {
  char* message = nullptr;
  const std::string text(sql);
  if (const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message); rc != SQLITE_OK) {
    absl::Status status = absl::Status(
        CodeOf(rc),
        absl::StrCat("sqlite: ", message ? message : "error", " in: ", text.substr(0, 120)));
    sqlite3_free(message);
    return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<Stmt> Db::Prepare(absl::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return Error(absl::StrCat("prepare \"", sql.substr(0, 120), "\""));
  }
  return Stmt(this, stmt);
}

absl::StatusOr<Stmt> Db::PrepareCached(absl::string_view sql) {
  CachedStmt& cached = cache_[sql];
  if (cached.in_use) return Prepare(sql);
  if (cached.stmt == nullptr) {
    if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                           &cached.stmt, nullptr) != SQLITE_OK) {
      cache_.erase(std::string(sql));
      return Error(absl::StrCat("prepare \"", sql.substr(0, 120), "\""));
    }
  }
  cached.in_use = true;
  return Stmt(this, cached.stmt, &cached.in_use);
}

absl::Status Db::ExecCached(absl::string_view sql) {
  absl::StatusOr<Stmt> stmt = PrepareCached(sql);
  if (!stmt.ok()) return stmt.status();
  if (absl::Status s = stmt->Run(); !s.ok()) {
    // Worded as Exec words its errors: SQLite's cause, then the statement.
    return absl::Status(s.code(),
                        absl::StrCat("sqlite: ", sqlite3_errmsg(db_), " in: ", sql.substr(0, 120)));
  }
  return absl::OkStatus();
}

int64_t Db::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Db::Changes() const { return sqlite3_changes(db_); }

Stmt::~Stmt() {
  if (in_use_ == nullptr) {
    sqlite3_finalize(stmt_);
    return;
  }
  Reset();
  *in_use_ = false;
}

Stmt& Stmt::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Stmt& Stmt::Bind(int index, absl::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindBlob(int index, absl::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}
Stmt& Stmt::BindOptional(int index, std::optional<int64_t> value) {
  return value.has_value() ? Bind(index, *value) : BindNull(index);
}
Stmt& Stmt::BindOptional(int index, std::optional<double> value) {
  return value.has_value() ? Bind(index, *value) : BindNull(index);
}
Stmt& Stmt::BindTextOrNull(int index, absl::string_view text) {
  return text.empty() ? BindNull(index) : Bind(index, text);
}

absl::StatusOr<bool> Stmt::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(absl::StrCat("step \"", std::string(sqlite3_sql(stmt_)).substr(0, 120), "\""));
}

absl::Status Stmt::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Stmt::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::optional<double> Stmt::OptionalDouble(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Double(col);
}

double Stmt::RealOrNaN(int col) const {
  const int type = sqlite3_column_type(stmt_, col);
  return type == SQLITE_FLOAT || type == SQLITE_INTEGER ? Double(col)
                                                        : std::numeric_limits<double>::quiet_NaN();
}

std::string Stmt::Text(int col) const {
  const unsigned char* text = sqlite3_column_text(stmt_, col);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, col));
}

std::string SqlString(absl::string_view text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

}  // namespace xmod
