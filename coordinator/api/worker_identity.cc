// See worker_identity.h.
#include "coordinator/api/worker_identity.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/store/worker_rows.h"

namespace xmod {
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
        store_->ReadValue([&](Db& db) { return WorkerName(db, worker_id); });
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
  std::vector<std::string> holders;
  {
    absl::MutexLock lock(&mu_);
    auto it = attempt_workers_.find({run_id, attempt});
    if (it != attempt_workers_.end()) holders = it->second;
  }
  if (holders.empty()) {
    absl::StatusOr<std::vector<std::string>> read =
        store_->ReadValue([&](Db& db) { return AttemptHolders(db, run_id, attempt); });
    if (!read.ok()) return read.status();
    if (read->empty()) return absl::OkStatus();  // no such attempt: the scheduler says so
    holders = *read;
    absl::MutexLock lock(&mu_);
    if (attempt_workers_.size() >= kMaxCached) attempt_workers_.clear();
    attempt_workers_[{run_id, attempt}] = holders;
  }
  // A gang's attempt is held by each of its members.
  if (std::find(holders.begin(), holders.end(), caller.name) != holders.end()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("attempt ", attempt, " of run ", run_id, " is held by worker \"",
                   absl::StrJoin(holders, ","), "\", not \"", caller.name, "\""));
}

}  // namespace xmod
