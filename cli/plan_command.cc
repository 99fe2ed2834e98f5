// xmodctl plan: the layer plan, parameters and FLOPs of a model, computed offline with the
// accounting library (paper Table 6 accounting; no coordinator needed). Errors from the
// accounting name a ModelSpec field; they are reported under the flag that set it.
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/render.h"
#include "model/accounting/accounting.h"
#include "model/accounting/plan_json.h"

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
  std::string message(status.message());
  size_t colon = message.find(": ");
  std::string field = colon == std::string::npos ? "" : message.substr(0, colon);
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
  return absl::Status(status.code(), absl::StrCat(flag, " (", field, ")", message.substr(colon)));
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
  if (ctx.format == OutputFormat::kJson) {
    auto json = PlanJson(model, options.seq_len);
    if (!json.ok()) return ForFlags(json.status());
    *ctx.out << *json << "\n";
    return absl::OkStatus();
  }
  auto acc = Account(model, options.seq_len);
  if (!acc.ok()) return ForFlags(acc.status());
  xmod::v1::ModelSpec dense;
  dense.set_arch(xmod::v1::DENSE);
  *dense.mutable_backbone() = model.backbone();
  auto reference = Account(dense, options.seq_len);
  if (!reference.ok()) return ForFlags(reference.status());

  Table t;
  t.title = absl::StrCat("Plan: ", ArchName(*arch), " on ", acc->backbone.name,
                         " at L = ", options.seq_len);
  t.columns = {"field", "value"};
  auto row = [&](const char* name, Cell value) { t.AddRow({Cell::Str(name), std::move(value)}); };
  row("backbone", Cell::Str(acc->backbone.name));
  row("arch", Cell::Str(ArchName(*arch)));
  if (*arch != xmod::v1::DENSE && *arch != xmod::v1::MOE) {
    row("K", Cell::Int(options.k));
    if (*arch != xmod::v1::MOD) row("A", Cell::Num(options.a));
    row("n0", Cell::Int(acc->plan.n0));
  }
  if (*arch == xmod::v1::MOE) row("experts", Cell::Str(options.experts));
  row("L", Cell::Int(options.seq_len));
  row("layers", Cell::Int(acc->layers));
  row("dense_layers", Cell::Int(acc->dense_layers));
  row("sparse_layers", Cell::Int(acc->sparse_layers));
  row("layer_plan", Cell::Str(acc->plan.notation));
  row("per_layer_params", Cell::Num(acc->per_layer_params, FormatParams(acc->per_layer_params)));
  row("total_params", Cell::Num(acc->total_params, FormatParams(acc->total_params)));
  row("active_params", Cell::Num(acc->active_params, FormatParams(acc->active_params)));
  row("embedding_params", Cell::Num(acc->embedding_params, FormatParams(acc->embedding_params)));
  row("forward_flops_per_token",
      Cell::Num(acc->forward_flops_per_token, FormatFlops(acc->forward_flops_per_token)));
  row("train_flops_per_token",
      Cell::Num(acc->train_flops_per_token, FormatFlops(acc->train_flops_per_token)));
  double phi = reference->forward_flops_per_token > 0
                   ? acc->forward_flops_per_token / reference->forward_flops_per_token
                   : 0;
  row("phi_over_phi_dense", Cell::Num(phi, absl::StrFormat("%.4f", phi)));
  *ctx.out << Render(t, ctx.format);
  return absl::OkStatus();
}

}  // namespace xmod::cli
