// xmodctl fit propose: the next runs that tell most about the targets' (K*, A*) per training
// FLOP (docs/adaptive-design.md), optionally queued; and the tables of a stored design
// decision that `sweep show` prints for adaptive sweeps.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/render.h"

namespace xmod::cli {
namespace {

using xmod::v1::Coordinator;

Cell DeltaCell(double delta) { return Cell::Shown(absl::StrFormat("%+.4f", delta)); }

std::string TargetText(const xmod::v1::DesignTarget& t) {
  return absl::StrCat("C=", FormatFlops(t.flops()), " L=", t.seq_len(), " ", t.backbone());
}

}  // namespace

absl::StatusOr<xmod::v1::DesignTarget> ParseDesignTarget(absl::string_view text) {
  const std::vector<std::string> parts = absl::StrSplit(text, ':');
  xmod::v1::DesignTarget target;
  double flops = 0;
  int seq_len = 0;
  if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &flops) || !(flops > 0) ||
      !absl::SimpleAtoi(parts[1], &seq_len) || seq_len <= 0 || parts[2].empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--target: '", text, "' is not C:L:BACKBONE (e.g. 5e11:256:cpu-d96)"));
  }
  target.set_flops(flops);
  target.set_seq_len(seq_len);
  target.set_backbone(parts[2]);
  return target;
}

std::vector<Table> DecisionTables(const xmod::v1::DesignDecision& d) {
  Table summary;
  summary.title = absl::StrCat("Design decision ", d.id(), " (", d.source(), ")");
  summary.columns = {"field", "value"};
  summary.AddRow({Cell::Str("made"), Cell::Str(FormatUnixMs(d.created_unix_ms()))});
  if (!d.study().empty()) summary.AddRow({Cell::Str("fit of study"), Cell::Str(d.study())});
  summary.AddRow({Cell::Str("fit observations"), Cell::Int(d.observations())});
  summary.AddRow(
      {Cell::Str("compute spent"),
       Cell::Shown(d.compute_budget() > 0 ? absl::StrCat(FormatFlops(d.compute_spent()), " of ",
                                                         FormatFlops(d.compute_budget()))
                                          : FormatFlops(d.compute_spent()))});
  summary.AddRow({Cell::Str("stop"), Cell::Bool(d.stop())});
  if (!d.stop_reason().empty()) {
    summary.AddRow({Cell::Str("why"), Cell::Str(d.stop_reason())});
  }
  if (!d.held_back().empty()) {
    summary.AddRow({Cell::Str("held back"), Cell::Str(d.held_back())});
  }
  Table recommendations;
  recommendations.title = "Recommendation per target";
  recommendations.columns = {"target", "K", "A", "delta", "p_best"};
  for (const xmod::v1::TargetRecommendation& r : d.recommendations()) {
    recommendations.AddRow({Cell::Str(TargetText(r.target())), Cell::Int(r.k()), Cell::Num(r.a()),
                            DeltaCell(r.delta()), Cell::Shown(FormatPercent(r.p_best()))});
  }
  Table proposals;
  proposals.title = "Proposals, best first";
  proposals.columns = {"rank",  "backbone", "L",     "K",      "A",  "C",
                       "dense", "cost",     "score", "reason", "run"};
  int rank = 0;
  for (const xmod::v1::Proposal& p : d.proposals()) {
    proposals.AddRow({Cell::Int(++rank), Cell::Str(p.backbone()), Cell::Int(p.seq_len()),
                      Cell::Int(p.k()), Cell::Num(p.a()), Cell::Shown(FormatFlops(p.flops())),
                      Cell::Bool(p.needs_dense()), Cell::Shown(FormatFlops(p.cost_flops())),
                      Cell::Shown(absl::StrFormat("%.3g", p.score())), Cell::Str(p.reason()),
                      p.run_id() > 0 ? Cell::Int(p.run_id()) : Cell::Null()});
  }
  return {summary, recommendations, proposals};
}

absl::Status FitPropose(const Context& ctx, const ProposeOptions& options) {
  if (options.sweep_id <= 0) return absl::InvalidArgumentError("SWEEP: give a sweep id");
  xmod::v1::ProposeRunsRequest request;
  request.set_sweep_id(options.sweep_id);
  request.set_study(options.study);
  for (const std::string& text : options.targets) {
    absl::StatusOr<xmod::v1::DesignTarget> target = ParseDesignTarget(text);
    if (!target.ok()) return target.status();
    *request.add_targets() = *target;
  }
  if (!options.compute_left.empty()) {
    absl::StatusOr<double> left = ParseCount(options.compute_left);
    if (!left.ok() || !(*left > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--compute_left: '", options.compute_left, "' is not a FLOP count > 0"));
    }
    request.set_compute_left(*left);
  }
  if (options.count < 0) return absl::InvalidArgumentError("--count: must be >= 0");
  request.set_count(options.count);
  request.set_bootstrap_samples(options.bootstrap_samples);
  request.set_seed(options.seed);
  request.set_submit(options.submit);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto decision = client->Call(&Coordinator::Stub::ProposeRuns, request);
  if (!decision.ok()) return decision.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *decision);
  *ctx.out << RenderSections(DecisionTables(*decision), ctx.format);
  return absl::OkStatus();
}

}  // namespace xmod::cli
