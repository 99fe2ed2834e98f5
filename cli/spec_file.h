// Spec files: a SweepSpec written by a user as protobuf text format (.textpb, .txtpb,
// .pbtxt, .textproto) or JSON (.json), or piped to standard input ("-f -"), parsed with protobuf's
// own TextFormat and JsonStringToMessage. Errors carry "FILE:LINE:COLUMN: message" (1-based) so an
// editor can jump to them. Pure functions; thread-safe.
#ifndef XMOD_CLI_SPEC_FILE_H_
#define XMOD_CLI_SPEC_FILE_H_

#include <istream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "xmod/v1/spec.pb.h"

namespace xmod::cli {

enum class SpecSyntax { kText, kJson };

// The syntax an extension implies; INVALID_ARGUMENT for any other extension.
absl::StatusOr<SpecSyntax> SpecSyntaxForPath(absl::string_view path);

// Parses `contents` into `message`; `name` labels errors (usually the file path).
// INVALID_ARGUMENT "NAME:LINE:COL: what" on syntax errors and unknown fields; a JSON error
// that names a field carries its path as payload (common/field_path.h).
absl::Status ParseSpecText(absl::string_view contents, SpecSyntax syntax, absl::string_view name,
                           google::protobuf::Message* message);

// The syntax of a spec without an extension (standard input): JSON when the first
// non-blank character is '{', else text format.
SpecSyntax SpecSyntaxForContents(absl::string_view contents);

// Reads and parses a spec file into `message`: `path`, or standard input (`in`) when `path`
// is "-". The syntax comes from the extension, or from the contents for "-" and for a path
// without an extension. NOT_FOUND when the file cannot be read (or "-" without `in`).
absl::Status LoadSpec(const std::string& path, std::istream* in,
                      google::protobuf::Message* message);

// LoadSpec of a SweepSpec.
absl::StatusOr<xmod::v1::SweepSpec> LoadSweepSpec(const std::string& path,
                                                  std::istream* in = nullptr);

// Makes relative data globs absolute against `base_dir` (the user's working directory), so
// that a spec means the same files whatever directory the coordinator runs in.
void AbsolutizeDataGlobs(const std::string& base_dir, xmod::v1::SweepSpec* spec);

}  // namespace xmod::cli

#endif  // XMOD_CLI_SPEC_FILE_H_
