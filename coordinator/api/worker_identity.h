// WorkerIdentity: binds WorkerGateway calls to the worker credential that makes them. A
// worker credential named N (common/credentials.h) may register only as worker N, and may
// name only worker N's id and report only for attempts that worker N holds (alone or as a
// member of a gang); anything else is PERMISSION_DENIED. The anonymous principal (no
// credentials configured) passes every check.
//
// Worker ids and the worker of an attempt never change once written, so both are read from
// the database once and cached (the caches are cleared when they grow past a bound).
// Thread-safe.
#ifndef XMOD_COORDINATOR_API_WORKER_IDENTITY_H_
#define XMOD_COORDINATOR_API_WORKER_IDENTITY_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/credentials.h"
#include "coordinator/store/store.h"

namespace xmod {

class WorkerIdentity {
 public:
  // `store` must outlive this.
  explicit WorkerIdentity(Store* store) : store_(store) {}

  // Register: the worker name must be the credential's.
  absl::Status CheckRegister(const Principal& caller, const std::string& worker_name) const;
  // Records a registered worker's id (from Register's reply), sparing a database read.
  void Remember(int64_t worker_id, const std::string& worker_name);
  // `worker_id` must belong to the caller. An id the database does not know passes (the
  // scheduler answers it with "register again").
  absl::Status CheckWorker(const Principal& caller, int64_t worker_id);
  // CheckWorker, and attempt `attempt` of `run_id`, when it exists, must be held by the caller.
  absl::Status CheckAttempt(const Principal& caller, int64_t worker_id, int64_t run_id,
                            int attempt);

 private:
  static constexpr size_t kMaxCached = 1 << 16;

  Store* const store_;
  absl::Mutex mu_;
  absl::flat_hash_map<int64_t, std::string> worker_names_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::pair<int64_t, int>, std::vector<std::string>> attempt_workers_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_WORKER_IDENTITY_H_
