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
  return policy;
}

absl::Status ValidateSharingConfig(const xmod::v1::SharingConfig& config) {
  std::set<std::string> seen;
  for (int i = 0; i < config.users_size(); ++i) {
    const xmod::v1::UserShare& user = config.users(i);
    const std::string at = absl::StrCat("users[", i, "].");
    if (!ValidName(user.name())) {
      return InvalidField(at + "name", absl::StrCat("\"", user.name(),
                                                    "\" is not a credential name "
                                                    "([A-Za-z0-9._@-]+)"));
    }
    if (!seen.insert(user.name()).second) {
      return InvalidField(at + "name", absl::StrCat("\"", user.name(), "\" is named twice"));
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
  return absl::OkStatus();
}

SharingPolicy PolicyOf(const xmod::v1::SharingConfig& config) {
  SharingPolicy policy;
  if (config.has_default_weight()) policy.default_weight = config.default_weight();
  if (config.has_min_run_ms()) policy.min_run_ms = config.min_run_ms();
  for (const xmod::v1::UserShare& user : config.users()) {
    UserPolicy& p = policy.users[user.name()];
    if (user.has_gpu_slots()) p.gpu_slots = user.gpu_slots();
    if (user.has_cpu_slots()) p.cpu_slots = user.cpu_slots();
    p.weight = user.has_weight() ? user.weight() : policy.default_weight;
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
