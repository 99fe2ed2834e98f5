// Encoding a text corpus into llm.c train/val shards. The text is a sequence of documents
// separated by blank lines; every document goes wholly to train or to val, spread evenly
// through the corpus (document i goes to val when floor((i+1)·f) > floor(i·f), f the val
// fraction), so val samples the whole corpus rather than its tail. Thread-compatible.
#ifndef XMOD_DATA_CORPUS_ENCODER_H_
#define XMOD_DATA_CORPUS_ENCODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/tokenizer.h"

namespace xmod {

struct CorpusEncodeOptions {
  // Shards are PREFIX_train_000.bin, PREFIX_train_001.bin, ..., PREFIX_val_000.bin, ...
  std::string out_prefix;
  double val_fraction = 0.05;          // in [0, 1)
  int64_t shard_tokens = 100'000'000;  // tokens per shard (the last one may hold fewer)
  int64_t eot_id = -1;  // if >= 0, prepended to every document (llm.c's GPT-2 convention)
};

struct CorpusEncodeStats {
  int64_t documents = 0;
  int64_t val_documents = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  std::vector<std::string> train_shards;
  std::vector<std::string> val_shards;
};

// The documents of `text`: each runs up to and including the blank line (and any further
// newlines) that ends it; the last one to the end of the text.
std::vector<absl::string_view> SplitDocuments(absl::string_view text);

// Whether document `index` (from 0) of a corpus goes to the validation split.
bool IsValidationDocument(int64_t index, double val_fraction);

// Encodes `text` with `tokenizer` into shards (each written atomically). InvalidArgument
// naming the option if an option is out of range or the vocabulary does not fit uint16.
absl::StatusOr<CorpusEncodeStats> EncodeCorpus(absl::string_view text, Tokenizer& tokenizer,
                                               const CorpusEncodeOptions& options);

}  // namespace xmod

#endif  // XMOD_DATA_CORPUS_ENCODER_H_
