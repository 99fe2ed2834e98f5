// HttpSessions: login sessions of the web dashboard. The page POSTs a user or read token to
// /api/login once; the server answers with a session id — 256 random bits, kept only in this
// process's memory — in an HttpOnly, SameSite=Strict cookie, so the token never appears in a
// URL and page scripts cannot read the session. A session ends at logout, after `ttl`, when
// its credential signs in once more than `max_per_credential` times (that credential's oldest
// session goes first: one credential never ends another's sessions), or at a coordinator
// restart. Sign-ins are refused past `max_logins_per_minute` per credential or `max_sessions`
// in all. Thread-safe.
#ifndef XMOD_COORDINATOR_API_HTTP_SESSIONS_H_
#define XMOD_COORDINATOR_API_HTTP_SESSIONS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/credentials.h"

namespace xmod {

inline constexpr char kSessionCookie[] = "xmod_session";

struct SessionLimits {
  std::chrono::seconds ttl = std::chrono::hours(12);
  size_t max_sessions = 10000;        // live sessions in all; past it sign-ins are refused
  size_t max_per_credential = 16;     // live sessions of one credential (its oldest ends)
  size_t max_logins_per_minute = 20;  // sign-ins of one credential in any 60 s
};

class HttpSessions {
 public:
  // `clock` (monotonic readings) must outlive the sessions.
  explicit HttpSessions(SessionLimits limits = {}, Clock* clock = Clock::Real())
      : limits_(limits), clock_(clock) {}

  // A new session of `principal`; returns its id (64 hex digits). RESOURCE_EXHAUSTED naming
  // the limit when the credential signed in max_logins_per_minute times in the last minute
  // or max_sessions are live.
  absl::StatusOr<std::string> Create(const Principal& principal);
  // The principal of a live session, or nullopt (unknown or expired id).
  std::optional<Principal> Find(absl::string_view id);
  void Remove(absl::string_view id);

 private:
  struct Session {
    Principal principal;
    std::string credential;  // CredentialKey(principal)
    int64_t serial = 0;      // order of creation
    int64_t expires_ms = 0;  // monotonic
  };
  const SessionLimits limits_;
  Clock* const clock_;
  absl::Mutex mu_;
  std::map<std::string, Session, std::less<>> sessions_ ABSL_GUARDED_BY(mu_);
  int64_t next_serial_ ABSL_GUARDED_BY(mu_) = 0;
  // Monotonic times of each credential's sign-ins of the last minute, oldest first.
  std::map<std::string, std::deque<int64_t>> logins_ ABSL_GUARDED_BY(mu_);
};

// The value of cookie `name` in a Cookie request header ("a=1; xmod_session=..."), if any.
std::optional<std::string> CookieValue(absl::string_view header, absl::string_view name);

}  // namespace xmod

#endif  // XMOD_COORDINATOR_API_HTTP_SESSIONS_H_
