// HttpSessions: login sessions of the web dashboard. The page POSTs a user or read token to
// /api/login once; the server answers with a session id — 256 random bits, kept only in this
// process's memory — in an HttpOnly, SameSite=Strict cookie, so the token never appears in a
// URL and page scripts cannot read the session. A session ends at logout, after `ttl`, or when
// more than `max_sessions` exist (the oldest goes first); a coordinator restart ends them all.
// Thread-safe.
#ifndef XMOD_COORDINATOR_HTTP_SESSIONS_H_
#define XMOD_COORDINATOR_HTTP_SESSIONS_H_

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/credentials.h"

namespace xmod {

inline constexpr char kSessionCookie[] = "xmod_session";

class HttpSessions {
 public:
  explicit HttpSessions(std::chrono::seconds ttl = std::chrono::hours(12),
                        size_t max_sessions = 10000)
      : ttl_(ttl), max_sessions_(max_sessions) {}

  // A new session of `principal`; returns its id (64 hex digits).
  std::string Create(const Principal& principal);
  // The principal of a live session, or nullopt (unknown or expired id).
  std::optional<Principal> Find(absl::string_view id);
  void Remove(absl::string_view id);

 private:
  struct Session {
    Principal principal;
    std::chrono::steady_clock::time_point expires;
  };
  const std::chrono::seconds ttl_;
  const size_t max_sessions_;
  absl::Mutex mu_;
  std::map<std::string, Session, std::less<>> sessions_ ABSL_GUARDED_BY(mu_);
};

// The value of cookie `name` in a Cookie request header ("a=1; xmod_session=..."), if any.
std::optional<std::string> CookieValue(absl::string_view header, absl::string_view name);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_HTTP_SESSIONS_H_
