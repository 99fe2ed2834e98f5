// Bearer-token authentication and scope checks for both gRPC services and the HTTP API
// (credentials.h has the scopes). A call carries "authorization: Bearer <token>"; the server
// maps the token to a Principal and checks that its scope allows what the call does:
//   kRead    Coordinator reads          user, admin, read
//   kWrite   Coordinator changes        user, admin (whose work a change may touch is
//                                       coordinator/api/ownership.h's to decide)
//   kWorker  every WorkerGateway call   worker
//   kAdmin   operators' calls (Backup)  admin
// Without configured credentials every caller is the anonymous principal and allowed.
#ifndef XMOD_COMMON_AUTH_H_
#define XMOD_COMMON_AUTH_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/credentials.h"

namespace xmod {

enum class Access { kRead, kWrite, kWorker, kAdmin };

// The principal of "Bearer <token>" in `header`: UNAUTHENTICATED when the header is missing,
// malformed or carries an unknown token; PERMISSION_DENIED naming `method` and the
// credential when its scope does not allow `access`.
absl::StatusOr<Principal> Authorize(const CredentialSet& credentials,
                                    const std::optional<std::string>& header, Access access,
                                    absl::string_view method);

// The same for a gRPC call's "authorization" metadata.
absl::StatusOr<Principal> Authorize(const CredentialSet& credentials,
                                    const grpc::ServerContext& context, Access access,
                                    absl::string_view method);

// Whether `scope` allows `access`.
bool ScopeAllows(Scope scope, Access access);
// OK when `principal`'s scope allows `access`; else PERMISSION_DENIED naming `method` and the
// credential (as Authorize answers).
absl::Status CheckScope(const Principal& principal, Access access, absl::string_view method);

// Attaches the token to an outgoing call (nothing when empty).
void AttachBearerToken(const std::string& token, grpc::ClientContext* context);

}  // namespace xmod

#endif  // XMOD_COMMON_AUTH_H_
