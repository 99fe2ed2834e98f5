// The dashboard's callers and sign-in routes. See http_auth.h.
#include "coordinator/api/http_auth.h"

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/auth.h"
#include "xmod/v1/http_api.pb.h"

namespace xmod {

absl::StatusOr<Principal> ApiCaller(const HttpContext& context, const httplib::Request& request,
                                    Access access, absl::string_view route) {
  if (request.has_header("Authorization")) {
    return Authorize(*context.credentials, request.get_header_value("Authorization"), access,
                     route);
  }
  if (context.credentials->empty()) return *context.credentials->Authenticate("");
  std::optional<std::string> id = CookieValue(request.get_header_value("Cookie"), kSessionCookie);
  std::optional<Principal> principal;
  if (id.has_value()) principal = context.sessions->Find(*id);
  if (!principal.has_value()) {
    return absl::UnauthenticatedError("log in first (POST /api/login) or send a bearer token");
  }
  if (absl::Status s = CheckScope(*principal, access, route); !s.ok()) return s;
  return *principal;
}

httplib::Server::HandlerResponse CheckApiCaller(const HttpContext& context,
                                                const httplib::Request& request,
                                                httplib::Response& response) {
  const std::string& path = request.path;
  if (path.rfind("/api/", 0) != 0 || path == "/api/login" || path == "/api/session" ||
      path == "/api/logout") {
    return httplib::Server::HandlerResponse::Unhandled;
  }
  absl::StatusOr<Principal> principal = ApiCaller(context, request, Access::kRead, "GET /api/");
  if (principal.ok()) return httplib::Server::HandlerResponse::Unhandled;
  SendError(principal.status(), response);
  return httplib::Server::HandlerResponse::Handled;
}

void PostLogin(const HttpContext& context, const httplib::Request& request,
               httplib::Response& response) {
  const std::string token(absl::StripAsciiWhitespace(request.body));
  absl::StatusOr<Principal> principal =
      Authorize(*context.credentials, absl::StrCat("Bearer ", token), Access::kRead, "login");
  if (!principal.ok()) {
    SendError(principal.status(), response);
    return;
  }
  absl::StatusOr<std::string> id = context.sessions->Create(*principal);
  if (!id.ok()) {
    SendError(id.status(), response);
    return;
  }
  response.set_header("Set-Cookie",
                      absl::StrCat(kSessionCookie, "=", *id, "; Path=/; HttpOnly; SameSite=Strict",
                                   context.secure ? "; Secure" : ""));
  xmod::v1::HttpLoginResponse login;
  login.set_name(principal->name);
  login.set_scope(ScopeName(principal->scope));
  SendJson(login, response);
}

void PostLogout(const HttpContext& context, const httplib::Request& request,
                httplib::Response& response) {
  std::optional<std::string> id = CookieValue(request.get_header_value("Cookie"), kSessionCookie);
  if (id.has_value()) context.sessions->Remove(*id);
  response.set_header(
      "Set-Cookie",
      absl::StrCat(kSessionCookie, "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"));
  SendJson(xmod::v1::HttpLogoutResponse(), response);
}

void GetSession(const HttpContext& context, const httplib::Request& request,
                httplib::Response& response) {
  absl::StatusOr<Principal> principal =
      ApiCaller(context, request, Access::kRead, "GET /api/session");
  xmod::v1::HttpSessionResponse session;
  session.set_authenticated(principal.ok());
  session.set_required(!context.credentials->empty());
  if (principal.ok()) {
    session.set_name(principal->name);
    session.set_scope(ScopeName(principal->scope));
  }
  SendJson(session, response);
}

}  // namespace xmod
