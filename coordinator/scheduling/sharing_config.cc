// See sharing_config.h.
#include "coordinator/scheduling/sharing_config.h"

#include <cctype>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/field_path.h"
#include "common/files.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace xmod::scheduling {
namespace {

// Credential names (common/credentials.h): [A-Za-z0-9._@-]+.
bool ValidName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '@' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

bool ValidWeight(double weight) { return std::isfinite(weight) && weight > 0; }

// Collects the first text-format error with its position.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) error_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace

UserPolicy SharingPolicy::For(const std::string& user) const {
  auto it = users.find(user);
  if (it != users.end()) return it->second;
  UserPolicy policy;
  policy.weight = default_weight;
  policy.max_priority = default_max_priority;
  policy.allow_non_preemptible = default_allow_non_preemptible;
  return policy;
}

std::string SharingPolicy::SharedGroup(const std::string& a, const std::string& b) const {
  auto of_a = groups_of.find(a);
  auto of_b = groups_of.find(b);
  if (of_a == groups_of.end() || of_b == groups_of.end()) return "";
  for (const std::string& group : of_a->second) {
    if (of_b->second.count(group) > 0) return group;
  }
  return "";
}

namespace {

// OK when `name` is a `kind` name ([A-Za-z0-9._@-]+) not in `seen`, which it joins; else
// INVALID_ARGUMENT naming `path`.
absl::Status CheckNewName(const std::string& path, const std::string& name, const char* kind,
                          std::set<std::string>* seen) {
  if (!ValidName(name)) {
    return InvalidField(path,
                        absl::StrCat("\"", name, "\" is not a ", kind, " name ([A-Za-z0-9._@-]+)"));
  }
  if (!seen->insert(name).second) {
    return InvalidField(path, absl::StrCat("\"", name, "\" is named twice"));
  }
  return absl::OkStatus();
}

absl::Status ValidateGroups(const xmod::v1::SharingConfig& config) {
  std::set<std::string> names;
  for (int i = 0; i < config.groups_size(); ++i) {
    const xmod::v1::UserGroup& group = config.groups(i);
    const std::string at = absl::StrCat("groups[", i, "].");
    if (absl::Status s = CheckNewName(at + "name", group.name(), "group", &names); !s.ok()) {
      return s;
    }
    if (group.members().empty()) return InvalidField(at + "members", "a group needs members");
    std::set<std::string> members;
    for (int m = 0; m < group.members_size(); ++m) {
      if (absl::Status s = CheckNewName(absl::StrCat(at, "members[", m, "]"), group.members(m),
                                        "credential", &members);
          !s.ok()) {
        return s;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSharingConfig(const xmod::v1::SharingConfig& config) {
  std::set<std::string> seen;
  for (int i = 0; i < config.users_size(); ++i) {
    const xmod::v1::UserShare& user = config.users(i);
    const std::string at = absl::StrCat("users[", i, "].");
    if (absl::Status s = CheckNewName(at + "name", user.name(), "credential", &seen); !s.ok()) {
      return s;
    }
    if (user.has_gpu_slots() && user.gpu_slots() < 0) {
      return InvalidField(at + "gpu_slots", absl::StrCat("must be >= 0, got ", user.gpu_slots()));
    }
    if (user.has_cpu_slots() && user.cpu_slots() < 0) {
      return InvalidField(at + "cpu_slots", absl::StrCat("must be >= 0, got ", user.cpu_slots()));
    }
    if (user.has_weight() && !ValidWeight(user.weight())) {
      return InvalidField(at + "weight", absl::StrCat("must be > 0, got ", user.weight()));
    }
  }
  if (config.has_default_weight() && !ValidWeight(config.default_weight())) {
    return InvalidField("default_weight",
                        absl::StrCat("must be > 0, got ", config.default_weight()));
  }
  if (config.has_min_run_ms() && config.min_run_ms() < 0) {
    return InvalidField("min_run_ms", absl::StrCat("must be >= 0, got ", config.min_run_ms()));
  }
  return ValidateGroups(config);
}

SharingPolicy PolicyOf(const xmod::v1::SharingConfig& config) {
  SharingPolicy policy;
  if (config.has_default_weight()) policy.default_weight = config.default_weight();
  if (config.has_min_run_ms()) policy.min_run_ms = config.min_run_ms();
  if (config.has_default_max_priority())
    policy.default_max_priority = config.default_max_priority();
  if (config.has_default_allow_non_preemptible()) {
    policy.default_allow_non_preemptible = config.default_allow_non_preemptible();
  }
  for (const xmod::v1::UserShare& user : config.users()) {
    UserPolicy& p = policy.users[user.name()];
    if (user.has_gpu_slots()) p.gpu_slots = user.gpu_slots();
    if (user.has_cpu_slots()) p.cpu_slots = user.cpu_slots();
    p.weight = user.has_weight() ? user.weight() : policy.default_weight;
    p.max_priority = user.has_max_priority() ? std::optional<int>(user.max_priority())
                                             : policy.default_max_priority;
    p.allow_non_preemptible = user.has_allow_non_preemptible()
                                  ? user.allow_non_preemptible()
                                  : policy.default_allow_non_preemptible;
  }
  for (const xmod::v1::UserGroup& group : config.groups()) {
    for (const std::string& member : group.members()) policy.groups_of[member].insert(group.name());
  }
  return policy;
}

absl::StatusOr<SharingPolicy> LoadSharingPolicy(const std::string& path) {
  if (path.empty()) return SharingPolicy{};
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  xmod::v1::SharingConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(*text, &config)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", errors.error()));
  }
  if (absl::Status s = ValidateSharingConfig(config); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return PolicyOf(config);
}

}  // namespace xmod::scheduling

namespace xmod::scheduling {

absl::Status CheckGrants(const xmod::v1::SweepSpec& spec, const std::string& user,
                         const SharingPolicy& policy) {
  const UserPolicy granted = policy.For(user);
  if (granted.max_priority.has_value() && spec.priority() > *granted.max_priority) {
    return InvalidField(
        "priority", absl::StrCat(spec.priority(), " is above ", *granted.max_priority,
                                 ", the highest priority the sharing config grants user \"", user,
                                 "\" (max_priority)"));
  }
  if (granted.allow_non_preemptible) return absl::OkStatus();
  const std::string refusal = absl::StrCat(
      "false is not granted to user \"", user,
      "\": the sharing config does not allow it non-preemptible runs (allow_non_preemptible)");
  // A grid's own `preemptible` wins over the sweep's (spec.proto).
  const bool sweep_allows = !spec.has_preemptible() || spec.preemptible();
  for (int i = 0; i < spec.grids_size(); ++i) {
    const xmod::v1::GridSpec& grid = spec.grids(i);
    if (grid.has_preemptible() && !grid.preemptible()) {
      return InvalidField(absl::StrCat("grids[", i, "].preemptible"), refusal);
    }
    if (!grid.has_preemptible() && !sweep_allows) return InvalidField("preemptible", refusal);
  }
  return absl::OkStatus();
}

}  // namespace xmod::scheduling
