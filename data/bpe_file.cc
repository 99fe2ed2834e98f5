// Small BPE merges files: save, load, and build a tokenizer from them.
#include "data/bpe_file.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace xmod {
namespace {

constexpr absl::string_view kMagicLine = "xmod-bpe 1";

}  // namespace

absl::Status SaveBpeMerges(const std::string& path, const std::vector<MergePair>& merges) {
  std::string text = absl::StrCat(kMagicLine, "\nmerges ", merges.size(), "\n");
  for (const auto& [left, right] : merges) absl::StrAppend(&text, left, " ", right, "\n");
  return WriteFileAtomic(path, text);
}

absl::StatusOr<std::vector<MergePair>> LoadBpeMerges(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n');
  auto error = [&](size_t line, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", line, ": ", what));
  };
  if (lines.size() < 2 || lines[0] != kMagicLine) {
    return error(1, absl::StrCat("expected \"", kMagicLine, "\""));
  }
  uint32_t count = 0;
  if (!absl::ConsumePrefix(&lines[1], "merges ") || !absl::SimpleAtoi(lines[1], &count)) {
    return error(2, "expected \"merges <count>\"");
  }
  std::vector<MergePair> merges;
  merges.reserve(count);
  for (size_t i = 2; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(lines[i], ' ');
    MergePair m;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &m.first) ||
        !absl::SimpleAtoi(parts[1], &m.second)) {
      return error(i + 1, "expected \"<left id> <right id>\"");
    }
    const uint32_t next_id = 256 + static_cast<uint32_t>(merges.size());
    if (m.first >= next_id || m.second >= next_id) {
      return error(
          i + 1, absl::StrCat("merge uses an id not defined before it (next id is ", next_id, ")"));
    }
    merges.push_back(m);
  }
  if (merges.size() != count) {
    return error(2, absl::StrCat("header says ", count, " merges, file holds ", merges.size()));
  }
  return merges;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> MakeBpeTokenizer(
    const std::vector<MergePair>& merges) {
  std::vector<std::string> tokens(256 + merges.size());
  std::array<uint32_t, 256> byte_ids{};
  for (uint32_t b = 0; b < 256; ++b) {
    tokens[b] = std::string(1, static_cast<char>(b));
    byte_ids[b] = b;
  }
  std::vector<BpeMerge> rules;
  rules.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const uint32_t id = 256 + static_cast<uint32_t>(i);
    const auto [left, right] = merges[i];
    if (left >= id || right >= id) {
      return absl::InvalidArgumentError(
          absl::StrCat("merges[", i, "]: uses an id not defined before it"));
    }
    tokens[id] = tokens[left] + tokens[right];
    rules.push_back(BpeMerge{left, right, id});
  }
  absl::StatusOr<std::unique_ptr<BytePairEncoder>> encoder =
      BytePairEncoder::Create(std::move(tokens), byte_ids, rules);
  if (!encoder.ok()) return encoder.status();
  return std::make_unique<BpeTokenizer>(std::move(*encoder));
}

}  // namespace xmod
