// Credentials: who may call the coordinator, read from a credentials file (never from argv).
//
// File format (docs/security.md), one credential per line, '#' starts a comment:
//   SCOPE NAME SECRET
// SCOPE is one of
//   user    the Coordinator API: every read, submissions, and changes to its own work (the
//           sweeps it submitted, their runs and decisions, its studies) or its groups'
//   admin   what `user` may, and changes to anyone's work (an operator)
//   read    the Coordinator API's reads only (Get*, List*, Watch*, Query, fits, Plan)
//   worker  the WorkerGateway API only, bound to NAME: the worker must register under NAME and
//           may report only for its own attempts
// NAME is [A-Za-z0-9._@-]+, unique within its scope; a user and an admin credential never share a
// name (a name owns work, whichever of the two scopes submitted it). SECRET is either the bearer
// token itself (at least 16 characters) or "sha256:" and the 64 hex digits of the token's SHA-256,
// so the coordinator's file need not hold usable secrets. Every secret must be distinct.
//
// Matching hashes the presented token once and compares it with every entry's digest in
// constant time (CRYPTO_memcmp), without an early exit, so neither the position of a match nor
// the length of a secret shows in the timing.
//
// Thread-safe after construction (const methods only).
#ifndef XMOD_COMMON_CREDENTIALS_H_
#define XMOD_COMMON_CREDENTIALS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

enum class Scope { kUser, kRead, kWorker, kAdmin };

// "user", "read", "worker", "admin".
const char* ScopeName(Scope scope);

// The caller of a request. `anonymous` when the server has no credentials configured: then
// every call is allowed (the coordinator refuses to listen beyond loopback in that case
// unless started with --insecure).
struct Principal {
  Scope scope = Scope::kUser;
  std::string name;
  bool anonymous = false;
};

class CredentialSet {
 public:
  // An empty set: authentication off.
  CredentialSet() = default;

  // Parses the file format above; `source` names the file (or variable) in errors, which give
  // the line number but never a secret. INVALID_ARGUMENT on any malformed line.
  static absl::StatusOr<CredentialSet> Parse(absl::string_view text, absl::string_view source);
  // Reads and parses `path`. NOT_FOUND / PERMISSION_DENIED when it cannot be read.
  static absl::StatusOr<CredentialSet> Load(const std::string& path);

  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  // The principal whose secret is `token`, or nullopt. With an empty set: anonymous.
  std::optional<Principal> Authenticate(absl::string_view token) const;

 private:
  struct Entry {
    Principal principal;
    std::array<uint8_t, 32> digest;  // SHA-256 of the secret
  };
  std::vector<Entry> entries_;
};

// A client's bearer token: the content of `file` (surrounding whitespace removed) when `file`
// is not empty, else the value of the environment variable `env` ("" when unset). An error
// names the file when it cannot be read or is empty.
absl::StatusOr<std::string> ReadToken(const std::string& file, const char* env);

}  // namespace xmod

#endif  // XMOD_COMMON_CREDENTIALS_H_
