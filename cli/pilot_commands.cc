// xmodctl pilot select: the paper's B.3 pilot pick by measured loss (see commands.h; the
// rule is fitter/pilot_selection.h, answered by the coordinator's SelectPilot).
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/render.h"
#include "cli/report/pilot_figure.h"

namespace xmod::cli {
namespace {

using xmod::v1::PilotConfiguration;
using xmod::v1::PilotSelection;
using xmod::v1::SelectPilotResponse;

Cell LossCell(const PilotConfiguration& c) {
  return c.status() == xmod::v1::PILOT_MEASURED ? Cell::Shown(FormatLoss(c.val_loss()))
                                                : Cell::Null();
}

std::string StatusText(xmod::v1::PilotStatus status) {
  switch (status) {
    case xmod::v1::PILOT_MEASURED:
      return "measured";
    case xmod::v1::PILOT_PENDING:
      return "pending";
    case xmod::v1::PILOT_NO_RESULT:
      return "no result";
    default:
      return "?";
  }
}

// The selection's note: why there is no pick, or which pending candidates could change it.
std::string Note(const SelectPilotResponse& r, const PilotSelection& s) {
  if (s.pick_index() < 0) return s.reason();
  if (!s.provisional()) return "";
  std::vector<std::string> pending;
  for (int i : s.within_budget()) {
    if (r.configurations(i).status() == xmod::v1::PILOT_PENDING) {
      pending.push_back(r.configurations(i).label());
    }
  }
  return absl::StrCat("provisional: ", absl::StrJoin(pending, ", "), " not finished");
}

Table SelectionsTable(const SelectPilotResponse& r) {
  Table t;
  t.title = absl::StrCat(
      "X-MoD pick per MoE of pilot sweep ", r.sweep_id(),
      " (B.3: lowest measured loss at the MoE's N_act, K, L and C with N <= the MoE's N)");
  t.columns = {"moe", "k", "n", "loss", "baseline", "pick", "pick_n", "pick_loss", "note"};
  for (const PilotSelection& s : r.selections()) {
    const PilotConfiguration& moe = r.configurations(s.moe_index());
    std::vector<Cell> row = {Cell::Str(moe.label()), Cell::Int(moe.k()),
                             Cell::Shown(FormatParams(moe.total_params())), LossCell(moe),
                             Cell::Bool(s.baseline())};
    if (s.pick_index() >= 0) {
      const PilotConfiguration& pick = r.configurations(s.pick_index());
      row.insert(row.end(), {Cell::Str(pick.label()),
                             Cell::Shown(FormatParams(pick.total_params())), LossCell(pick)});
    } else {
      row.insert(row.end(), {Cell::Null(), Cell::Null(), Cell::Null()});
    }
    row.push_back(Cell::Str(Note(r, s)));
    t.AddRow(std::move(row));
  }
  return t;
}

// Fig. 4's marks: "baseline" on a selected MoE, "pick for MoE 8:64 (baseline)" on an X-MoD.
std::map<int, std::string> Marks(const SelectPilotResponse& r) {
  std::map<int, std::string> marks;
  for (const PilotSelection& s : r.selections()) {
    if (s.baseline()) marks[s.moe_index()] = "baseline";
    if (s.pick_index() < 0) continue;
    std::string& mark = marks[s.pick_index()];
    absl::StrAppend(&mark, mark.empty() ? "pick for " : ", ",
                    r.configurations(s.moe_index()).label(), s.baseline() ? " (baseline)" : "");
  }
  return marks;
}

Table ConfigurationsTable(const SelectPilotResponse& r) {
  Table t;
  t.title =
      "Configurations (Fig. 4) by K and total parameters; loss: mean final validation "
      "loss of the succeeded seeds";
  t.columns = {"backbone", "l", "c", "k", "config", "n", "loss", "seeds", "status", "selected"};
  const std::map<int, std::string> marks = Marks(r);
  for (int i = 0; i < r.configurations_size(); ++i) {
    const PilotConfiguration& c = r.configurations(i);
    const auto mark = marks.find(i);
    t.AddRow({Cell::Str(c.backbone()), Cell::Int(c.seq_len()),
              Cell::Shown(FormatFlops(c.flop_budget())), Cell::Int(c.k()), Cell::Str(c.label()),
              Cell::Shown(FormatParams(c.total_params())), LossCell(c),
              Cell::Str(absl::StrCat(c.runs_succeeded(), "/", c.runs())),
              Cell::Str(StatusText(c.status())),
              mark == marks.end() ? Cell::Null() : Cell::Str(mark->second)});
  }
  if (r.other_runs() > 0) {
    t.title += absl::StrCat("; ", r.other_runs(), " runs of other architectures not compared");
  }
  return t;
}

}  // namespace

absl::Status PilotSelect(const Context& ctx, const PilotSelectOptions& options) {
  xmod::v1::SelectPilotRequest request;
  request.set_sweep_id(options.sweep_id);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto pilot = client->Call(&xmod::v1::Coordinator::Stub::SelectPilot, request);
  if (!pilot.ok()) return pilot.status();
  if (ctx.format == OutputFormat::kJson) {
    if (absl::Status s = PrintJson(*ctx.out, *pilot); !s.ok()) return s;
  } else {
    *ctx.out << RenderSections({SelectionsTable(*pilot), ConfigurationsTable(*pilot)}, ctx.format);
  }
  if (options.figure_dir.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> written =
      report::WritePilotFigure(*pilot, options.figure_dir);
  if (!written.ok()) {
    return absl::Status(written.status().code(), absl::StrCat("--figure_dir ", options.figure_dir,
                                                              ": ", written.status().message()));
  }
  if (ctx.format == OutputFormat::kTable) {
    for (const std::string& path : *written) *ctx.out << "wrote " << path << "\n";
  }
  return absl::OkStatus();
}

}  // namespace xmod::cli
