// See credentials.h.
#include "common/credentials.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace xmod {
namespace {

constexpr size_t kMinSecretLength = 16;
constexpr absl::string_view kDigestPrefix = "sha256:";

std::array<uint8_t, 32> Digest(absl::string_view bytes) {
  std::array<uint8_t, 32> out{};
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), out.data(), &size, EVP_sha256(), nullptr);
  return out;
}

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '@' &&
        c != '-') {
      return false;
    }
  }
  return true;
}

using Sha256 = std::array<uint8_t, 32>;

// The whitespace-separated fields of a line, up to a '#'.
std::vector<absl::string_view> LineFields(absl::string_view line) {
  const size_t hash = line.find('#');
  if (hash != absl::string_view::npos) line = line.substr(0, hash);
  std::vector<absl::string_view> fields =
      absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
  return fields;
}

std::optional<Scope> ScopeNamed(absl::string_view name) {
  for (Scope scope : {Scope::kUser, Scope::kRead, Scope::kWorker, Scope::kAdmin}) {
    if (name == ScopeName(scope)) return scope;
  }
  return std::nullopt;
}

// The digest of SECRET: "sha256:" and its 64 hex digits, else the SHA-256 of a secret of at
// least kMinSecretLength characters. The error's message says why a secret is refused.
absl::StatusOr<Sha256> SecretDigest(absl::string_view secret) {
  Sha256 digest{};
  if (absl::StartsWith(secret, kDigestPrefix)) {
    const absl::string_view hex = secret.substr(kDigestPrefix.size());
    if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), [](char c) {
          return absl::ascii_isxdigit(static_cast<unsigned char>(c));
        })) {
      return absl::InvalidArgumentError("a sha256: secret needs 64 hex digits");
    }
    const std::string bytes = absl::HexStringToBytes(hex);
    std::copy(bytes.begin(), bytes.end(), digest.begin());
    return digest;
  }
  if (secret.size() < kMinSecretLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("the secret is shorter than ", kMinSecretLength, " characters"));
  }
  return Digest(secret);
}

// The credentials of the lines parsed so far.
struct SeenCredentials {
  std::set<std::pair<Scope, std::string>> names;
  std::set<std::string> owner_names;  // of user and admin credentials
  std::set<Sha256> digests;
};

// Adds a credential to `seen`; why it is refused when it repeats a name or a secret.
std::optional<std::string> Record(const Principal& principal, const Sha256& digest,
                                  SeenCredentials& seen) {
  if (!seen.names.insert({principal.scope, principal.name}).second) {
    return absl::StrCat("a second ", ScopeName(principal.scope), " credential named \"",
                        principal.name, "\"");
  }
  const bool owns_work = principal.scope == Scope::kUser || principal.scope == Scope::kAdmin;
  if (owns_work && !seen.owner_names.insert(principal.name).second) {
    return absl::StrCat("\"", principal.name,
                        "\" names both a user and an admin credential (a name owns the work "
                        "it submits, whichever of the two submitted it)");
  }
  if (!seen.digests.insert(digest).second) return "this secret is already used";
  return std::nullopt;
}

}  // namespace

const char* ScopeName(Scope scope) {
  switch (scope) {
    case Scope::kUser:
      return "user";
    case Scope::kRead:
      return "read";
    case Scope::kWorker:
      return "worker";
    case Scope::kAdmin:
      return "admin";
  }
  return "?";
}

absl::StatusOr<CredentialSet> CredentialSet::Parse(absl::string_view text,
                                                   absl::string_view source) {
  CredentialSet set;
  SeenCredentials seen;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::vector<absl::string_view> fields = LineFields(line);
    if (fields.empty()) continue;
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": ", why));
    };
    if (fields.size() != 3) return bad("expected \"SCOPE NAME SECRET\"");
    Entry entry;
    const std::optional<Scope> scope = ScopeNamed(fields[0]);
    if (!scope) {
      return bad(absl::StrCat("unknown scope \"", fields[0], "\" (user, admin, read or worker)"));
    }
    entry.principal.scope = *scope;
    if (!ValidName(fields[1])) return bad("NAME must be [A-Za-z0-9._@-]+");
    entry.principal.name = std::string(fields[1]);
    absl::StatusOr<Sha256> digest = SecretDigest(fields[2]);
    if (!digest.ok()) return bad(digest.status().message());
    entry.digest = *digest;
    if (std::optional<std::string> clash = Record(entry.principal, entry.digest, seen)) {
      return bad(*clash);
    }
    set.entries_.push_back(std::move(entry));
  }
  return set;
}

absl::StatusOr<CredentialSet> CredentialSet::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

std::optional<Principal> CredentialSet::Authenticate(absl::string_view token) const {
  if (entries_.empty()) {
    Principal anonymous;
    anonymous.anonymous = true;
    return anonymous;
  }
  const std::array<uint8_t, 32> digest = Digest(token);
  const Entry* match = nullptr;
  for (const Entry& entry : entries_) {
    // No early exit: every entry is compared whatever matched before.
    const bool equal = CRYPTO_memcmp(entry.digest.data(), digest.data(), digest.size()) == 0;
    if (equal) match = &entry;
  }
  if (match == nullptr || token.empty()) return std::nullopt;
  return match->principal;
}

absl::StatusOr<std::string> ReadToken(const std::string& file, const char* env) {
  if (file.empty()) {
    const char* value = std::getenv(env);
    return std::string(value != nullptr ? value : "");
  }
  absl::StatusOr<std::string> text = ReadFile(file);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("token file ", file, ": ", text.status().message()));
  }
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty())
    return absl::InvalidArgumentError(absl::StrCat("token file ", file, " is empty"));
  return token;
}

}  // namespace xmod
