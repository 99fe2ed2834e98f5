// See linear_functions.h. Each function follows its built-in in SQLite's func.c:
// - trim splits the character set as SQLITE_SKIP_UTF8 does (a byte of 0xc0 or more and the
//   continuation bytes after it; any other byte alone) and, at each end of X, removes the
//   first character of the set (in set order) that X starts or ends with, until none does.
//   Here the set is a hash map from each character to its first position in the set, so each
//   step looks up the at most 4 prefixes (or suffixes) of X that can be characters.
// - instr compares bytes of two blobs, else texts at character starts (position 0 and every
//   byte that is not a continuation byte), and answers the 1-based position of the first
//   match (in characters for texts), 0 for none, 1 for an empty Y.
// - replace substitutes non-overlapping matches of Y's bytes from the left.
// glibc's memmem (two-way matching) finds each next match in time linear in what it scans.
#include "coordinator/store/linear_functions.h"

#include <string.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace xmod {
namespace {

constexpr int kLeft = 1;
constexpr int kRight = 2;
constexpr size_t kMaxCharBytes = 4;

// Character -> its first index in the set.
using CharSet = std::unordered_map<std::string_view, size_t>;

// The set's characters, or nullopt when one is longer than kMaxCharBytes.
std::optional<CharSet> SplitChars(std::string_view set) {
  CharSet chars;
  size_t index = 0;
  for (size_t i = 0; i < set.size(); ++index) {
    size_t j = i + 1;
    if (static_cast<unsigned char>(set[i]) >= 0xc0) {
      while (j < set.size() && (static_cast<unsigned char>(set[j]) & 0xc0) == 0x80) ++j;
    }
    if (j - i > kMaxCharBytes) return std::nullopt;
    chars.emplace(set.substr(i, j - i), index);
    i = j;
  }
  return chars;
}

// Bytes of the set character `text` starts (front) or ends (back) with that comes first in
// the set; 0 when none.
size_t Match(const CharSet& chars, std::string_view text, bool front) {
  size_t best_len = 0;
  size_t best_index = SIZE_MAX;
  for (size_t len = 1; len <= kMaxCharBytes && len <= text.size(); ++len) {
    auto it = chars.find(front ? text.substr(0, len) : text.substr(text.size() - len));
    if (it != chars.end() && it->second < best_index) {
      best_index = it->second;
      best_len = len;
    }
  }
  return best_len;
}

void Trim(sqlite3_context* context, int, sqlite3_value** argv) {
  const int sides = static_cast<int>(reinterpret_cast<intptr_t>(sqlite3_user_data(context)));
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    return;  // NULL, as the built-ins
  }
  const unsigned char* in = sqlite3_value_text(argv[0]);
  const unsigned char* set = sqlite3_value_text(argv[1]);
  if (in == nullptr || set == nullptr) {
    sqlite3_result_error_nomem(context);
    return;
  }
  std::string_view text(reinterpret_cast<const char*>(in), sqlite3_value_bytes(argv[0]));
  std::optional<CharSet> chars = SplitChars(
      std::string_view(reinterpret_cast<const char*>(set), sqlite3_value_bytes(argv[1])));
  if (!chars.has_value()) {
    sqlite3_result_error(context, "trim: the character set is not UTF-8", -1);
    return;
  }
  if (sides & kLeft) {
    while (size_t len = Match(*chars, text, /*front=*/true)) text.remove_prefix(len);
  }
  if (sides & kRight) {
    while (size_t len = Match(*chars, text, /*front=*/false)) text.remove_suffix(len);
  }
  sqlite3_result_text(context, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string_view TextOf(sqlite3_value* value) {
  const unsigned char* text = sqlite3_value_text(value);
  return text == nullptr
             ? std::string_view()
             : std::string_view(reinterpret_cast<const char*>(text), sqlite3_value_bytes(value));
}

std::string_view BlobOf(sqlite3_value* value) {
  const void* blob = sqlite3_value_blob(value);
  return blob == nullptr
             ? std::string_view()
             : std::string_view(static_cast<const char*>(blob), sqlite3_value_bytes(value));
}

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// Offset of the first match of `needle` (not empty) in `haystack` at or after `from`, or npos.
size_t Find(std::string_view haystack, std::string_view needle, size_t from) {
  if (from > haystack.size()) return std::string_view::npos;
  const void* hit =
      memmem(haystack.data() + from, haystack.size() - from, needle.data(), needle.size());
  return hit == nullptr ? std::string_view::npos
                        : static_cast<size_t>(static_cast<const char*>(hit) - haystack.data());
}

void Instr(sqlite3_context* context, int, sqlite3_value** argv) {
  const int haystack_type = sqlite3_value_type(argv[0]);
  const int needle_type = sqlite3_value_type(argv[1]);
  if (haystack_type == SQLITE_NULL || needle_type == SQLITE_NULL) return;
  const bool bytes = haystack_type == SQLITE_BLOB && needle_type == SQLITE_BLOB;
  const std::string_view haystack = bytes ? BlobOf(argv[0]) : TextOf(argv[0]);
  const std::string_view needle = bytes ? BlobOf(argv[1]) : TextOf(argv[1]);
  if (needle.empty()) {
    sqlite3_result_int(context, 1);
    return;
  }
  // A text needle that starts with a continuation byte can match only at position 0, the one
  // character start that may be one.
  const size_t at = !bytes && IsContinuation(needle[0])
                        ? (haystack.substr(0, needle.size()) == needle ? 0 : std::string_view::npos)
                        : Find(haystack, needle, 0);
  if (at == std::string_view::npos) {
    sqlite3_result_int(context, 0);
    return;
  }
  int64_t position = 1;
  if (bytes) {
    position += static_cast<int64_t>(at);
  } else {
    for (size_t i = 1; i <= at; ++i) position += IsContinuation(haystack[i]) ? 0 : 1;
  }
  sqlite3_result_int64(context, position);
}

void Replace(sqlite3_context* context, int, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL ||
      sqlite3_value_type(argv[2]) == SQLITE_NULL) {
    return;
  }
  const std::string_view text = TextOf(argv[0]);
  const std::string_view pattern = TextOf(argv[1]);
  if (pattern.empty() || pattern[0] == '\0') {
    sqlite3_result_value(context, argv[0]);
    return;
  }
  const std::string_view replacement = TextOf(argv[2]);
  const size_t max_bytes = static_cast<size_t>(
      sqlite3_limit(sqlite3_context_db_handle(context), SQLITE_LIMIT_LENGTH, -1));
  std::string out;
  size_t from = 0;
  for (size_t at = Find(text, pattern, 0); at != std::string_view::npos;
       at = Find(text, pattern, from)) {
    out.append(text.substr(from, at - from)).append(replacement);
    from = at + pattern.size();
    if (out.size() > max_bytes) break;
  }
  if (out.size() <= max_bytes) out.append(text.substr(from));
  if (out.size() > max_bytes) {
    sqlite3_result_error_toobig(context);
    return;
  }
  sqlite3_result_text(context, out.data(), static_cast<int>(out.size()), SQLITE_TRANSIENT);
}

}  // namespace

absl::Status RegisterLinearFunctions(sqlite3* db) {
  struct Function {
    const char* name;
    int args;
    void (*fn)(sqlite3_context*, int, sqlite3_value**);
    int sides;  // of the trims
  };
  const Function functions[] = {{"trim", 2, Trim, kLeft | kRight},
                                {"ltrim", 2, Trim, kLeft},
                                {"rtrim", 2, Trim, kRight},
                                {"instr", 2, Instr, 0},
                                {"replace", 3, Replace, 0}};
  for (const Function& f : functions) {
    if (sqlite3_create_function(db, f.name, f.args,
                                SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                reinterpret_cast<void*>(static_cast<intptr_t>(f.sides)), f.fn,
                                nullptr, nullptr) != SQLITE_OK) {
      return absl::InternalError(
          absl::StrCat("cannot register ", f.name, ": ", sqlite3_errmsg(db)));
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
