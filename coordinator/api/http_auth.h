// Who calls the dashboard's JSON API, and its sign-in routes (docs/security.md, "The
// dashboard"). A caller is its "Authorization: Bearer <token>" header, else the session
// cookie of a login (http_sessions.h); without credentials configured everyone is the
// anonymous user. The documents are http_api.proto's, printed through common/proto_json.h:
//   POST /api/login   (body: the token)  {"name","scope"} and the session cookie
//   POST /api/logout                     {} and the cookie cleared
//   GET  /api/session                    {"authenticated","required","name","scope"}
// Thread-safe.
#ifndef XMOD_COORDINATOR_API_HTTP_AUTH_H_
#define XMOD_COORDINATOR_API_HTTP_AUTH_H_

#include <httplib.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/auth.h"
#include "coordinator/api/http_routes.h"

namespace xmod {

// The caller of an /api/ request — its bearer token, else its session cookie (anonymous
// without credentials) — when its scope allows `access`: UNAUTHENTICATED without a known one,
// PERMISSION_DENIED naming `route` for a scope that does not allow `access`.
absl::StatusOr<Principal> ApiCaller(const HttpContext& context, const httplib::Request& request,
                                    Access access, absl::string_view route);

// Runs before routing: lets the sign-in routes and everything outside /api/ through, and
// answers any other /api/ request of a caller without a user or read credential (401 without
// one, 403 for a worker credential) so that no handler runs for it.
httplib::Server::HandlerResponse CheckApiCaller(const HttpContext& context,
                                                const httplib::Request& request,
                                                httplib::Response& response);

void PostLogin(const HttpContext& context, const httplib::Request& request,
               httplib::Response& response);
void PostLogout(const HttpContext& context, const httplib::Request& request,
                httplib::Response& response);
void GetSession(const HttpContext& context, const httplib::Request& request,
                httplib::Response& response);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_HTTP_AUTH_H_
