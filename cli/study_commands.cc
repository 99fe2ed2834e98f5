// xmodctl study create | list | show: studies, one scaling-law fit over several sweeps, each
// in a role of the paper's B.4 design (see commands.h; the coordinator's studies.h).
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/render.h"
#include "cli/spec_file.h"

namespace xmod::cli {
namespace {

using xmod::v1::Coordinator;

// "ROLE=SWEEP": SWEEP is a sweep id when it is a positive integer, else a sweep name.
absl::StatusOr<xmod::v1::StudyMember> ParseMember(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--member: '", text, "' is not ROLE=SWEEP (e.g. kxl=3 or kxl=paper-b4-kxl)"));
  }
  xmod::v1::StudyMember member;
  member.set_role(text.substr(0, eq));
  const std::string sweep = text.substr(eq + 1);
  int64_t id = 0;
  if (absl::SimpleAtoi(sweep, &id) && id > 0) {
    member.set_sweep_id(id);
  } else {
    member.set_sweep_name(sweep);
  }
  return member;
}

// The fit settings the coordinator resolved (StudySpec: seed, bootstrap_samples) and where
// each came from: this command (a flag or the file) or the member sweeps' fit plans.
Table FitSettingsTable(const xmod::v1::StudySpec& asked, const xmod::v1::Study& study) {
  Table t;
  t.title = "Fit settings of the study";
  t.columns = {"setting", "value", "from"};
  const auto from = [](bool given) {
    return Cell::Str(given ? "given" : "the member sweeps' fit plans");
  };
  t.AddRow({Cell::Str("seed"), Cell::Int(static_cast<int64_t>(study.spec().seed())),
            from(asked.has_seed())});
  t.AddRow({Cell::Str("bootstrap_samples"), Cell::Int(study.spec().bootstrap_samples()),
            from(asked.has_bootstrap_samples())});
  return t;
}

// The request of `study create`: the file's StudySpec (if any) with the flags applied.
absl::StatusOr<xmod::v1::CreateStudyRequest> StudyCreateRequest(const Context& ctx,
                                                                const StudyCreateOptions& options) {
  xmod::v1::CreateStudyRequest request;
  request.set_dry_run(options.dry_run);
  xmod::v1::StudySpec& spec = *request.mutable_spec();
  if (!options.file.empty()) {
    xmod::v1::StudySpec loaded;
    if (absl::Status s = LoadSpec(options.file, ctx.in, &loaded); !s.ok()) return s;
    spec = std::move(loaded);
  }
  if (!options.name.empty()) spec.set_name(options.name);
  if (!options.description.empty()) spec.set_description(options.description);
  for (const std::string& text : options.members) {
    absl::StatusOr<xmod::v1::StudyMember> member = ParseMember(text);
    if (!member.ok()) return member.status();
    *spec.add_members() = *std::move(member);
  }
  if (options.seed >= 0) spec.set_seed(static_cast<uint64_t>(options.seed));
  if (options.bootstrap_samples >= 0) spec.set_bootstrap_samples(options.bootstrap_samples);
  if (spec.name().empty()) {
    return absl::InvalidArgumentError("NAME: give the study a name (or a name in the file)");
  }
  return request;
}

// The title of the members table of `study create` (table format).
std::string CreatedStudyTitle(bool dry_run, const xmod::v1::Study& study) {
  return absl::StrCat(dry_run ? "Dry run: study" : absl::StrCat("Created study ", study.id()),
                      " (\"", study.spec().name(), "\") over ", study.spec().members_size(),
                      " sweeps: ", study.in_range_observations(), " in-range X-MoD observations (",
                      study.listed_observations(), " listed, each configuration counted once); ",
                      study.shared_runs(), dry_run ? " runs would be" : " runs",
                      " trained by an earlier member",
                      dry_run ? " (nothing stored)" : " in their place (cancelled)");
}

}  // namespace

absl::Status StudyCreate(const Context& ctx, const StudyCreateOptions& options) {
  absl::StatusOr<xmod::v1::CreateStudyRequest> request = StudyCreateRequest(ctx, options);
  if (!request.ok()) return request.status();
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto study = client->Call(&Coordinator::Stub::CreateStudy, *request);
  if (!study.ok()) return study.status();
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(*ctx.out, *study);
  }
  Table members = StudyMembersTable(*study);
  if (ctx.format == OutputFormat::kTable) {
    members.title = CreatedStudyTitle(options.dry_run, *study);
  }
  *ctx.out << RenderSections({members, FitSettingsTable(request->spec(), *study)}, ctx.format);
  return absl::OkStatus();
}

absl::Status StudyList(const Context& ctx) {
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::ListStudies, xmod::v1::ListStudiesRequest());
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(*ctx.out, *response);
  }
  *ctx.out << Render(StudiesTable({response->studies().begin(), response->studies().end()}),
                     ctx.format);
  return absl::OkStatus();
}

absl::Status StudyShow(const Context& ctx, const std::string& name) {
  xmod::v1::GetStudyRequest request;
  request.set_name(name);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto study = client->Call(&Coordinator::Stub::GetStudy, request);
  if (!study.ok()) return study.status();
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(*ctx.out, *study);
  }
  *ctx.out << RenderSections({StudySummaryTable(*study), StudyMembersTable(*study)}, ctx.format);
  return absl::OkStatus();
}

}  // namespace xmod::cli
