// Training a small byte-level BPE vocabulary on a corpus (for CPU-scale sweeps, where the
// LM head must not dominate the FLOPs). The text is pre-tokenized with the GPT-2 pattern
// into words with counts; merges never cross word boundaries, as at encoding time.
// Thread-compatible free function.
#ifndef XMOD_DATA_BPE_TRAINER_H_
#define XMOD_DATA_BPE_TRAINER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/bpe_file.h"

namespace xmod {

// Learns up to `vocab_size - 256` merges from `text`: each step merges the most frequent
// adjacent pair (ties: the smaller (left, right) ids), creating id 256 + step. Stops early
// when no pair occurs at least twice. InvalidArgument if vocab_size is not in
// [256, 65536] (ids must fit the uint16 shards).
absl::StatusOr<std::vector<MergePair>> TrainBpe(absl::string_view text, int vocab_size);

}  // namespace xmod

#endif  // XMOD_DATA_BPE_TRAINER_H_
