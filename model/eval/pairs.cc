// Pairs mode's reading and writing: see pairs.h.
#include "model/eval/pairs.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace xmod {
namespace {

using ::google::protobuf::Struct;
using ::google::protobuf::Value;

absl::StatusOr<std::string> Text(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  if (it == object.fields().end()) return absl::InvalidArgumentError("no \"" + name + "\" field");
  if (it->second.kind_case() != Value::kStringValue) {
    return absl::InvalidArgumentError("\"" + name + "\" is not a string");
  }
  return it->second.string_value();
}

absl::StatusOr<Choice> ParsePair(absl::string_view row) {
  Struct object;
  auto parsed = google::protobuf::util::JsonStringToMessage(std::string(row), &object);
  if (!parsed.ok()) {
    const std::string message(parsed.message().data(), parsed.message().size());
    return absl::InvalidArgumentError(
        absl::StrCat("not a JSON object: ", message.substr(0, message.find('\n'))));
  }
  Choice pair;
  absl::StatusOr<std::string> context = Text(object, "context");
  if (!context.ok()) return context.status();
  absl::StatusOr<std::string> continuation = Text(object, "continuation");
  if (!continuation.ok()) return continuation.status();
  if (continuation->empty()) return absl::InvalidArgumentError("\"continuation\" is empty");
  const int64_t bytes = static_cast<int64_t>(context->size() + continuation->size());
  if (bytes > kMaxPairTextBytes) {
    return absl::InvalidArgumentError(absl::StrCat("\"context\" and \"continuation\" hold ", bytes,
                                                   " bytes, over the limit of ",
                                                   kMaxPairTextBytes));
  }
  pair.context = *std::move(context);
  pair.continuation = *std::move(continuation);
  return pair;
}

std::string JsonNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return absl::StrFormat("%.17g", value);
}

}  // namespace

absl::StatusOr<std::vector<Choice>> ReadPairs(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, kMaxPairsFileBytes);
  if (!text.ok()) return text.status();
  std::vector<Choice> pairs;
  int64_t number = 0;
  for (absl::string_view row : absl::StrSplit(*text, '\n')) {
    ++number;
    if (absl::StripAsciiWhitespace(row).empty()) continue;
    if (static_cast<int64_t>(pairs.size()) == kMaxPairs) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": more than the limit of ", kMaxPairs, " pairs"));
    }
    absl::StatusOr<Choice> pair = ParsePair(row);
    if (!pair.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": ", pair.status().message()));
    }
    pairs.push_back(*std::move(pair));
  }
  if (pairs.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no pairs"));
  return pairs;
}

std::string PairScoreJson(const ContinuationScore& score) {
  return absl::StrCat("{\"loglikelihood\": ", JsonNumber(score.loglik),
                      ", \"is_greedy\": ", score.greedy ? "true" : "false",
                      ", \"tokens\": ", score.tokens, "}");
}

}  // namespace xmod
