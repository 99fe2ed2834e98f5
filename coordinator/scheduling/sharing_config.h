// The sharing config (docs/operations.md, "Sharing a cluster"): quotas and fair-share weights
// per `user` credential name, read from the file of xmod-coordinator --sharing_config
// (xmod.v1.SharingConfig in protobuf text format), validated with field paths. Read once at
// start: a changed file takes effect at the next coordinator start (no hot reload).
#ifndef XMOD_COORDINATOR_SCHEDULING_SHARING_CONFIG_H_
#define XMOD_COORDINATOR_SCHEDULING_SHARING_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "xmod/v1/sharing.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

// One user's quota (nullopt: none) and weight.
struct UserPolicy {
  std::optional<int> gpu_slots;
  std::optional<int> cpu_slots;
  double weight = 1;
  // The quota for slots of `kind` (CUDA: gpu_slots, else cpu_slots).
  std::optional<int> Quota(xmod::v1::SlotKind kind) const {
    return kind == xmod::v1::CUDA ? gpu_slots : cpu_slots;
  }
};

struct SharingPolicy {
  std::map<std::string, UserPolicy> users;  // by credential name
  double default_weight = 1;
  // Hysteresis: an attempt younger than this is never preempted.
  int64_t min_run_ms = 10000;
  // The policy of `user`: its entry, else no quota and default_weight.
  UserPolicy For(const std::string& user) const;
};

// INVALID_ARGUMENT naming the field ("users[1].weight: must be > 0") for an empty or
// malformed name, a name given twice, a negative quota, a weight that is not a positive
// finite number, or a negative min_run_ms.
absl::Status ValidateSharingConfig(const xmod::v1::SharingConfig& config);
// The policy of a validated config.
SharingPolicy PolicyOf(const xmod::v1::SharingConfig& config);
// Reads, parses (text format; errors name the line) and validates `path`. An empty path is
// the default policy: no quotas, every weight 1.
absl::StatusOr<SharingPolicy> LoadSharingPolicy(const std::string& path);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_SHARING_CONFIG_H_
