// See http_sessions.h.
#include "coordinator/api/http_sessions.h"

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"

namespace xmod {

namespace {

constexpr int64_t kLoginWindowMs = 60000;

// Who a session belongs to, as the credentials file names it ("read:viewer").
std::string CredentialKey(const Principal& principal) {
  return principal.anonymous ? std::string("anonymous")
                             : absl::StrCat(ScopeName(principal.scope), ":", principal.name);
}

}  // namespace

absl::StatusOr<std::string> HttpSessions::Create(const Principal& principal) {
  const std::string credential = CredentialKey(principal);
  const int64_t now = clock_->MonotonicMillis();
  absl::MutexLock lock(&mu_);
  std::deque<int64_t>& logins = logins_[credential];
  while (!logins.empty() && logins.front() <= now - kLoginWindowMs) logins.pop_front();
  if (logins.size() >= limits_.max_logins_per_minute) {
    return absl::ResourceExhaustedError(
        absl::StrCat("login: credential \"", principal.name, "\" signed in ", logins.size(),
                     " times in the last minute (at most ", limits_.max_logins_per_minute,
                     " per minute); try again later"));
  }
  size_t mine = 0;
  auto oldest_mine = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (it->second.expires_ms < now) {
      it = sessions_.erase(it);
      continue;
    }
    if (it->second.credential == credential) {
      ++mine;
      if (oldest_mine == sessions_.end() || it->second.serial < oldest_mine->second.serial) {
        oldest_mine = it;
      }
    }
    ++it;
  }
  if (mine >= limits_.max_per_credential && oldest_mine != sessions_.end()) {
    sessions_.erase(oldest_mine);
  } else if (sessions_.size() >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat("login: ", sessions_.size(),
                                                     " dashboard sessions are open (at most ",
                                                     limits_.max_sessions, "); try again later"));
  }
  unsigned char bytes[32];
  CHECK_EQ(RAND_bytes(bytes, sizeof(bytes)), 1) << "no randomness for a session id";
  std::string id = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
  logins.push_back(now);
  sessions_[id] = Session{principal, credential, next_serial_++,
                          now + std::chrono::milliseconds(limits_.ttl).count()};
  return id;
}

std::optional<Principal> HttpSessions::Find(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires_ms < clock_->MonotonicMillis()) {
    sessions_.erase(it);
    return std::nullopt;
  }
  return it->second.principal;
}

void HttpSessions::Remove(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it != sessions_.end()) sessions_.erase(it);
}

std::optional<std::string> CookieValue(absl::string_view header, absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(header, ';')) {
    part = absl::StripLeadingAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, name) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return std::nullopt;
}

}  // namespace xmod
