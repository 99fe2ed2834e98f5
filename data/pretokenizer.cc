// The GPT-2 pattern as a hand-written scanner over byte positions, decoding code points as
// it goes (no per-text allocation beyond the output). Each numbered step below is one
// alternative of the pattern, tried in the pattern's order.
#include "data/pretokenizer.h"

#include "data/unicode_classes.h"

namespace xmod {
namespace {

class Scanner {
 public:
  explicit Scanner(absl::string_view text) : text_(text) {}

  // End (byte offset, exclusive) of the piece starting at byte offset `pos`.
  size_t PieceEnd(size_t pos) const {
    // 1. Contractions.
    if (size_t len = ContractionAt(pos); len > 0) return pos + len;
    // 2-4. ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: an optional space, then a run.
    const CodePoint first = DecodeCodePoint(text_, pos);
    if (first.cls != CharClass::kSpace) return RunEnd(pos, first.cls);
    if (first.value == U' ' && pos + 1 < text_.size()) {
      const CodePoint next = DecodeCodePoint(text_, pos + 1);
      if (next.cls != CharClass::kSpace) return RunEnd(pos + 1, next.cls);
    }
    // Whitespace run [pos, end); `last` is the byte offset of its last character.
    size_t end = pos;
    size_t last = pos;
    size_t count = 0;
    while (end < text_.size()) {
      const CodePoint cp = DecodeCodePoint(text_, end);
      if (cp.cls != CharClass::kSpace) break;
      last = end;
      end += cp.bytes;
      ++count;
    }
    // 5. `\s+(?!\S)`: the whole run at the end of text, else the run less its last character.
    if (end == text_.size()) return end;
    if (count >= 2) return last;
    // 6. `\s+`: a single whitespace character before non-space.
    return end;
  }

 private:
  // Byte length of a contraction 's 't 're 've 'm 'll 'd at pos, or 0.
  size_t ContractionAt(size_t pos) const {
    auto at = [&](size_t k) -> char { return k < text_.size() ? text_[k] : '\0'; };
    if (at(pos) != '\'') return 0;
    const char a = at(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    const char b = at(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  // End of the run of code points of class `cls` starting at pos.
  size_t RunEnd(size_t pos, CharClass cls) const {
    while (pos < text_.size()) {
      const CodePoint cp = DecodeCodePoint(text_, pos);
      if (cp.cls != cls) break;
      pos += cp.bytes;
    }
    return pos;
  }

  absl::string_view text_;
};

}  // namespace

void ForEachGpt2Piece(absl::string_view text, absl::FunctionRef<void(absl::string_view)> piece) {
  const Scanner scanner(text);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = scanner.PieceEnd(pos);
    piece(text.substr(pos, end - pos));
    pos = end;
  }
}

std::vector<absl::string_view> SplitGpt2(absl::string_view text) {
  std::vector<absl::string_view> pieces;
  ForEachGpt2Piece(text, [&](absl::string_view p) { pieces.push_back(p); });
  return pieces;
}

}  // namespace xmod
