// The sharing config (docs/operations.md, "Sharing a cluster"): quotas, fair-share weights and
// the ceilings the operator grants (the highest priority, and whether runs may be
// non-preemptible) per `user` credential name, and groups whose members may change each
// other's work; read from the file of xmod-coordinator --sharing_config (xmod.v1.SharingConfig
// in protobuf text format), validated with field paths. Read once at start: a changed file
// takes effect at the next coordinator start (no hot reload).
#ifndef XMOD_COORDINATOR_SCHEDULING_SHARING_CONFIG_H_
#define XMOD_COORDINATOR_SCHEDULING_SHARING_CONFIG_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "xmod/v1/sharing.pb.h"
#include "xmod/v1/spec.pb.h"
#include "xmod/v1/worker.pb.h"

namespace xmod::scheduling {

// One user's quota (nullopt: none), weight and ceilings.
struct UserPolicy {
  std::optional<int> gpu_slots;
  std::optional<int> cpu_slots;
  double weight = 1;
  std::optional<int> max_priority;  // nullopt: no ceiling
  bool allow_non_preemptible = true;
  // The quota for slots of `kind` (CUDA: gpu_slots, else cpu_slots).
  std::optional<int> Quota(xmod::v1::SlotKind kind) const {
    return kind == xmod::v1::CUDA ? gpu_slots : cpu_slots;
  }
};

struct SharingPolicy {
  std::map<std::string, UserPolicy> users;  // by credential name
  double default_weight = 1;
  std::optional<int> default_max_priority;
  bool default_allow_non_preemptible = true;
  // Hysteresis: an attempt younger than this is never preempted.
  int64_t min_run_ms = 10000;
  // The groups each user belongs to, by user (users in no group are not listed).
  std::map<std::string, std::set<std::string>> groups_of;
  // The policy of `user`: its entry (what it leaves unset taken from the defaults), else no
  // quota and the defaults.
  UserPolicy For(const std::string& user) const;
  // A group `a` and `b` both belong to ("" when none).
  std::string SharedGroup(const std::string& a, const std::string& b) const;
};

// INVALID_ARGUMENT naming the field ("users[1].weight: must be > 0") for an empty or
// malformed name, a name given twice, a negative quota, a weight that is not a positive
// finite number, a negative min_run_ms, or a group without members, with a malformed or
// repeated name, or naming a member twice.
absl::Status ValidateSharingConfig(const xmod::v1::SharingConfig& config);
// The policy of a validated config.
SharingPolicy PolicyOf(const xmod::v1::SharingConfig& config);
// Reads, parses (text format; errors name the line) and validates `path`. An empty path is
// the default policy: no quotas, every weight 1, no ceilings, no groups.
absl::StatusOr<SharingPolicy> LoadSharingPolicy(const std::string& path);

// Whether `user` may submit `spec` as the policy grants: INVALID_ARGUMENT naming the spec
// field and the ceiling — `priority` above the user's max_priority, or `preemptible: false`
// (the sweep's, or `grids[i].preemptible`) where the user may not submit non-preemptible runs.
absl::Status CheckGrants(const xmod::v1::SweepSpec& spec, const std::string& user,
                         const SharingPolicy& policy);

}  // namespace xmod::scheduling

#endif  // XMOD_COORDINATOR_SCHEDULING_SHARING_CONFIG_H_
