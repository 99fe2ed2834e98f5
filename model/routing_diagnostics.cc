// Routing diagnostics (paper B.7, Table 10): see routing_diagnostics.h.
#include "model/routing_diagnostics.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace xmod {
namespace {

// Adds the matching positions of `a` and `b` (lists of (B, T) bool masks, layer by layer)
// to `agree` and all positions to `decisions`.
void CountAgreement(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b,
                    int64_t* agree, int64_t* decisions) {
  TORCH_CHECK(a.size() == b.size(), "agreement of ", a.size(), " and ", b.size(), " layers");
  for (size_t l = 0; l < a.size(); ++l) {
    torch::Tensor same = a[l].eq(b[l]);  // (B, T)
    *agree += same.sum().item<int64_t>();
    *decisions += same.numel();
  }
}

}  // namespace

ReferenceScheme IdenticalSubsetReference(int k, int n) {
  const double p = 1.0 / k;
  ReferenceScheme out;
  out.coverage = p;
  out.jaccard = 1.0;
  out.updates.assign(n + 1, 0.0);
  out.updates[0] = 1.0 - p;
  out.updates[n] += p;
  return out;
}

ReferenceScheme RandomSubsetsReference(int k, int n) {
  const double p = 1.0 / k;
  ReferenceScheme out;
  out.coverage = 1.0 - std::pow(1.0 - p, n);
  out.jaccard = p / (2.0 - p);
  for (int m = 0; m <= n; ++m) {  // Binomial(n, p)
    const double log_choose =
        std::lgamma(n + 1.0) - std::lgamma(m + 1.0) - std::lgamma(n - m + 1.0);
    out.updates.push_back(std::exp(log_choose) * std::pow(p, m) * std::pow(1.0 - p, n - m));
  }
  return out;
}

void RoutingDiagnosticsAccumulator::AddTopKPass(const RoutingTrace& topk_pass,
                                                const RoutingTrace& threshold_pass) {
  torch::NoGradGuard no_grad;
  CountAgreement(topk_pass.topk_mask, topk_pass.threshold_mask, &agree_topk_pass_,
                 &decisions_topk_pass_);
  CountAgreement(topk_pass.selected, threshold_pass.selected, &agree_passes_, &decisions_passes_);
}

void RoutingDiagnosticsAccumulator::Add(const RoutingTrace& trace) {
  torch::NoGradGuard no_grad;
  // Agreement over every token-layer position.
  CountAgreement(trace.topk_mask, trace.threshold_mask, &agree_, &decisions_);
  // Group the layers by interval, in order.
  std::map<int, std::vector<torch::Tensor>> intervals;
  for (size_t l = 0; l < trace.selected.size(); ++l) {
    intervals[trace.interval[l]].push_back(trace.selected[l].to(torch::kCPU));
  }
  size_t longest = 0;
  for (const auto& [id, layers] : intervals) longest = std::max(longest, layers.size());
  interval_length_ = std::max(interval_length_, static_cast<int>(longest));
  if (update_counts_.size() < longest + 1) update_counts_.resize(longest + 1, 0);

  for (const auto& [id, layers] : intervals) {
    if (layers.size() != longest) continue;                 // incomplete interval
    torch::Tensor masks = torch::stack(layers, /*dim=*/0);  // (Tn, B, T) bool
    const int64_t batch = masks.size(1);
    torch::Tensor counts = masks.to(torch::kLong).sum(/*dim=*/0);  // (B, T)
    // Coverage per sequence.
    torch::Tensor covered = counts.gt(0).to(torch::kDouble).mean(/*dim=*/1);  // (B)
    coverage_sum_ += covered.sum().item<double>();
    coverage_n_ += batch;
    // Update-count histogram, pooled over tokens.
    torch::Tensor hist = torch::bincount(counts.reshape({-1}), {}, longest + 1);
    for (size_t n = 0; n <= longest; ++n) update_counts_[n] += hist[n].item<int64_t>();
    // Consecutive-layer Jaccard per sequence.
    if (masks.size(0) >= 2) {
      torch::Tensor a = masks.narrow(0, 0, masks.size(0) - 1);
      torch::Tensor b = masks.narrow(0, 1, masks.size(0) - 1);
      torch::Tensor inter = (a & b).to(torch::kDouble).sum(/*dim=*/2);  // (Tn-1, B)
      torch::Tensor uni = (a | b).to(torch::kDouble).sum(/*dim=*/2);    // (Tn-1, B)
      torch::Tensor defined = uni.gt(0);
      torch::Tensor ratio = torch::where(defined, inter / uni.clamp_min(1), torch::zeros_like(uni));
      torch::Tensor pairs = defined.to(torch::kDouble).sum(/*dim=*/0);    // (B)
      torch::Tensor per_seq = ratio.sum(/*dim=*/0) / pairs.clamp_min(1);  // (B)
      torch::Tensor has = pairs.gt(0);
      jaccard_sum_ += per_seq.masked_select(has).sum().item<double>();
      jaccard_n_ += has.sum().item<int64_t>();
    }
  }
}

RoutingDiagnostics RoutingDiagnosticsAccumulator::Result() const {
  RoutingDiagnostics out;
  out.coverage = coverage_n_ > 0 ? coverage_sum_ / coverage_n_ : 0.0;
  out.jaccard = jaccard_n_ > 0 ? jaccard_sum_ / jaccard_n_ : 0.0;
  auto share = [](int64_t agree, int64_t decisions) {
    return decisions > 0 ? static_cast<double>(agree) / decisions : 0.0;
  };
  out.agreement = share(agree_, decisions_);
  out.agreement_topk_pass = share(agree_topk_pass_, decisions_topk_pass_);
  out.agreement_passes = share(agree_passes_, decisions_passes_);
  out.observations = coverage_n_;
  out.interval_length = interval_length_;
  int64_t total = 0;
  for (int64_t c : update_counts_) total += c;
  for (int64_t c : update_counts_) {
    out.updates.push_back(total > 0 ? static_cast<double>(c) / total : 0.0);
  }
  return out;
}

RoutingDiagnostics ComputeRoutingDiagnostics(const RoutingTrace& trace) {
  RoutingDiagnosticsAccumulator accumulator;
  accumulator.Add(trace);
  return accumulator.Result();
}

}  // namespace xmod
