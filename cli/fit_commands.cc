// xmodctl fit show | predict | recommend: the scaling-law fit (paper Eq. 14) the coordinator
// keeps per sweep and per study, and its predictions and (K*, A*) recommendation (paper
// §3.1, B.3).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/commands.h"
#include "cli/render.h"

namespace xmod::cli {
namespace {

using xmod::v1::Coordinator;

// Exactly one of a sweep id and a study name.
absl::Status CheckSubject(int64_t sweep_id, const std::string& study) {
  if (sweep_id != 0 && !study.empty()) {
    return absl::InvalidArgumentError("--study: give a sweep id or --study NAME, not both");
  }
  if (sweep_id == 0 && study.empty()) {
    return absl::InvalidArgumentError("SWEEP: give a sweep id or --study NAME");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FitShow(const Context& ctx, int64_t sweep_id, const std::string& study) {
  if (absl::Status s = CheckSubject(sweep_id, study); !s.ok()) return s;
  xmod::v1::GetFitRequest request;
  request.set_sweep_id(sweep_id);
  request.set_study(study);
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto fit = client->Call(&Coordinator::Stub::GetFit, request);
  if (!fit.ok()) return fit.status();
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(*ctx.out, *fit);
  }
  *ctx.out << RenderSections({FitSummaryTable(*fit), FitParamsTable(*fit), FitCvTable(*fit)},
                             ctx.format);
  return absl::OkStatus();
}

absl::Status FitPredict(const Context& ctx, const PredictOptions& options) {
  if (absl::Status s = CheckSubject(options.sweep_id, options.study); !s.ok()) return s;
  if (options.flops.empty()) return absl::InvalidArgumentError("--C: give a training-FLOP budget");
  if (options.seq_lens.empty()) return absl::InvalidArgumentError("--L: give a context length");
  if (options.backbone.empty()) return absl::InvalidArgumentError("--backbone: give a backbone");
  if (options.ks.empty()) return absl::InvalidArgumentError("--K: give at least one K");
  std::vector<double> as = options.as.empty() ? std::vector<double>{1.0} : options.as;
  xmod::v1::PredictRequest request;
  request.set_sweep_id(options.sweep_id);
  request.set_study(options.study);
  for (double c : options.flops) {
    for (int l : options.seq_lens) {
      for (int k : options.ks) {
        for (double a : as) {
          auto* p = request.add_points();
          p->set_flops(c);
          p->set_seq_len(l);
          p->set_backbone(options.backbone);
          p->set_k(k);
          p->set_a(a);
        }
      }
    }
  }
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::Predict, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) return PrintJson(*ctx.out, *response);
  *ctx.out << Render(
      PredictionsTable({response->predictions().begin(), response->predictions().end()}),
      ctx.format);
  return absl::OkStatus();
}

absl::Status FitRecommend(const Context& ctx, const RecommendOptions& options) {
  if (absl::Status s = CheckSubject(options.sweep_id, options.study); !s.ok()) return s;
  if (!(options.flops > 0)) return absl::InvalidArgumentError("--C: must be > 0");
  if (options.seq_len <= 0) return absl::InvalidArgumentError("--L: must be > 0");
  if (options.backbone.empty()) return absl::InvalidArgumentError("--backbone: give a backbone");
  xmod::v1::RecommendRequest request;
  request.set_sweep_id(options.sweep_id);
  request.set_study(options.study);
  request.set_flops(options.flops);
  request.set_seq_len(options.seq_len);
  request.set_backbone(options.backbone);
  for (int k : options.ks) request.add_ks(k);
  for (double a : options.as) request.add_as(a);
  if (!options.max_params.empty()) {
    auto cap = ParseCount(options.max_params);
    if (!cap.ok())
      return absl::InvalidArgumentError(absl::StrCat("--max_params: ", cap.status().message()));
    request.set_max_total_params(*cap);
  }
  absl::StatusOr<CoordinatorClient> client = CoordinatorClient::Connect(ctx.client);
  if (!client.ok()) return client.status();
  auto response = client->Call(&Coordinator::Stub::Recommend, request);
  if (!response.ok()) return response.status();
  if (ctx.format == OutputFormat::kJson) {
    return PrintJson(*ctx.out, *response);
  }
  Table best;
  best.title = "Recommendation";
  // khat_A3: Appendix A.3's closed-form K̂ at A = 1, beside the grid's K as a cross-check.
  best.columns = {"K", "A", "delta", "total_params", "khat_A3"};
  best.AddRow({Cell::Int(response->k()), Cell::Num(response->a()),
               Cell::Shown(absl::StrFormat("%+.4f", response->delta())),
               Cell::Shown(FormatParams(response->total_params())),
               Cell::Shown(absl::StrFormat("%.2f", response->closed_form_k()))});
  std::vector<xmod::v1::Prediction> top(response->candidates().begin(),
                                        response->candidates().end());
  if (options.top >= 0 && static_cast<int>(top.size()) > options.top) top.resize(options.top);
  Table candidates = PredictionsTable(top);
  candidates.title =
      absl::StrCat("Best ", top.size(), " of ", response->candidates_size(), " candidates");
  *ctx.out << RenderSections({best, candidates}, ctx.format);
  return absl::OkStatus();
}

}  // namespace xmod::cli
