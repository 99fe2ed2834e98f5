// See auth.h.
#include "common/auth.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace xmod {

bool ScopeAllows(Scope scope, Access access) {
  switch (access) {
    case Access::kRead:
      return scope == Scope::kUser || scope == Scope::kAdmin || scope == Scope::kRead;
    case Access::kWrite:
      return scope == Scope::kUser || scope == Scope::kAdmin;
    case Access::kWorker:
      return scope == Scope::kWorker;
    case Access::kAdmin:
      return scope == Scope::kAdmin;
  }
  return false;
}

absl::StatusOr<Principal> Authorize(const CredentialSet& credentials,
                                    const std::optional<std::string>& header, Access access,
                                    absl::string_view method) {
  if (credentials.empty()) return *credentials.Authenticate("");
  constexpr absl::string_view kBearer = "Bearer ";
  if (!header.has_value()) return absl::UnauthenticatedError("missing authorization metadata");
  if (!absl::StartsWith(*header, kBearer)) {
    return absl::UnauthenticatedError("authorization is not \"Bearer <token>\"");
  }
  std::optional<Principal> principal =
      credentials.Authenticate(absl::string_view(*header).substr(kBearer.size()));
  if (!principal.has_value()) return absl::UnauthenticatedError("unknown bearer token");
  if (absl::Status s = CheckScope(*principal, access, method); !s.ok()) return s;
  return *principal;
}

absl::Status CheckScope(const Principal& principal, Access access, absl::string_view method) {
  if (principal.anonymous || ScopeAllows(principal.scope, access)) return absl::OkStatus();
  const char* refused = access == Access::kWorker           ? "worker calls"
                        : access == Access::kAdmin          ? "an operator's calls (admin only)"
                        : principal.scope == Scope::kWorker ? "user calls"
                                                            : "changes (read-only)";
  return absl::PermissionDeniedError(absl::StrCat(method, ": credential \"", principal.name,
                                                  "\" has scope ", ScopeName(principal.scope),
                                                  ", which does not allow ", refused));
}

absl::StatusOr<Principal> Authorize(const CredentialSet& credentials,
                                    const grpc::ServerContext& context, Access access,
                                    absl::string_view method) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  std::optional<std::string> header;
  if (it != metadata.end()) header = std::string(it->second.data(), it->second.size());
  return Authorize(credentials, header, access, method);
}

void AttachBearerToken(const std::string& token, grpc::ClientContext* context) {
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

}  // namespace xmod
