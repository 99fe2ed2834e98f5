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
  std::set<std::pair<Scope, std::string>> names;
  std::set<std::string> owner_names;  // of user and admin credentials
  std::set<std::array<uint8_t, 32>> digests;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    const auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(source, ":", line_number, ": ", why));
    };
    if (fields.size() != 3) return bad("expected \"SCOPE NAME SECRET\"");
    Entry entry;
    if (fields[0] == "user") {
      entry.principal.scope = Scope::kUser;
    } else if (fields[0] == "read") {
      entry.principal.scope = Scope::kRead;
    } else if (fields[0] == "worker") {
      entry.principal.scope = Scope::kWorker;
    } else if (fields[0] == "admin") {
      entry.principal.scope = Scope::kAdmin;
    } else {
      return bad(absl::StrCat("unknown scope \"", fields[0], "\" (user, admin, read or worker)"));
    }
    if (!ValidName(fields[1])) return bad("NAME must be [A-Za-z0-9._@-]+");
    entry.principal.name = std::string(fields[1]);
    const absl::string_view secret = fields[2];
    if (absl::StartsWith(secret, kDigestPrefix)) {
      const absl::string_view hex = secret.substr(kDigestPrefix.size());
      std::string bytes;
      if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), [](char c) {
            return absl::ascii_isxdigit(static_cast<unsigned char>(c));
          })) {
        return bad("a sha256: secret needs 64 hex digits");
      }
      bytes = absl::HexStringToBytes(hex);
      std::copy(bytes.begin(), bytes.end(), entry.digest.begin());
    } else {
      if (secret.size() < kMinSecretLength) {
        return bad(absl::StrCat("the secret is shorter than ", kMinSecretLength, " characters"));
      }
      entry.digest = Digest(secret);
    }
    if (!names.insert({entry.principal.scope, entry.principal.name}).second) {
      return bad(absl::StrCat("a second ", fields[0], " credential named \"", fields[1], "\""));
    }
    const bool owns_work =
        entry.principal.scope == Scope::kUser || entry.principal.scope == Scope::kAdmin;
    if (owns_work && !owner_names.insert(entry.principal.name).second) {
      return bad(absl::StrCat("\"", fields[1],
                              "\" names both a user and an admin credential (a name owns the work "
                              "it submits, whichever of the two submitted it)"));
    }
    if (!digests.insert(entry.digest).second) return bad("this secret is already used");
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
