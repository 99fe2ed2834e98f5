// Python string operations on UTF-8: see python_text.h.
#include "model/eval/python_text.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

#include "absl/strings/str_replace.h"

namespace xmod {
namespace {

bool IsPythonSpace(UChar32 c) { return u_isUWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

std::string ToUtf8(const icu::UnicodeString& text) {
  std::string out;
  text.toUTF8String(out);
  return out;
}

}  // namespace

int64_t CodePoints(absl::string_view text) {
  int64_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return count;
}

std::string PythonStrip(absl::string_view text) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  int32_t begin = 0;
  while (begin < length) {
    int32_t next = begin;
    UChar32 c;
    U8_NEXT(bytes, next, length, c);
    if (!IsPythonSpace(c)) break;
    begin = next;
  }
  int32_t end = length;
  while (end > begin) {
    int32_t previous = end;
    UChar32 c;
    U8_PREV(bytes, begin, previous, c);
    if (!IsPythonSpace(c)) break;
    end = previous;
  }
  return std::string(text.substr(begin, end - begin));
}

std::string PythonCapitalize(absl::string_view text) {
  if (text.empty()) return "";
  const icu::UnicodeString whole = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  const int32_t first_length = U16_LENGTH(whole.char32At(0));
  icu::UnicodeString first(whole, 0, first_length);
  icu::UnicodeString rest(whole, first_length);
  // Whole-string title casing without adjustment = the first code point's full title-case
  // mapping, as Python applies it whether or not that character is a letter.
  first.toTitle(nullptr, icu::Locale::getRoot(),
                U_TITLECASE_WHOLE_STRING | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  rest.toLower(icu::Locale::getRoot());
  return ToUtf8(first) + ToUtf8(rest);
}

std::string HellaSwagPreprocess(absl::string_view text) {
  const std::string titled = absl::StrReplaceAll(PythonStrip(text), {{" [title]", ". "}});
  std::string unbracketed;
  size_t at = 0;
  while (at < titled.size()) {
    if (titled[at] == '[') {
      // The shortest "[...]" from here whose inside holds no newline (regex "." stops there).
      const size_t close = titled.find_first_of("]\n", at + 1);
      if (close != std::string::npos && titled[close] == ']') {
        at = close + 1;
        continue;
      }
    }
    unbracketed.push_back(titled[at++]);
  }
  return absl::StrReplaceAll(unbracketed, {{"  ", " "}});
}

}  // namespace xmod
