// gcide entry cleaning. The markup left in Debian's dictd build of GCIDE is small: `\...\`
// pronunciations, parenthesised respellings with bracketed entities, `{...}` cross
// references, `[...]` entities and tags. Everything is rewritten in single passes over
// each paragraph.
#include "data/gcide_text.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "data/dictd.h"

namespace xmod {
namespace {

// Entities with a Unicode rendering of their own.
const std::map<absl::string_view, absl::string_view>& NamedEntities() {
  static const auto* map = new std::map<absl::string_view, absl::string_view>{
      {"ae", "æ"},    {"AE", "Æ"},    {"oe", "œ"},   {"OE", "Œ"},   {"eth", "ð"},   {"thorn", "þ"},
      {"yogh", "ȝ"},  {"deg", "°"},   {"sect", "§"}, {"root", "√"}, {"alpha", "α"}, {"beta", "β"},
      {"gamma", "γ"}, {"delta", "δ"}, {"pi", "π"},   {"'e", "é"},   {"'a", "á"},    {"'o", "ó"},
      {"'i", "í"},    {"'u", "ú"},    {"'E", "É"},   {"`e", "è"},   {"`a", "à"},    {"\"o", "ö"},
      {"\"e", "ë"},   {"\"u", "ü"},   {"\"i", "ï"},  {"\"a", "ä"},  {"^o", "ô"},    {"^u", "û"},
      {"^a", "â"},    {"^e", "ê"},    {"^i", "î"},   {"~n", "ñ"},   {",c", "ç"},    {"=ae", "æ"},
      {"ng", "ng"},   {"th", "th"},   {"=oo", "oo"}, {"oo^", "oo"},
  };
  return *map;
}

bool IsAsciiLetters(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isalpha(static_cast<unsigned char>(c));
  });
}

// The text for the bracketed entity `content` (without brackets), or false if it is not an
// entity (a tag like "Obs." or an etymology stays as written).
bool EntityText(absl::string_view content, std::string* out) {
  const auto& named = NamedEntities();
  if (auto it = named.find(content); it != named.end()) {
    *out = std::string(it->second);
    return true;
  }
  // A pronunciation mark before or after one letter: "=a", ".a", "a^", "-o", "*a", "~e".
  static constexpr absl::string_view kMarks = "=.-~^*`'\"";
  if (content.size() == 2 && kMarks.find(content[0]) != absl::string_view::npos &&
      IsAsciiLetters(content.substr(1))) {
    *out = std::string(content.substr(1));
    return true;
  }
  if (content.size() == 2 && content[1] == '^' && IsAsciiLetters(content.substr(0, 1))) {
    *out = std::string(content.substr(0, 1));
    return true;
  }
  // A letter with a named mark: "imac", "aum", "add", "asl", "udd", "dsdot".
  for (absl::string_view suffix : {"mac", "um", "dd", "sl", "sdot", "dot", "bar"}) {
    if (content.size() == suffix.size() + 1 && absl::EndsWith(content, suffix) &&
        IsAsciiLetters(content.substr(0, 1))) {
      *out = std::string(content.substr(0, 1));
      return true;
    }
  }
  return false;
}

// A standalone line naming the source of a definition, e.g. "[1913 Webster]".
bool IsSourceTag(absl::string_view line) {
  if (line.size() < 2 || line.front() != '[' || line.back() != ']') return false;
  for (absl::string_view source : {"Webster", "WordNet", "PJC", "Century", "RDH"}) {
    if (absl::StrContains(line, source)) return true;
  }
  return line == "[AS]";
}

// A parenthesised respelling such as "([.a]*b[a^]n"d[u^]n)": no space, pronunciation marks.
bool IsRespelling(absl::string_view inner) {
  return !inner.empty() && inner.find(' ') == absl::string_view::npos &&
         inner.find_first_of("[\"*`") != absl::string_view::npos;
}

// Removes `\...\` pronunciations and respellings (with the space before them).
std::string DropPronunciations(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    size_t close = absl::string_view::npos;
    if (c == '\\') {
      close = s.find('\\', i + 1);
    } else if (c == '(') {
      const size_t end = s.find(')', i + 1);
      if (end != absl::string_view::npos && IsRespelling(s.substr(i + 1, end - i - 1))) {
        close = end;
      }
    }
    if (close == absl::string_view::npos) {
      out.push_back(c);
      ++i;
      continue;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    i = close + 1;
  }
  return out;
}

// Replaces innermost `[...]` entities and removes `{` `}`.
std::string ReplaceEntities(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '{' || c == '}') {
      ++i;
      continue;
    }
    if (c == '[') {
      const size_t end = s.find_first_of("[]", i + 1);
      std::string text;
      if (end != absl::string_view::npos && s[end] == ']' && end - i - 1 <= 6 &&
          EntityText(s.substr(i + 1, end - i - 1), &text)) {
        out += text;
        i = end + 1;
        continue;
      }
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

// Removes syllable and stress marks from words written like `Ar*te`ri*o*scle*rot"ic`:
// a word (between spaces) holding a '*' between letters loses its '*', '`' and '"'.
std::string DropSyllableMarks(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (absl::string_view word : absl::StrSplit(s, ' ')) {
    if (!out.empty()) out.push_back(' ');
    bool marked = false;
    for (size_t i = 1; i + 1 < word.size() && !marked; ++i) {
      marked = word[i] == '*' && absl::ascii_isalpha(static_cast<unsigned char>(word[i - 1])) &&
               absl::ascii_isalpha(static_cast<unsigned char>(word[i + 1]));
    }
    if (!marked) {
      out.append(word.data(), word.size());
      continue;
    }
    for (char c : word) {
      if (c != '*' && c != '`' && c != '"') out.push_back(c);
    }
  }
  return out;
}

// Collapses runs of spaces and removes spaces before , ; . : ) .
std::string Tidy(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    if ((c == ',' || c == ';' || c == ':' || c == ')') && !out.empty() && out.back() == ' ') {
      out.pop_back();
    }
    out.push_back(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string GcideEntryToText(absl::string_view entry) {
  std::vector<std::string> paragraphs;
  std::vector<absl::string_view> lines;
  auto flush = [&] {
    if (lines.empty()) return;
    std::string joined = absl::StrJoin(lines, " ");
    std::string text = Tidy(DropSyllableMarks(ReplaceEntities(DropPronunciations(joined))));
    if (!text.empty()) paragraphs.push_back(std::move(text));
    lines.clear();
  };
  for (absl::string_view line : absl::StrSplit(entry, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) {
      flush();
    } else if (!IsSourceTag(line)) {
      lines.push_back(line);
    }
  }
  flush();
  return absl::StrJoin(paragraphs, "\n");
}

absl::StatusOr<GcideStats> ConvertGcide(const std::string& dict_path, const std::string& index_path,
                                        const std::string& out_path) {
  absl::StatusOr<std::string> data = ReadGzipFile(dict_path);
  if (!data.ok()) return data.status();
  absl::StatusOr<std::string> index_text = ReadFile(index_path);
  if (!index_text.ok()) return index_text.status();
  absl::StatusOr<std::vector<DictEntry>> entries = ParseDictIndex(*index_text, index_path);
  if (!entries.ok()) return entries.status();
  std::stable_sort(entries->begin(), entries->end(),
                   [](const DictEntry& a, const DictEntry& b) { return a.offset < b.offset; });

  GcideStats stats;
  std::string out;
  out.reserve(data->size());
  // The database's own entries ("00-database-info" and aliases at the same offsets).
  absl::flat_hash_set<uint64_t> metadata;
  for (const DictEntry& e : *entries) {
    if (absl::StartsWith(e.headword, "00-")) metadata.insert(e.offset);
  }
  uint64_t last_offset = UINT64_MAX;
  for (const DictEntry& e : *entries) {
    if (metadata.contains(e.offset) || e.offset == last_offset) continue;
    last_offset = e.offset;
    if (e.offset + e.length > data->size()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, ": entry \"", e.headword,
                                                     "\" lies past the end of ", dict_path));
    }
    std::string text = GcideEntryToText(absl::string_view(*data).substr(e.offset, e.length));
    if (text.empty()) continue;
    absl::StrAppend(&out, text, "\n\n");
    ++stats.entries;
  }
  stats.text_bytes = static_cast<int64_t>(out.size());
  if (absl::Status s = WriteFileAtomic(out_path, out); !s.ok()) return s;
  return stats;
}

}  // namespace xmod
