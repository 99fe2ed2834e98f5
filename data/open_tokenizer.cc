// OpenTokenizer: the GPT-2 vocabulary or a small merges file, chosen by a spec string.
#include "data/open_tokenizer.h"

#include "data/bpe_file.h"
#include "data/gpt2_vocab.h"

namespace xmod {

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& spec,
                                                         const std::string& gpt2_dir) {
  if (spec == "gpt2") {
    absl::StatusOr<std::unique_ptr<BpeTokenizer>> gpt2 = LoadGpt2Tokenizer(gpt2_dir);
    if (!gpt2.ok()) return gpt2.status();
    return std::unique_ptr<Tokenizer>(std::move(*gpt2));
  }
  absl::StatusOr<std::vector<MergePair>> merges = LoadBpeMerges(spec);
  if (!merges.ok()) return merges.status();
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> small = MakeBpeTokenizer(*merges);
  if (!small.ok()) return small.status();
  return std::unique_ptr<Tokenizer>(std::move(*small));
}

}  // namespace xmod
