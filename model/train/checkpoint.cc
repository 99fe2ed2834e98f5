// Checkpoint archives: atomic write, checksum sidecar, verified restore.
#include "model/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"

namespace xmod {
namespace {

constexpr int64_t kFormatVersion = 1;
constexpr char kPrefix[] = "ckpt-";
constexpr char kSuffix[] = ".pt";
constexpr char kSpecKey[] = "spec/run";

torch::Tensor Int64(int64_t v) { return torch::tensor(v, torch::kInt64); }

std::string Basename(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Reads `key` into a fresh tensor; FAILED_PRECONDITION naming it when absent.
absl::StatusOr<torch::Tensor> Read(torch::serialize::InputArchive& archive,
                                   const std::string& key) {
  torch::Tensor t;
  if (!archive.try_read(key, t)) {
    return absl::FailedPreconditionError(absl::StrCat("checkpoint lacks ", key));
  }
  return t;
}

// Copies archive["model/<name>"] into each of `named`.
absl::Status ReadInto(torch::serialize::InputArchive& archive,
                      const torch::OrderedDict<std::string, torch::Tensor>& named) {
  torch::NoGradGuard no_grad;
  for (const auto& item : named) {
    absl::StatusOr<torch::Tensor> t = Read(archive, "model/" + item.key());
    if (!t.ok()) return t.status();
    if (t->sizes() != item.value().sizes()) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint tensor model/", item.key(), " has a shape unlike the model's"));
    }
    item.value().copy_(*t);
  }
  return absl::OkStatus();
}

}  // namespace

std::string CheckpointPath(const std::string& dir, int attempt, int64_t step) {
  return absl::StrFormat("%s/%sa%d-s%010d%s", dir, kPrefix, attempt, step, kSuffix);
}

absl::StatusOr<CheckpointInfo> SaveCheckpoint(const std::string& path, torch::nn::Module& model,
                                              const Muon& muon, const AdamW& adamw,
                                              const TrainState& state,
                                              const xmod::v1::RunSpec* spec) {
  torch::serialize::OutputArchive archive;
  archive.write("format", Int64(kFormatVersion));
  if (spec != nullptr) {
    std::string bytes = spec->SerializeAsString();
    archive.write(kSpecKey, torch::tensor(std::vector<uint8_t>(bytes.begin(), bytes.end()),
                                          torch::kUInt8));  // (bytes) the serialized RunSpec
  }
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    archive.write("model/" + item.key(), item.value().detach());
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    archive.write("model/" + item.key(), item.value());
  }
  muon.Save(archive, "muon");
  adamw.Save(archive, "adamw");
  archive.write("state/step", Int64(state.step));
  archive.write("state/tokens", Int64(state.tokens));
  archive.write("state/flops", torch::tensor(state.flops, torch::kFloat64));
  archive.write("data/epoch", Int64(state.data.epoch));
  archive.write("data/shard", Int64(state.data.shard));
  archive.write("data/offset", Int64(state.data.offset));
  {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    archive.write("rng/torch_cpu", generator.get_state());
  }

  std::ostringstream stream;
  archive.save_to(stream);
  const std::string bytes = std::move(stream).str();
  CheckpointInfo info;
  info.path = path;
  info.sha256 = Sha256Hex(bytes);
  info.bytes = static_cast<int64_t>(bytes.size());
  absl::Status status = WriteFileAtomic(path, bytes);
  if (!status.ok()) return status;
  status = WriteFileAtomic(path + ".sha256", absl::StrCat(info.sha256, "  ", Basename(path), "\n"));
  if (!status.ok()) {
    // No checkpoint without its digest: nothing of a failed save stays behind (a full disk
    // gets its space back, and no one is offered a file that cannot be verified).
    std::remove(path.c_str());
    return status;
  }
  return info;
}

namespace {

// A sidecar holds one digest line ("<64 hex>  <name>\n"); anything longer is not ours.
constexpr int64_t kMaxSidecarBytes = 4096;

// The digest that the sidecar of checkpoint `path` records. NOT_FOUND without a sidecar;
// DATA_LOSS for one that cannot be a sidecar (not a regular file, past kMaxSidecarBytes),
// as for a digest that does not match: the checkpoint cannot be trusted either way.
absl::StatusOr<std::string> SidecarDigest(const std::string& path) {
  absl::StatusOr<std::string> sidecar = ReadSmallFile(path + ".sha256", kMaxSidecarBytes);
  if (absl::IsOutOfRange(sidecar.status()) || absl::IsFailedPrecondition(sidecar.status())) {
    return absl::DataLossError(
        absl::StrCat(path, ": its sidecar is no digest line: ", sidecar.status().message()));
  }
  if (!sidecar.ok()) return sidecar.status();
  return sidecar->substr(0, sidecar->find_first_of(" \n"));
}

// Reads the file at `path` into `archive` after checking its sidecar, when present.
absl::Status OpenArchive(const std::string& path, torch::serialize::InputArchive* archive) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::string> expected = SidecarDigest(path);
  if (expected.ok()) {
    const std::string actual = Sha256Hex(*bytes);
    if (*expected != actual) {
      return absl::DataLossError(absl::StrCat(path, ": checksum mismatch: sidecar says ", *expected,
                                              ", file hashes to ", actual));
    }
  } else if (!absl::IsNotFound(expected.status())) {
    return expected.status();
  }

  try {
    std::istringstream stream(*std::move(bytes));
    archive->load_from(stream, torch::kCPU);
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a checkpoint: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {  // LibTorch's archive parser also throws runtime_error
    return absl::DataLossError(absl::StrCat(path, ": not a checkpoint: ", e.what()));
  }
  return absl::OkStatus();
}

// Checks the format version and that every model tensor of `archive` belongs to `model`,
// then copies them into it.
absl::Status ReadModel(const std::string& path, torch::serialize::InputArchive& archive,
                       torch::nn::Module* model) {
  absl::StatusOr<torch::Tensor> format = Read(archive, "format");
  if (!format.ok()) return format.status();
  if (format->item<int64_t>() != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": checkpoint format ", format->item<int64_t>(), ", expected ", kFormatVersion));
  }
  const auto params = model->named_parameters(/*recurse=*/true);
  const auto buffers = model->named_buffers(/*recurse=*/true);
  for (const std::string& key : archive.keys()) {
    if (!absl::StartsWith(key, "model/")) continue;
    const std::string name = key.substr(6);
    if (params.find(name) == nullptr && buffers.find(name) == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": checkpoint holds ", key, ", which the model lacks"));
    }
  }
  absl::Status status = ReadInto(archive, params);
  if (status.ok()) status = ReadInto(archive, buffers);
  if (!status.ok()) return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadCheckpoint(const std::string& path, torch::nn::Module* model, Muon* muon,
                            AdamW* adamw, TrainState* state) {
  torch::serialize::InputArchive archive;
  if (absl::Status s = OpenArchive(path, &archive); !s.ok()) return s;
  // A well-formed archive can still hold tensors of the wrong kind (a counter that is not
  // one number, a generator state of the wrong size): LibTorch throws then.
  try {
    absl::Status status = ReadModel(path, archive, model);
    if (status.ok()) status = muon->Load(archive, "muon");
    if (status.ok()) status = adamw->Load(archive, "adamw");
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));
    }

    TrainState loaded;
    const std::pair<const char*, int64_t*> counters[] = {{"state/step", &loaded.step},
                                                         {"state/tokens", &loaded.tokens},
                                                         {"data/epoch", &loaded.data.epoch},
                                                         {"data/shard", &loaded.data.shard},
                                                         {"data/offset", &loaded.data.offset}};
    for (const auto& [key, out] : counters) {
      absl::StatusOr<torch::Tensor> t = Read(archive, key);
      if (!t.ok()) return t.status();
      *out = t->item<int64_t>();
    }
    absl::StatusOr<torch::Tensor> flops = Read(archive, "state/flops");
    if (!flops.ok()) return flops.status();
    loaded.flops = flops->item<double>();
    absl::StatusOr<torch::Tensor> rng = Read(archive, "rng/torch_cpu");
    if (!rng.ok()) return rng.status();
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // a handle to the default
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(*rng);
    }
    *state = loaded;
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": malformed checkpoint: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": malformed checkpoint: ", e.what()));
  }
}

absl::Status VerifyCheckpointFile(const std::string& path, const std::string& expected_sha256,
                                  int64_t expected_bytes) {
  std::string expected = expected_sha256;
  const char* source = "the recorded digest";
  if (expected.empty()) {
    absl::StatusOr<std::string> sidecar = SidecarDigest(path);
    if (!sidecar.ok() && !absl::IsNotFound(sidecar.status())) return sidecar.status();
    if (!sidecar.ok()) {
      // A missing checkpoint is NOT_FOUND whether or not its sidecar is there.
      if (!std::filesystem::exists(path)) {
        return absl::NotFoundError(absl::StrCat(path, ": no such checkpoint"));
      }
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": no digest to verify against (none recorded, no sidecar)"));
    }
    expected = *std::move(sidecar);
    source = "the sidecar";
  }
  absl::StatusOr<std::string> actual = Sha256File(path, expected_bytes > 0 ? expected_bytes : -1);
  if (!actual.ok()) return actual.status();
  if (*actual != expected) {
    return absl::DataLossError(absl::StrCat(path, ": checksum mismatch: ", source, " says ",
                                            expected, ", file hashes to ", *actual));
  }
  return absl::OkStatus();
}

absl::StatusOr<xmod::v1::RunSpec> ReadCheckpointSpec(const std::string& path) {
  torch::serialize::InputArchive archive;
  if (absl::Status s = OpenArchive(path, &archive); !s.ok()) return s;
  torch::Tensor bytes;  // (bytes) uint8
  if (!archive.try_read(kSpecKey, bytes)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": the checkpoint holds no run spec (written by an older xmod-train)"));
  }
  xmod::v1::RunSpec spec;
  if (bytes.scalar_type() != torch::kUInt8 || bytes.dim() != 1 ||
      !spec.ParseFromArray(bytes.contiguous().data_ptr(), static_cast<int>(bytes.numel()))) {
    return absl::DataLossError(absl::StrCat(path, ": malformed ", kSpecKey));
  }
  return spec;
}

absl::Status LoadModelWeights(const std::string& path, torch::nn::Module* model) {
  torch::serialize::InputArchive archive;
  if (absl::Status s = OpenArchive(path, &archive); !s.ok()) return s;
  try {
    return ReadModel(path, archive, model);
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": malformed checkpoint: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": malformed checkpoint: ", e.what()));
  }
}

ResumeChoice ChooseResume(const std::vector<ResumeCandidate>& candidates) {
  ResumeChoice choice;
  for (const ResumeCandidate& candidate : candidates) {
    absl::Status status = VerifyCheckpointFile(candidate.path, candidate.sha256, candidate.bytes);
    if (status.ok()) {
      choice.chosen = candidate;
      break;
    }
    choice.rejected.push_back({candidate, std::move(status)});
  }
  return choice;
}

}  // namespace xmod
