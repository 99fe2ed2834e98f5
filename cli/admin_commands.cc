// xmodctl admin backup FILE: an online backup of the coordinator's database (the Backup RPC;
// an admin credential), streamed into FILE — written beside it, its size and SHA-256 checked
// against what the coordinator announced, fsynced, then renamed to FILE, so FILE is the whole
// checked backup or absent (docs/operations.md, "Backup").
#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/render.h"
#include "common/files.h"

namespace xmod::cli {
namespace {

using xmod::v1::Coordinator;

// Receives the stream into `writer`: the announced BackupInfo, once every byte arrived.
absl::StatusOr<xmod::v1::BackupInfo> Receive(CoordinatorClient& client, AtomicFileWriter& writer) {
  auto context = client.NewContext(/*with_deadline=*/false);  // as long as the copy takes
  auto stream = client.stub().Backup(context.get(), xmod::v1::BackupRequest());
  xmod::v1::BackupChunk chunk;
  xmod::v1::BackupInfo info;
  bool announced = false;
  int64_t received = 0;
  while (stream->Read(&chunk)) {
    if (!announced) {
      info = chunk.info();
      announced = true;
      continue;
    }
    if (absl::Status s = writer.Append(chunk.data()); !s.ok()) return s;
    received += static_cast<int64_t>(chunk.data().size());
  }
  const grpc::Status status = stream->Finish();
  if (!status.ok()) return client.Error(status, context.get());
  if (!announced || received != info.bytes()) {
    return absl::DataLossError(absl::StrCat("the backup ended after ", received, " of ",
                                            info.bytes(), " bytes; nothing was written"));
  }
  return info;
}

}  // namespace

absl::Status AdminBackup(const Context& ctx, const std::string& file) {
  struct stat st;
  if (::stat(file.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(file, " exists; name a new file"));
  }
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  absl::StatusOr<std::unique_ptr<AtomicFileWriter>> writer = AtomicFileWriter::Open(file);
  if (!writer.ok()) return writer.status();
  absl::StatusOr<xmod::v1::BackupInfo> info = Receive(*client, **writer);
  if (!info.ok()) return info.status();
  absl::StatusOr<std::string> sha256 = Sha256File((*writer)->temp_path(), info->bytes());
  if (!sha256.ok()) return sha256.status();
  if (*sha256 != info->sha256()) {
    return absl::DataLossError(absl::StrCat("the backup's SHA-256 is ", *sha256,
                                            ", the coordinator's ", info->sha256(),
                                            "; nothing was written"));
  }
  if (absl::Status s = (*writer)->Commit(); !s.ok()) return s;
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *info);
  Table table;
  table.title = absl::StrCat("Backup written to ", file, " (integrity_check: ok)");
  table.columns = {"bytes", "sha256", "schema version", "taken"};
  table.AddRow({Cell::Int(info->bytes()), Cell::Str(info->sha256()),
                Cell::Int(info->schema_version()),
                Cell::Str(FormatUnixMs(info->created_unix_ms()))});
  *ctx.out << Render(table, ctx.format);
  return absl::OkStatus();
}

}  // namespace xmod::cli
