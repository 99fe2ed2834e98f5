// xmod-fuzz-seeds OUT_DIR SPEC...: writes the seed corpora of the fuzz targets, one folder
// per target, from files of the repository and from inputs made here:
//   spec_text/        each SPEC (protobuf text format) as it is;
//   spec_json/        each SPEC printed as JSON, with proto and with JSON field names;
//   shard/            valid shards of 0, 1 and 300 tokens, one truncated, one with a bad magic;
//   checkpoint/       a valid checkpoint of CheckpointFixture after its sidecar line (the
//                     input checkpoint_fuzzer takes).
// checkpoint_archive_fuzzer needs no seed: its empty input loads the valid checkpoint.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/spec_file.h"
#include "common/files.h"
#include "data/shard.h"
#include "fuzz/checkpoint_fixture.h"
#include "google/protobuf/util/json_util.h"

namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "xmod-fuzz-seeds: %s\n", status.ToString().c_str());
  return 1;
}

absl::Status WriteSpecSeeds(const std::string& out, const std::vector<std::string>& specs) {
  for (const std::string& path : specs) {
    absl::StatusOr<std::string> text = xmod::ReadFile(path);
    if (!text.ok()) return text.status();
    absl::StatusOr<xmod::v1::SweepSpec> spec = xmod::cli::LoadSweepSpec(path);
    if (!spec.ok()) return spec.status();
    const std::string name = Basename(path);
    absl::Status status = xmod::WriteFileAtomic(absl::StrCat(out, "/spec_text/", name), *text);
    for (bool proto_names : {true, false}) {
      google::protobuf::util::JsonPrintOptions options;
      options.add_whitespace = proto_names;
      options.preserve_proto_field_names = proto_names;
      std::string json;
      if (!google::protobuf::util::MessageToJsonString(*spec, &json, options).ok()) {
        return absl::InternalError(absl::StrCat(path, ": cannot print as JSON"));
      }
      if (status.ok()) {
        status = xmod::WriteFileAtomic(
            absl::StrCat(out, "/spec_json/", name, proto_names ? ".proto" : ".camel", ".json"),
            json);
      }
    }
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status WriteShardSeeds(const std::string& out) {
  std::vector<uint16_t> tokens(300);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 2654435761u);
  const std::string dir = out + "/shard/";
  absl::Status status = xmod::WriteShard(dir + "empty.bin", {});
  if (status.ok()) status = xmod::WriteShard(dir + "one.bin", absl::MakeSpan(tokens).first(1));
  if (status.ok()) status = xmod::WriteShard(dir + "full.bin", tokens);
  if (!status.ok()) return status;
  absl::StatusOr<std::string> full = xmod::ReadFile(dir + "full.bin");
  if (!full.ok()) return full.status();
  status = xmod::WriteFileAtomic(dir + "truncated.bin", full->substr(0, full->size() - 3));
  std::string bad_magic = *full;
  bad_magic[0] ^= 0x5a;
  if (status.ok()) status = xmod::WriteFileAtomic(dir + "bad_magic.bin", bad_magic);
  return status;
}

absl::Status WriteCheckpointSeed(const std::string& out) {
  xmod::fuzz::CheckpointFixture fixture;
  const std::string path = out + "/checkpoint/ckpt.pt";
  absl::StatusOr<xmod::CheckpointInfo> saved =
      xmod::SaveCheckpoint(path, *fixture.model, *fixture.muon, *fixture.adamw, fixture.state);
  if (!saved.ok()) return saved.status();
  // checkpoint_fuzzer's input: the sidecar line, then the archive.
  absl::StatusOr<std::string> sidecar = xmod::ReadFile(path + ".sha256");
  absl::StatusOr<std::string> archive = xmod::ReadFile(path);
  if (!sidecar.ok()) return sidecar.status();
  if (!archive.ok()) return archive.status();
  std::remove((path + ".sha256").c_str());
  return xmod::WriteFileAtomic(path, *sidecar + *archive);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: xmod-fuzz-seeds OUT_DIR SPEC.textpb...\n");
    return 2;
  }
  const std::string out = argv[1];
  for (const char* sub : {"spec_text", "spec_json", "shard", "checkpoint"}) {
    absl::Status status = xmod::MakeDirs(absl::StrCat(out, "/", sub));
    if (!status.ok()) return Fail(status);
  }
  absl::Status status = WriteSpecSeeds(out, std::vector<std::string>(argv + 2, argv + argc));
  if (status.ok()) status = WriteShardSeeds(out);
  if (status.ok()) status = WriteCheckpointSeed(out);
  if (!status.ok()) return Fail(status);
  return 0;
}
