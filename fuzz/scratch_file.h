// Scratch files for fuzz targets whose code under test reads a path, not a buffer: one
// file per process (and per name), rewritten on every input, removed at exit. Kept on
// /dev/shm when it exists so that an iteration costs no disk I/O. Not thread-safe (libFuzzer
// runs one input at a time per process).
#ifndef XMOD_FUZZ_SCRATCH_FILE_H_
#define XMOD_FUZZ_SCRATCH_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace xmod::fuzz {

class ScratchFile {
 public:
  // `name` distinguishes files of one process, e.g. "shard.bin".
  explicit ScratchFile(const std::string& name);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }
  // Replaces the file's contents with `size` bytes at `data`; aborts on I/O failure (the
  // fuzz run is then meaningless).
  void Write(const uint8_t* data, size_t size) const;
  // Removes the file (a later Write creates it again).
  void Remove() const;

 private:
  std::string path_;
};

}  // namespace xmod::fuzz

#endif  // XMOD_FUZZ_SCRATCH_FILE_H_
