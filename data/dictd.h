// Reading dictd databases (as shipped by Debian's dict-* packages): the gzip/dictzip data
// file and its .index of "headword<TAB>offset<TAB>length" lines, numbers in dictd's base64.
// Thread-safe free functions.
#ifndef XMOD_DATA_DICTD_H_
#define XMOD_DATA_DICTD_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

// The decompressed bytes of a gzip (or dictzip) file, at most `max_bytes` of them.
// NotFound if missing; DataLoss if the stream is corrupt.
absl::StatusOr<std::string> ReadGzipFile(const std::string& path,
                                         size_t max_bytes = std::numeric_limits<size_t>::max());

struct DictEntry {
  std::string headword;
  uint64_t offset = 0;  // byte offset in the decompressed data
  uint64_t length = 0;  // bytes
};

// Parses the text of a .index file; `path` only names it in errors
// (InvalidArgument "path:line: ...").
absl::StatusOr<std::vector<DictEntry>> ParseDictIndex(absl::string_view index_text,
                                                      const std::string& path);

}  // namespace xmod

#endif  // XMOD_DATA_DICTD_H_
