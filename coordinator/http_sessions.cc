// See http_sessions.h.
#include "coordinator/http_sessions.h"

#include <openssl/rand.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"

namespace xmod {

std::string HttpSessions::Create(const Principal& principal) {
  unsigned char bytes[32];
  CHECK_EQ(RAND_bytes(bytes, sizeof(bytes)), 1) << "no randomness for a session id";
  std::string id = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    it = it->second.expires < now ? sessions_.erase(it) : std::next(it);
  }
  if (sessions_.size() >= max_sessions_) {
    auto oldest = std::min_element(sessions_.begin(), sessions_.end(), [](auto& a, auto& b) {
      return a.second.expires < b.second.expires;
    });
    sessions_.erase(oldest);
  }
  sessions_[id] = Session{principal, now + ttl_};
  return id;
}

std::optional<Principal> HttpSessions::Find(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return std::nullopt;
  if (it->second.expires < std::chrono::steady_clock::now()) {
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
