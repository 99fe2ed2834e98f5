// xmodctl report: the paper's Figure 2-style plots of the latest fit of a sweep or study,
// with report.md, written to a directory (cli/report/report.h draws and writes them); for a
// pilot sweep (SelectPilot answers) also its Fig. 4-style pilot figure
// (cli/report/pilot_figure.h), alone when the sweep has no fit (B.3's pilot cannot be fitted).
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/report/pilot_figure.h"
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
  std::optional<xmod::v1::SelectPilotResponse> pilot;
  if (options.study.empty()) {
    xmod::v1::SelectPilotRequest select;
    select.set_sweep_id(options.sweep_id);
    auto answer = client->Call(&xmod::v1::Coordinator::Stub::SelectPilot, select);
    if (answer.ok()) pilot = *std::move(answer);  // otherwise not a pilot (or not yet)
  }
  if (!fit.ok() && !pilot.has_value()) return fit.status();
  const auto unwritable = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("--output ", options.output, ": ", s.message()));
  };
  report::ReportFiles files;
  if (fit.ok()) {
    const std::string title = options.study.empty()
                                  ? absl::StrCat("Scaling-law fit of sweep ", options.sweep_id)
                                  : absl::StrCat("Scaling-law fit of study ", options.study);
    absl::StatusOr<report::ReportFiles> written = report::WriteReport(*fit, title, options.output);
    if (!written.ok()) return unwritable(written.status());
    files = *std::move(written);
  } else {
    files.skipped.push_back(
        absl::StrCat("report.md and the fit's figures: ", fit.status().message()));
  }
  if (pilot.has_value()) {
    absl::StatusOr<std::vector<std::string>> written =
        report::WritePilotFigure(*pilot, options.output);
    if (!written.ok()) return unwritable(written.status());
    files.written.insert(files.written.end(), written->begin(), written->end());
  }
  for (const std::string& path : files.written) *ctx.out << "wrote " << path << "\n";
  for (const std::string& why : files.skipped) *ctx.out << "skipped " << why << "\n";
  return absl::OkStatus();
}

}  // namespace xmod::cli
