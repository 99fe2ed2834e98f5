// Reading the RunSpec that xmod-train is given: binary protobuf (`.pb`), protobuf text
// format (`.textpb`, also `.txtpb`/`.pbtxt`) or protobuf JSON (`.json`), chosen by extension.
// Thread-compatible.
#ifndef XMOD_MODEL_TRAIN_RUN_SPEC_FILE_H_
#define XMOD_MODEL_TRAIN_RUN_SPEC_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "xmod/v1/spec.pb.h"

namespace xmod {

// NOT_FOUND if the file is missing; INVALID_ARGUMENT "--spec FILE: ..." if the extension is
// unknown or the contents do not parse (with the parser's message).
absl::StatusOr<xmod::v1::RunSpec> ReadRunSpec(const std::string& path);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_RUN_SPEC_FILE_H_
