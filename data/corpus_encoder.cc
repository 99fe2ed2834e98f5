// Document splitting, train/val assignment and shard cutting for EncodeCorpus.
#include "data/corpus_encoder.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/shard.h"

namespace xmod {
namespace {

// Accumulates one split's tokens and cuts them into numbered shards.
class ShardSink {
 public:
  ShardSink(std::string prefix, int64_t shard_tokens, std::vector<std::string>* paths)
      : prefix_(std::move(prefix)), shard_tokens_(shard_tokens), paths_(paths) {}

  absl::Status Add(const std::vector<uint32_t>& ids, int64_t* total) {
    for (uint32_t id : ids) {
      buffer_.push_back(static_cast<uint16_t>(id));
      if (static_cast<int64_t>(buffer_.size()) == shard_tokens_) {
        if (absl::Status s = Flush(); !s.ok()) return s;
      }
    }
    *total += static_cast<int64_t>(ids.size());
    return absl::OkStatus();
  }

  absl::Status Flush() {
    if (buffer_.empty()) return absl::OkStatus();
    std::string path = absl::StrFormat("%s_%03d.bin", prefix_, paths_->size());
    if (absl::Status s = WriteShard(path, buffer_); !s.ok()) return s;
    paths_->push_back(std::move(path));
    buffer_.clear();
    return absl::OkStatus();
  }

 private:
  std::string prefix_;
  int64_t shard_tokens_;
  std::vector<std::string>* paths_;
  std::vector<uint16_t> buffer_;
};

}  // namespace

std::vector<absl::string_view> SplitDocuments(absl::string_view text) {
  std::vector<absl::string_view> documents;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    end = end == absl::string_view::npos ? text.size() : end + 2;
    while (end < text.size() && text[end] == '\n') ++end;
    documents.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return documents;
}

bool IsValidationDocument(int64_t index, double val_fraction) {
  return std::floor((index + 1) * val_fraction) > std::floor(index * val_fraction);
}

namespace {

absl::Status ValidateOptions(const Tokenizer& tokenizer, const CorpusEncodeOptions& options) {
  if (options.out_prefix.empty()) {
    return absl::InvalidArgumentError("out_prefix: must not be empty");
  }
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("val_fraction: ", options.val_fraction, " is outside [0, 1)"));
  }
  if (options.shard_tokens < 1 || options.shard_tokens > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_tokens: ", options.shard_tokens, " is outside [1, 2^31)"));
  }
  if (tokenizer.vocab_size() > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer: vocabulary of ", tokenizer.vocab_size(), " does not fit uint16 shards"));
  }
  if (options.eot_id >= static_cast<int64_t>(tokenizer.vocab_size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("eot_id: ", options.eot_id, " is outside the vocabulary"));
  }
  return absl::OkStatus();
}

absl::Status CreateParentDirectory(const std::string& out_prefix) {
  const std::filesystem::path parent = std::filesystem::path(out_prefix).parent_path();
  if (parent.empty()) return absl::OkStatus();
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("cannot create ", parent.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

// Encodes each document (after an end-of-text token when eot_id >= 0) into the train or the
// validation shards.
absl::StatusOr<CorpusEncodeStats> EncodeDocuments(absl::string_view text, Tokenizer& tokenizer,
                                                  const CorpusEncodeOptions& options) {
  CorpusEncodeStats stats;
  ShardSink train(options.out_prefix + "_train", options.shard_tokens, &stats.train_shards);
  ShardSink val(options.out_prefix + "_val", options.shard_tokens, &stats.val_shards);
  std::vector<uint32_t> ids;
  for (absl::string_view doc : SplitDocuments(text)) {
    ids.clear();
    if (options.eot_id >= 0) ids.push_back(static_cast<uint32_t>(options.eot_id));
    std::vector<uint32_t> encoded = tokenizer.Encode(doc);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    const bool to_val = IsValidationDocument(stats.documents++, options.val_fraction);
    absl::Status s = to_val ? val.Add(ids, &stats.val_tokens) : train.Add(ids, &stats.train_tokens);
    if (!s.ok()) return s;
    if (to_val) ++stats.val_documents;
  }
  if (absl::Status s = train.Flush(); !s.ok()) return s;
  if (absl::Status s = val.Flush(); !s.ok()) return s;
  return stats;
}

}  // namespace

absl::StatusOr<CorpusEncodeStats> EncodeCorpus(absl::string_view text, Tokenizer& tokenizer,
                                               const CorpusEncodeOptions& options) {
  if (absl::Status s = ValidateOptions(tokenizer, options); !s.ok()) return s;
  if (absl::Status s = CreateParentDirectory(options.out_prefix); !s.ok()) return s;
  return EncodeDocuments(text, tokenizer, options);
}

}  // namespace xmod
