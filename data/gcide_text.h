// Turning the dict-gcide database (Webster 1913 + WordNet, dictd format) into plain
// English running text for language-model training: pronunciations (`\A*ban"don\`,
// `([.a]*b[a^]n"d[u^]n)`), syllable marks (`Ar*te`ri*al`) and source tags (`[1913 Webster]`)
// are dropped, character entities (`[ae]`, `['e]`, `[eth]`) become Unicode or their base letter,
// cross-reference braces `{...}` are removed, and each paragraph (definition, quotation,
// usage note) is reflowed onto one line. Thread-safe free functions.
#ifndef XMOD_DATA_GCIDE_TEXT_H_
#define XMOD_DATA_GCIDE_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xmod {

// The plain text of one dictd entry: its paragraphs, one per line (no trailing newline);
// empty if nothing is left.
std::string GcideEntryToText(absl::string_view entry);

struct GcideStats {
  int64_t entries = 0;     // entries written
  int64_t text_bytes = 0;  // bytes of the output file
};

// Converts the database `dict_path` (gzip/dictzip) with its index `index_path` into
// `out_path` (written atomically): entries in database order, separated by blank lines,
// skipping the database's own "00-..." entries and duplicate offsets.
absl::StatusOr<GcideStats> ConvertGcide(const std::string& dict_path, const std::string& index_path,
                                        const std::string& out_path);

}  // namespace xmod

#endif  // XMOD_DATA_GCIDE_TEXT_H_
