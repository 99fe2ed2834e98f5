// Fuzzes the checkpoint loader (model/train/checkpoint.h) up to the archive parser: the
// input is a sidecar line ("<sha256 hex>  <name>", up to the first newline) followed by the
// checkpoint file's bytes. LoadCheckpoint must refuse every file that does not hash to its
// sidecar's digest, with a status and before LibTorch parses anything. Arbitrary bytes are
// not fed to the parser on purpose: LibTorch's TorchScript importer has crashed (SIGSEGV) on
// damaged archives, and its unpickler reserves whatever length a damaged pickle names (an
// input whose sidecar the fuzzer forged to match asked for 0.8 EB), so a resume verifies
// the digest first, and an input whose digest matches is not loaded here: only the trainer
// that wrote a file can make its sidecar (checkpoint_archive_fuzzer covers what follows a
// parse).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "fuzz/checkpoint_fixture.h"
#include "fuzz/scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static xmod::fuzz::CheckpointFixture* fixture = new xmod::fuzz::CheckpointFixture();
  static const xmod::fuzz::ScratchFile* file = new xmod::fuzz::ScratchFile("ckpt.pt");
  static const xmod::fuzz::ScratchFile* sidecar = new xmod::fuzz::ScratchFile("ckpt.pt.sha256");

  const uint8_t* newline = static_cast<const uint8_t*>(std::memchr(data, '\n', size));
  if (newline == nullptr) return 0;  // every checkpoint here has a sidecar
  const size_t line = static_cast<size_t>(newline - data) + 1;
  sidecar->Write(data, line);
  file->Write(data + line, size - line);
  const std::string digest =
      xmod::Sha256Hex(absl::string_view(reinterpret_cast<const char*>(data) + line, size - line));
  const bool matches = line > 64 && std::memcmp(data, digest.data(), 64) == 0 &&
                       (data[64] == ' ' || data[64] == '\n');
  if (matches) return 0;  // vouched for by its writer: not this target's (header comment)

  xmod::TrainState state;
  absl::Status status = xmod::LoadCheckpoint(file->path(), fixture->model.get(),
                                             fixture->muon.get(), fixture->adamw.get(), &state);
  if (status.code() != absl::StatusCode::kDataLoss) std::abort();
  return 0;
}
