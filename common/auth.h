// Bearer-token authentication for both gRPC services (ARCHITECTURE.md, "Protocol").
// A server started with a token refuses calls without "authorization: Bearer <token>".
#ifndef XMOD_COMMON_AUTH_H_
#define XMOD_COMMON_AUTH_H_

#include <grpcpp/client_context.h>
#include <grpcpp/server_context.h>

#include <optional>
#include <string>

#include "absl/status/status.h"

namespace xmod {

// OK when `expected` is empty or `header` is "Bearer <expected>"; UNAUTHENTICATED otherwise.
absl::Status CheckBearerToken(const std::string& expected,
                              const std::optional<std::string>& header);

// Reads the authorization header of a call and checks it.
absl::Status CheckBearerToken(const std::string& expected, const grpc::ServerContext& context);

// Attaches the token to an outgoing call (nothing when empty).
void AttachBearerToken(const std::string& token, grpc::ClientContext* context);

}  // namespace xmod

#endif  // XMOD_COMMON_AUTH_H_
