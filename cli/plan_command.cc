// xmodctl plan: the layer plan, parameters and FLOPs of a model, computed offline with the
// accounting library (paper Table 6 accounting; no coordinator needed) into the Plan RPC's
// PlanResponse, which -o json prints and the table shows. Errors from the
// accounting name a ModelSpec field; they are reported under the flag that set it.
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/render.h"
#include "common/field_path.h"
#include "model/accounting/plan_response.h"

namespace xmod::cli {
namespace {

absl::StatusOr<xmod::v1::Architecture> ParseArch(const std::string& text) {
  std::string upper = absl::AsciiStrToUpper(text);
  if (upper == "X-MOD") upper = "XMOD";
  xmod::v1::Architecture arch;
  if (xmod::v1::Architecture_Parse(upper, &arch) && arch != xmod::v1::ARCHITECTURE_UNSPECIFIED) {
    return arch;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--arch: unknown architecture \"", text,
                   "\" (dense, mod, xmod, moe, routed_ffn or selected_q_full_kv)"));
}

// "k: K must be >= 1" -> "--K: K must be >= 1".
absl::Status ForFlags(const absl::Status& status) {
  const std::string field = FieldPathOf(status).value_or("");
  std::string flag;
  if (field == "k") {
    flag = "--K";
  } else if (field == "a") {
    flag = "--A";
  } else if (field == "n0") {
    flag = "--n0";
  } else if (field == "seq_len") {
    flag = "--L";
  } else if (field == "arch") {
    flag = "--arch";
  } else if (field == "moe.expert_dim") {
    flag = "--expert_dim";
  } else if (absl::StartsWith(field, "moe.")) {
    flag = "--experts";
  } else if (absl::StartsWith(field, "backbone.")) {
    flag = "--backbone";
  }
  if (flag.empty()) return status;
  return absl::Status(status.code(),
                      absl::StrCat(flag, " (", field, ")", status.message().substr(field.size())));
}

}  // namespace

absl::Status Plan(const Context& ctx, const PlanOptions& options) {
  auto arch = ParseArch(options.arch);
  if (!arch.ok()) return arch.status();
  xmod::v1::ModelSpec model;
  model.set_arch(*arch);
  model.mutable_backbone()->set_name(options.backbone);
  model.set_k(options.k);
  model.set_a(options.a);
  if (options.n0 >= 0) model.set_n0(options.n0);
  if (*arch == xmod::v1::MOE) {
    if (options.experts.empty()) {
      return absl::InvalidArgumentError("--experts: arch moe needs experts such as 6:64+2");
    }
    absl::Status parsed = ParseExperts(options.experts, model.mutable_moe());
    if (!parsed.ok())
      return absl::InvalidArgumentError(absl::StrCat("--experts: ", parsed.message()));
    model.mutable_moe()->set_expert_dim(options.expert_dim);
  } else if (!options.experts.empty() || options.expert_dim != 0) {
    return absl::InvalidArgumentError("--experts/--expert_dim: only for --arch moe");
  }
  // The Plan RPC's message, computed here offline by the same function.
  absl::StatusOr<xmod::v1::PlanResponse> plan = PlanModel(model, options.seq_len);
  if (!plan.ok()) return ForFlags(plan.status());
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *plan);

  const xmod::v1::PlanResponse& p = *plan;
  Table t;
  t.title =
      absl::StrCat("Plan: ", ArchName(*arch), " on ", p.backbone().name(), " at L = ", p.seq_len());
  t.columns = {"field", "value"};
  auto row = [&](const char* name, Cell value) { t.AddRow({Cell::Str(name), std::move(value)}); };
  row("backbone", Cell::Str(p.backbone().name()));
  row("arch", Cell::Str(ArchName(*arch)));
  if (*arch != xmod::v1::DENSE && *arch != xmod::v1::MOE) {
    row("K", Cell::Int(options.k));
    if (*arch != xmod::v1::MOD) row("A", Cell::Num(options.a));
    row("n0", Cell::Int(p.n0()));
  }
  if (*arch == xmod::v1::MOE) row("experts", Cell::Str(options.experts));
  row("L", Cell::Int(p.seq_len()));
  row("layers", Cell::Int(p.layers()));
  row("dense_layers", Cell::Int(p.dense_layers()));
  row("sparse_layers", Cell::Int(p.sparse_layers()));
  row("layer_plan", Cell::Str(p.layer_plan()));
  row("per_layer_params", Cell::Shown(FormatParams(p.per_layer_params())));
  row("total_params", Cell::Shown(FormatParams(p.total_params())));
  row("active_params", Cell::Shown(FormatParams(p.active_params())));
  row("embedding_params", Cell::Shown(FormatParams(p.embedding_params())));
  row("forward_flops_per_token", Cell::Shown(FormatFlops(p.forward_flops_per_token())));
  row("train_flops_per_token", Cell::Shown(FormatFlops(p.train_flops_per_token())));
  row("phi_over_phi_dense", Cell::Shown(absl::StrFormat("%.4f", p.phi_over_phi_dense())));
  *ctx.out << Render(t, ctx.format);
  return absl::OkStatus();
}

}  // namespace xmod::cli
