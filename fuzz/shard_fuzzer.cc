// Fuzzes the llm.c shard reader (data/shard.h): any bytes as a shard file go through
// ReadShardHeader and ShardReader::Open; an accepted shard must agree with its header and
// every token must be readable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "data/shard.h"
#include "fuzz/scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const xmod::fuzz::ScratchFile* file = new xmod::fuzz::ScratchFile("shard.bin");
  file->Write(data, size);

  absl::StatusOr<xmod::ShardHeader> header = xmod::ReadShardHeader(file->path());
  absl::StatusOr<std::unique_ptr<xmod::ShardReader>> reader = xmod::ShardReader::Open(file->path());
  if (!reader.ok()) return 0;
  // Open validates at least what ReadShardHeader does.
  if (!header.ok()) std::abort();
  const xmod::ShardReader& shard = **reader;
  if (shard.size() != static_cast<size_t>(header->num_tokens)) std::abort();
  if (xmod::kShardHeaderBytes + shard.size() * sizeof(uint16_t) != size) std::abort();
  uint32_t sum = 0;
  for (uint16_t token : shard.span()) sum += token;
  // Tokens are the bytes after the header, little-endian.
  uint32_t expected = 0;
  for (size_t i = xmod::kShardHeaderBytes; i + 1 < size; i += 2) {
    expected += static_cast<uint32_t>(data[i] | (data[i + 1] << 8));
  }
  if (sum != expected) std::abort();
  return 0;
}
