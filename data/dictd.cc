// dictd data (gzip via zlib's gzread, which also reads dictzip) and index parsing.
#include "data/dictd.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace xmod {
namespace {

// dictd's base64 digit value, or -1.
int Base64Digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool ParseBase64Number(absl::string_view s, uint64_t* value) {
  if (s.empty() || s.size() > 10) return false;
  *value = 0;
  for (char c : s) {
    const int d = Base64Digit(c);
    if (d < 0) return false;
    *value = *value * 64 + static_cast<uint64_t>(d);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> ReadGzipFile(const std::string& path, size_t max_bytes) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    std::string message = absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
  }
  gzbuffer(file, 1 << 20);
  std::string out;
  constexpr size_t kChunk = 1 << 20;
  while (out.size() < max_bytes) {
    const size_t want = std::min(kChunk, max_bytes - out.size());
    const size_t old = out.size();
    out.resize(old + want);
    const int got = gzread(file, out.data() + old, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      std::string message = absl::StrCat(path, ": corrupt gzip data: ", gzerror(file, &code));
      gzclose(file);
      return absl::DataLossError(message);
    }
    out.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
  }
  gzclose(file);
  return out;
}

absl::StatusOr<std::vector<DictEntry>> ParseDictIndex(absl::string_view index_text,
                                                      const std::string& path) {
  std::vector<DictEntry> entries;
  size_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(index_text, '\n')) {
    ++line_no;
    if (line.empty()) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
    DictEntry entry;
    if (fields.size() < 3 || !ParseBase64Number(fields[1], &entry.offset) ||
        !ParseBase64Number(fields[2], &entry.length)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_no, ": expected headword, offset, length"));
    }
    entry.headword = std::string(fields[0]);
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace xmod
