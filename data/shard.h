// Token shards in llm.c's format: a header of 256 little-endian int32 values
// ([0] = magic 20240520, [1] = version 1, [2] = token count, the rest zero) followed by
// `count` uint16 token ids. Real FineWeb-Edu shards made by llm.c or modded-nanogpt load
// as they are. LibTorch-free (target xmod_shards).
//
// Thread-safety: the free functions are thread-compatible; a ShardReader is immutable after
// Open and may be read from any number of threads.
#ifndef XMOD_DATA_SHARD_H_
#define XMOD_DATA_SHARD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace xmod {

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);

struct ShardHeader {
  int32_t magic = kShardMagic;
  int32_t version = kShardVersion;
  int64_t num_tokens = 0;  // tokens after the header (uint16 each)
};

// Reads and validates the header of `path` (magic, version, non-negative count).
// NotFound if the file is missing; DataLoss with the file name and the reason otherwise.
// Does not check the file size (ShardReader::Open does).
absl::StatusOr<ShardHeader> ReadShardHeader(const std::string& path);

// A read-only memory map of one shard's tokens.
class ShardReader {
 public:
  // Maps `path` after validating magic, version and that the file holds exactly the
  // header's token count. Errors name the file and what is wrong, e.g.
  // "x.bin: truncated: header says 100 tokens, file holds 50".
  static absl::StatusOr<std::unique_ptr<ShardReader>> Open(const std::string& path);

  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  // Number of tokens.
  size_t size() const { return size_; }
  // The tokens, valid while this reader lives (nullptr if size() == 0).
  const uint16_t* tokens() const { return tokens_; }
  absl::Span<const uint16_t> span() const { return {tokens_, size_}; }

 private:
  ShardReader(std::string path, void* map, size_t map_bytes, size_t size);

  std::string path_;
  void* map_;         // whole-file mapping (nullptr for an empty file)
  size_t map_bytes_;  // length of map_
  const uint16_t* tokens_;
  size_t size_;
};

// Writes `tokens` as a shard at `path` atomically (temp file + fsync + rename): readers see
// the old file or the whole new one.
absl::Status WriteShard(const std::string& path, absl::Span<const uint16_t> tokens);

// The files matching a shell glob `pattern`, sorted. NotFound naming the pattern if none.
absl::StatusOr<std::vector<std::string>> ExpandGlob(const std::string& pattern);

}  // namespace xmod

#endif  // XMOD_DATA_SHARD_H_
