// Fuzzes what the checkpoint loader (model/train/checkpoint.h) does after the archive
// parses: the input edits a valid checkpoint of CheckpointFixture entry by entry (keeps it,
// drops it, or replaces it with a tensor of another dtype, shape or value) and may add
// entries; the edited archive, saved with a matching sidecar, is loaded. Random bytes rarely
// form a valid archive, so this reaches the key, shape and scalar checks that
// checkpoint_fuzzer seldom does. LoadCheckpoint must return a status, never throw or crash.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "fuzz/checkpoint_fixture.h"
#include "fuzz/scratch_file.h"

namespace {

using Entries = std::vector<std::pair<std::string, torch::Tensor>>;

// The entries of a checkpoint of the fixture, in the archive's key order.
Entries ValidEntries(xmod::fuzz::CheckpointFixture& fixture) {
  xmod::fuzz::ScratchFile file("valid.pt");
  absl::StatusOr<xmod::CheckpointInfo> saved = xmod::SaveCheckpoint(
      file.path(), *fixture.model, *fixture.muon, *fixture.adamw, fixture.state);
  if (!saved.ok()) std::abort();
  torch::serialize::InputArchive archive;
  archive.load_from(file.path());
  Entries entries;
  for (const std::string& key : archive.keys()) {
    torch::Tensor t;
    if (!archive.try_read(key, t)) std::abort();
    entries.emplace_back(key, t);
  }
  std::remove((file.path() + ".sha256").c_str());
  return entries;
}

torch::Tensor RandomTensor(FuzzedDataProvider& input) {
  static const torch::ScalarType kTypes[] = {torch::kFloat32, torch::kFloat64, torch::kInt64,
                                             torch::kInt32,   torch::kUInt8,   torch::kBool};
  const torch::ScalarType type =
      kTypes[input.ConsumeIntegralInRange<size_t>(0, std::size(kTypes) - 1)];
  std::vector<int64_t> shape(input.ConsumeIntegralInRange<int>(0, 3));
  for (int64_t& d : shape) d = input.ConsumeIntegralInRange<int64_t>(0, 5);
  const double value = input.ConsumeFloatingPoint<double>();
  return torch::full(shape, value, torch::TensorOptions().dtype(type));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static xmod::fuzz::CheckpointFixture* fixture = new xmod::fuzz::CheckpointFixture();
  static const Entries* valid = new Entries(ValidEntries(*fixture));
  static const xmod::fuzz::ScratchFile* file = new xmod::fuzz::ScratchFile("edited.pt");
  static const xmod::fuzz::ScratchFile* sidecar = new xmod::fuzz::ScratchFile("edited.pt.sha256");

  FuzzedDataProvider input(data, size);
  std::string bytes;
  // The harness's own archive building: a value or key torch refuses here (c10::Error, or
  // std::runtime_error for a value out of a dtype's range) is not a finding.
  try {
    torch::serialize::OutputArchive archive;
    for (const auto& [key, tensor] : *valid) {
      switch (input.ConsumeIntegralInRange<int>(0, 7)) {
        case 5:  // dropped
          break;
        case 6:  // another dtype, shape and value
          archive.write(key, RandomTensor(input));
          break;
        case 7:  // same shape, another dtype
          archive.write(key, tensor.to(input.ConsumeBool() ? torch::kInt64 : torch::kFloat32));
          break;
        default:  // kept (an exhausted input keeps everything)
          archive.write(key, tensor);
      }
    }
    for (int extra = 0; extra < 3 && input.ConsumeBool(); ++extra) {
      const std::string& near =
          (*valid)[input.ConsumeIntegralInRange<size_t>(0, valid->size() - 1)].first;
      archive.write(near + input.ConsumeRandomLengthString(8), RandomTensor(input));
    }
    std::ostringstream stream;
    archive.save_to(stream);
    bytes = std::move(stream).str();
  } catch (const std::exception&) {
    return 0;
  }
  file->Write(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  const std::string digest = absl::StrCat(xmod::Sha256Hex(bytes), "  edited.pt\n");
  sidecar->Write(reinterpret_cast<const uint8_t*>(digest.data()), digest.size());

  xmod::TrainState state;
  (void)xmod::LoadCheckpoint(file->path(), fixture->model.get(), fixture->muon.get(),
                             fixture->adamw.get(), &state);
  return 0;
}
