// gcide task generation: qualifying entries, seeded distractors, one JSON line each
// (xmod.v1.GcideTaskExample through protobuf's JSON printer).
#include "data/gcide_task.h"

#include <algorithm>
#include <random>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/proto_json.h"
#include "data/corpus_encoder.h"
#include "xmod/v1/eval.pb.h"

namespace xmod {
namespace {

struct Entry {
  std::string headword;
  std::string definition;
};

bool IsHeadwordChar(char c) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '-' || c == '\'';
}

// The entry of `document`, if it qualifies (gcide_task.h).
bool ParseEntry(absl::string_view document, size_t max_bytes, Entry* entry) {
  const absl::string_view line = document.substr(0, document.find('\n'));
  size_t end = 0;
  while (end < line.size() && IsHeadwordChar(line[end])) ++end;
  if (end < 3 || !absl::ascii_isalpha(static_cast<unsigned char>(line[0]))) return false;
  absl::string_view rest = line.substr(end);
  if (absl::StartsWith(rest, ", ")) {
    rest.remove_prefix(2);
  } else if (absl::StartsWith(rest, " ")) {
    rest.remove_prefix(1);
  } else {
    return false;
  }
  static constexpr absl::string_view kParts[] = {"n. ",    "v. ",    "a. ",      "adj. ", "adv. ",
                                                 "prep. ", "conj. ", "interj. ", "pron. "};
  bool part = false;
  for (absl::string_view p : kParts) part = part || absl::StartsWith(rest, p);
  if (!part) return false;
  if (rest.size() > max_bytes) {
    const size_t space = rest.substr(0, max_bytes + 1).find_last_of(' ');
    if (space == absl::string_view::npos) return false;
    rest = rest.substr(0, space);
  }
  const std::string headword(line.substr(0, end));
  if (absl::StrContains(absl::AsciiStrToLower(rest), absl::AsciiStrToLower(headword))) {
    return false;
  }
  *entry = {headword, std::string(rest)};
  return true;
}

// A uniform draw from [0, n) (rejection sampling; fully specified, unlike the standard's
// distributions).
uint64_t Draw(std::mt19937_64& rng, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % n;
}

}  // namespace

absl::StatusOr<std::string> MakeGcideTask(absl::string_view corpus_text,
                                          const GcideTaskOptions& options, GcideTaskStats* stats) {
  if (!(options.val_fraction > 0 && options.val_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("val_fraction: ", options.val_fraction, " is outside (0, 1)"));
  }
  if (options.choices < 2) return absl::InvalidArgumentError("choices: must be >= 2");
  if (options.max_examples < 1) return absl::InvalidArgumentError("max_examples: must be >= 1");
  *stats = GcideTaskStats();
  std::vector<Entry> entries;
  absl::flat_hash_set<std::string> seen;  // lower-case headwords
  const std::vector<absl::string_view> documents = SplitDocuments(corpus_text);
  stats->documents = static_cast<int64_t>(documents.size());
  for (size_t i = 0; i < documents.size(); ++i) {
    Entry entry;
    if (!IsValidationDocument(static_cast<int64_t>(i), options.val_fraction) ||
        !ParseEntry(documents[i], options.max_definition_bytes, &entry) ||
        !seen.insert(absl::AsciiStrToLower(entry.headword)).second) {
      continue;
    }
    entries.push_back(std::move(entry));
  }
  stats->qualifying = static_cast<int64_t>(entries.size());
  if (entries.size() < static_cast<size_t>(options.choices)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "choices: only ", entries.size(), " entries qualify, fewer than ", options.choices));
  }
  std::mt19937_64 rng(options.seed);
  const size_t n = std::min(entries.size(), static_cast<size_t>(options.max_examples));
  std::string out;
  for (size_t e = 0; e < n; ++e) {
    const size_t right = e * entries.size() / n;  // evenly spread
    std::vector<size_t> picked = {right};
    while (picked.size() < static_cast<size_t>(options.choices)) {
      const size_t other = Draw(rng, entries.size());
      if (std::find(picked.begin(), picked.end(), other) == picked.end()) picked.push_back(other);
    }
    const size_t label = Draw(rng, picked.size());
    std::swap(picked[0], picked[label]);
    xmod::v1::GcideTaskExample example;
    example.set_definition(entries[right].definition);
    for (size_t p : picked) example.add_choices(entries[p].headword);
    example.set_label(static_cast<int>(label));
    absl::StatusOr<std::string> json = ProtoJson(example, JsonLayout::kLine);
    if (!json.ok()) return json.status();
    absl::StrAppend(&out, *json, "\n");
  }
  stats->examples = static_cast<int64_t>(n);
  return out;
}

absl::StatusOr<GcideTaskStats> WriteGcideTask(const std::string& text_path,
                                              const std::string& out_path,
                                              const GcideTaskOptions& options) {
  absl::StatusOr<std::string> text = ReadFile(text_path);
  if (!text.ok()) return text.status();
  GcideTaskStats stats;
  absl::StatusOr<std::string> lines = MakeGcideTask(*text, options, &stats);
  if (!lines.ok()) return lines.status();
  if (absl::Status s = WriteFileAtomic(out_path, *lines); !s.ok()) return s;
  return stats;
}

}  // namespace xmod
