// RunSpec files in the three protobuf encodings.
#include "model/train/run_spec_file.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace xmod {
namespace {

// Keeps the text-format parser's first error with its position.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (text.empty())
      text = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ", message);
  }
  std::string text;
};

}  // namespace

absl::StatusOr<xmod::v1::RunSpec> ReadRunSpec(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  xmod::v1::RunSpec spec;
  const std::string where = absl::StrCat("--spec ", path, ": ");
  if (absl::EndsWith(path, ".pb")) {
    if (!spec.ParseFromString(*contents)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "not a binary RunSpec"));
    }
  } else if (absl::EndsWith(path, ".textpb") || absl::EndsWith(path, ".txtpb") ||
             absl::EndsWith(path, ".pbtxt")) {
    google::protobuf::TextFormat::Parser parser;
    FirstError errors;
    parser.RecordErrorsTo(&errors);
    if (!parser.ParseFromString(*contents, &spec)) {
      return absl::InvalidArgumentError(absl::StrCat(where, errors.text));
    }
  } else if (absl::EndsWith(path, ".json")) {
    auto status = google::protobuf::util::JsonStringToMessage(*contents, &spec);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, status.ToString()));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "unknown extension (expected .pb, .textpb or .json)"));
  }
  return spec;
}

}  // namespace xmod
