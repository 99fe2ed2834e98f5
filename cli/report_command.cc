// xmodctl report: the paper's Figure 2-style plots of the latest fit of a sweep or study,
// with report.md, written to a directory (cli/report/report.h draws and writes them).
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/report/report.h"

namespace xmod::cli {

absl::Status Report(const Context& ctx, const ReportOptions& options) {
  if ((options.sweep_id != 0) == !options.study.empty()) {
    return absl::InvalidArgumentError("--study: give a sweep id or --study NAME, not both");
  }
  if (options.output.empty()) return absl::InvalidArgumentError("--output: give a directory");
  xmod::v1::GetFitRequest request;
  request.set_sweep_id(options.sweep_id);
  request.set_study(options.study);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto fit = client->Call(&xmod::v1::Coordinator::Stub::GetFit, request);
  if (!fit.ok()) return fit.status();
  const std::string title = options.study.empty()
                                ? absl::StrCat("Scaling-law fit of sweep ", options.sweep_id)
                                : absl::StrCat("Scaling-law fit of study ", options.study);
  absl::StatusOr<report::ReportFiles> files = report::WriteReport(*fit, title, options.output);
  if (!files.ok()) {
    return absl::Status(files.status().code(),
                        absl::StrCat("--output ", options.output, ": ", files.status().message()));
  }
  for (const std::string& path : files->written) *ctx.out << "wrote " << path << "\n";
  for (const std::string& why : files->skipped) *ctx.out << "skipped " << why << "\n";
  return absl::OkStatus();
}

}  // namespace xmod::cli
