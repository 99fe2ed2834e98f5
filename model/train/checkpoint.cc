// Checkpoint archives: atomic write, checksum sidecar, verified restore.
#include "model/train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"

namespace xmod {
namespace {

constexpr int64_t kFormatVersion = 1;
constexpr char kPrefix[] = "ckpt-";
constexpr char kSuffix[] = ".pt";

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

std::string CheckpointPath(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/%s%010d%s", dir, kPrefix, step, kSuffix);
}

absl::StatusOr<CheckpointInfo> SaveCheckpoint(const std::string& path, torch::nn::Module& model,
                                              const Muon& muon, const AdamW& adamw,
                                              const TrainState& state) {
  torch::serialize::OutputArchive archive;
  archive.write("format", Int64(kFormatVersion));
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
  if (!status.ok()) return status;
  return info;
}

absl::Status LoadCheckpoint(const std::string& path, torch::nn::Module* model, Muon* muon,
                            AdamW* adamw, TrainState* state) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::string> sidecar = ReadFile(path + ".sha256");
  if (sidecar.ok()) {
    const std::string expected = sidecar->substr(0, sidecar->find_first_of(" \n"));
    const std::string actual = Sha256Hex(*bytes);
    if (expected != actual) {
      return absl::DataLossError(absl::StrCat(path, ": checksum mismatch: sidecar says ", expected,
                                              ", file hashes to ", actual));
    }
  } else if (!absl::IsNotFound(sidecar.status())) {
    return sidecar.status();
  }

  torch::serialize::InputArchive archive;
  try {
    std::istringstream stream(*std::move(bytes));
    archive.load_from(stream, torch::kCPU);
  } catch (const c10::Error& e) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a checkpoint: ", e.what_without_backtrace()));
  }
  absl::StatusOr<torch::Tensor> format = Read(archive, "format");
  if (!format.ok()) return format.status();
  if (format->item<int64_t>() != kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": checkpoint format ", format->item<int64_t>(), ", expected ", kFormatVersion));
  }
  // Every model tensor in the archive must belong to the model.
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
  if (status.ok()) status = muon->Load(archive, "muon");
  if (status.ok()) status = adamw->Load(archive, "adamw");
  if (!status.ok()) return absl::Status(status.code(), absl::StrCat(path, ": ", status.message()));

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
}

absl::Status PruneCheckpoints(const std::string& dir, int64_t current_step, int keep) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return absl::NotFoundError(absl::StrCat(dir, ": cannot list"));
  std::vector<std::pair<int64_t, std::string>> found;
  while (dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (!absl::StartsWith(name, kPrefix) || !absl::EndsWith(name, kSuffix)) continue;
    int64_t step;
    const std::string digits = name.substr(
        sizeof(kPrefix) - 1, name.size() - (sizeof(kPrefix) - 1) - (sizeof(kSuffix) - 1));
    if (absl::SimpleAtoi(digits, &step)) found.emplace_back(step, dir + "/" + name);
  }
  ::closedir(d);
  std::sort(found.begin(), found.end());
  size_t kept = 0;
  for (auto it = found.rbegin(); it != found.rend(); ++it) {
    if (it->first <= current_step && kept < static_cast<size_t>(keep)) {
      ++kept;
      continue;
    }
    std::remove(it->second.c_str());
    std::remove((it->second + ".sha256").c_str());
  }
  return absl::OkStatus();
}

}  // namespace xmod
