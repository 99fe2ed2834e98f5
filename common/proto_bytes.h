// Protobuf messages as bytes that are equal exactly when the messages are: deterministic
// serialization (map entries in key order), for keys of maps, fingerprints and hashes that must
// not depend on how a message was built.
#ifndef XMOD_COMMON_PROTO_BYTES_H_
#define XMOD_COMMON_PROTO_BYTES_H_

#include <string>

#include "google/protobuf/message_lite.h"

namespace xmod {

std::string DeterministicBytes(const google::protobuf::MessageLite& message);

}  // namespace xmod

#endif  // XMOD_COMMON_PROTO_BYTES_H_
