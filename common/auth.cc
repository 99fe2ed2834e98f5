#include "common/auth.h"

#include "absl/strings/str_cat.h"

namespace xmod {

absl::Status CheckBearerToken(const std::string& expected,
                              const std::optional<std::string>& header) {
  if (expected.empty()) return absl::OkStatus();
  if (!header.has_value()) return absl::UnauthenticatedError("missing authorization metadata");
  if (*header != absl::StrCat("Bearer ", expected)) {
    return absl::UnauthenticatedError("bad bearer token");
  }
  return absl::OkStatus();
}

absl::Status CheckBearerToken(const std::string& expected, const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return CheckBearerToken(expected, std::nullopt);
  return CheckBearerToken(expected, std::string(it->second.data(), it->second.size()));
}

void AttachBearerToken(const std::string& token, grpc::ClientContext* context) {
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

}  // namespace xmod
