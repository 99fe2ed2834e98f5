// See worker_identity.h.
#include "coordinator/api/worker_identity.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace xmod {
namespace {

// The text in column 0 of the one row `sql` (bound to `a`, `b`) returns; "" when no row.
absl::StatusOr<std::string> ReadName(Store* store, const char* sql, int64_t a, int64_t b) {
  std::string name;
  absl::Status status = store->Read([&](Db& db) {
    absl::StatusOr<Stmt> stmt = db.Prepare(sql);
    if (!stmt.ok()) return stmt.status();
    stmt->Bind(1, a);
    if (b >= 0) stmt->Bind(2, b);
    absl::StatusOr<bool> row = stmt->Step();
    if (!row.ok()) return row.status();
    if (*row) name = stmt->Text(0);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return name;
}

}  // namespace

absl::Status WorkerIdentity::CheckRegister(const Principal& caller,
                                           const std::string& worker_name) const {
  if (caller.anonymous || caller.name == worker_name) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      "worker credential \"", caller.name, "\" may not register as worker \"", worker_name, "\""));
}

void WorkerIdentity::Remember(int64_t worker_id, const std::string& worker_name) {
  absl::MutexLock lock(&mu_);
  if (worker_names_.size() >= kMaxCached) worker_names_.clear();
  worker_names_[worker_id] = worker_name;
}

absl::Status WorkerIdentity::CheckWorker(const Principal& caller, int64_t worker_id) {
  if (caller.anonymous) return absl::OkStatus();
  std::string name;
  {
    absl::MutexLock lock(&mu_);
    auto it = worker_names_.find(worker_id);
    if (it != worker_names_.end()) name = it->second;
  }
  if (name.empty()) {
    absl::StatusOr<std::string> read =
        ReadName(store_, "SELECT name FROM workers WHERE id = ?", worker_id, -1);
    if (!read.ok()) return read.status();
    if (read->empty()) return absl::OkStatus();
    name = *read;
    Remember(worker_id, name);
  }
  if (name == caller.name) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("worker credential \"", caller.name,
                                                  "\" may not act as worker ", worker_id, " (\"",
                                                  name, "\")"));
}

absl::Status WorkerIdentity::CheckAttempt(const Principal& caller, int64_t worker_id,
                                          int64_t run_id, int attempt) {
  if (absl::Status s = CheckWorker(caller, worker_id); !s.ok() || caller.anonymous) return s;
  std::string holder;
  {
    absl::MutexLock lock(&mu_);
    auto it = attempt_workers_.find({run_id, attempt});
    if (it != attempt_workers_.end()) holder = it->second;
  }
  if (holder.empty()) {
    absl::StatusOr<std::string> read = ReadName(
        store_, "SELECT worker FROM attempts WHERE run_id = ? AND attempt = ?", run_id, attempt);
    if (!read.ok()) return read.status();
    if (read->empty()) return absl::OkStatus();  // no such attempt: the scheduler says so
    holder = *read;
    absl::MutexLock lock(&mu_);
    if (attempt_workers_.size() >= kMaxCached) attempt_workers_.clear();
    attempt_workers_[{run_id, attempt}] = holder;
  }
  // A gang's attempt is held by each of its members (names comma-separated).
  for (absl::string_view member : absl::StrSplit(holder, ',')) {
    if (member == caller.name) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("attempt ", attempt, " of run ", run_id,
                                                  " is held by worker \"", holder, "\", not \"",
                                                  caller.name, "\""));
}

}  // namespace xmod
