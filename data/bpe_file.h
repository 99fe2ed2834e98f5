// Small-vocabulary byte-level BPE tokenizers on disk. Token ids 0..255 are the bytes;
// merge i creates token 256 + i. The file is text:
//   xmod-bpe 1
//   merges <M>
//   <left id> <right id>        (M lines, in rank order)
// so vocab_size = 256 + M. Thread-safe free functions.
#ifndef XMOD_DATA_BPE_FILE_H_
#define XMOD_DATA_BPE_FILE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/bpe.h"

namespace xmod {

// A merge of two existing token ids; merge i creates id 256 + i.
using MergePair = std::pair<uint32_t, uint32_t>;

// Writes the merges file atomically.
absl::Status SaveBpeMerges(const std::string& path, const std::vector<MergePair>& merges);

// Reads a merges file. NotFound if missing; InvalidArgument naming the file and line if
// malformed (bad header, count mismatch, an id not yet defined).
absl::StatusOr<std::vector<MergePair>> LoadBpeMerges(const std::string& path);

// The tokenizer of a merge list (ids as above). InvalidArgument if a merge uses an id that
// is not defined before it.
absl::StatusOr<std::unique_ptr<BpeTokenizer>> MakeBpeTokenizer(
    const std::vector<MergePair>& merges);

}  // namespace xmod

#endif  // XMOD_DATA_BPE_FILE_H_
