// See proto_bytes.h.
#include "common/proto_bytes.h"

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace xmod {

std::string DeterministicBytes(const google::protobuf::MessageLite& message) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream out(&stream);
  out.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&out);
  out.Trim();
  return bytes;
}

}  // namespace xmod
