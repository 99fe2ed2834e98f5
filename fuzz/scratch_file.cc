// See scratch_file.h.
#include "fuzz/scratch_file.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace xmod::fuzz {
namespace {

std::string ScratchDir() {
  if (::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

}  // namespace

ScratchFile::ScratchFile(const std::string& name)
    : path_(ScratchDir() + "/xmod-fuzz-" + std::to_string(::getpid()) + "-" + name) {}

ScratchFile::~ScratchFile() { Remove(); }

void ScratchFile::Write(const uint8_t* data, size_t size) const {
  FILE* f = std::fopen(path_.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
}

void ScratchFile::Remove() const { std::remove(path_.c_str()); }

}  // namespace xmod::fuzz
