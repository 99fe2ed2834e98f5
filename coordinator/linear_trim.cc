// See linear_trim.h. SQLite splits the character set as SQLITE_SKIP_UTF8 does (a byte of
// 0xc0 or more and the continuation bytes after it; any other byte alone) and, at each end of
// X, removes the first character of the set (in set order) that X starts or ends with, until
// none does. Here the set is a hash map from each character to its first position in the set,
// so each step looks up the at most 4 prefixes (or suffixes) of X that can be characters.
#include "coordinator/linear_trim.h"

#include <cstdint>
#include <optional>
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

}  // namespace

absl::Status RegisterLinearTrim(sqlite3* db) {
  const std::pair<const char*, int> functions[] = {
      {"trim", kLeft | kRight}, {"ltrim", kLeft}, {"rtrim", kRight}};
  for (const auto& [name, sides] : functions) {
    if (sqlite3_create_function(db, name, 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
                                reinterpret_cast<void*>(static_cast<intptr_t>(sides)), Trim,
                                nullptr, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("cannot register ", name, ": ", sqlite3_errmsg(db)));
    }
  }
  return absl::OkStatus();
}

}  // namespace xmod
