// OpenTokenizer: a tokenizer (tokenizer.h) chosen by a command-line spec — the exact GPT-2
// vocabulary (gpt2_vocab.h) or a small trained merges file (bpe_file.h). Apart from the
// interface so that the encoders, which implement it, do not include their own factory.
#ifndef XMOD_DATA_OPEN_TOKENIZER_H_
#define XMOD_DATA_OPEN_TOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "data/tokenizer.h"

namespace xmod {

// "gpt2" loads the GPT-2 vocabulary from `gpt2_dir` (encoder.json, vocab.bpe); anything
// else is the path of a merges file written by SaveBpeMerges.
absl::StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& spec,
                                                         const std::string& gpt2_dir);

}  // namespace xmod

#endif  // XMOD_DATA_OPEN_TOKENIZER_H_
