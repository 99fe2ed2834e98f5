// Routing record of a forward pass and the diagnostics of paper B.7 / Table 10 computed from
// it: coverage per sparse interval, consecutive-layer Jaccard, update-count histogram and
// threshold / top-k mask agreement, with Table 10's two reference selection schemes. The
// trainer turns RoutingDiagnostics into the metrics route/coverage, route/jaccard,
// route/agreement, route/agreement_topk_pass, route/agreement_passes, route/updates_<n> and
// route/{coverage,jaccard}_{identical,random}.
//
// Definitions (B.7):
//  - coverage: fraction of a sequence's tokens selected at least once in an interval,
//    averaged over sequence-interval observations;
//  - Jaccard: |S_l ∩ S_l+1| / |S_l ∪ S_l+1| of adjacent layers' selected sets, averaged over
//    pairs with a non-empty union within each sequence-interval observation, then over the
//    observations with a defined mean;
//  - update counts: for each token-interval observation, how many layers of the interval
//    selected the token; the histogram pools these observations (fractions, 0..T_max);
//  - agreement: share of token-layer positions where the top-k and threshold masks computed
//    from the same scores agree (jointly selected or jointly skipped). `agreement` reads the
//    threshold-driven pass; `agreement_topk_pass` reads a separate top-k-driven pass, which
//    is how the paper measures Table 10's agreement column (C.4: "separate top-k-driven
//    forward passes ... from the same routing scores");
//  - agreement_passes: share of token-layer positions where a top-k-driven pass and a
//    threshold-driven pass over the same batch made the same decision. Each pass propagates
//    its own hidden states, so after the first differing decision the scores diverge: this
//    compares the two routing trajectories, which the paper's agreement does not.
// Only complete intervals (as long as the longest one) enter coverage, Jaccard and update
// counts, as B.7 does for A4K8 whose first interval is shortened; agreement uses all layers.
//
// Reference schemes (C.4), for selection fraction p = 1/K and interval length n (the
// complete intervals' length): "repeated identical subset" (every layer of an interval
// selects the same p-fraction: coverage p, Jaccard 1, n updates for a fraction p of the
// tokens and 0 for the rest) and "independent random subsets" (each layer an independent
// uniform p-fraction: coverage 1 - (1 - p)^n, Jaccard p / (2 - p) = 1 / (2K - 1), the
// large-sequence approximation, updates Binomial(n, p)).
// Legend: B = batch, T = tokens. Thread-compatible.
#ifndef XMOD_MODEL_ROUTING_DIAGNOSTICS_H_
#define XMOD_MODEL_ROUTING_DIAGNOSTICS_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace xmod {

// Per-forward routing record, filled when a trace is passed (evaluation diagnostics, B.7).
struct RoutingTrace {
  // One entry per routed layer, in order: (B, T) bool masks of selected tokens, and for the
  // threshold/top-k agreement, both masks computed from the same scores.
  std::vector<torch::Tensor> selected;        // (B, T) bool, the mask actually used
  std::vector<torch::Tensor> topk_mask;       // (B, T) bool
  std::vector<torch::Tensor> threshold_mask;  // (B, T) bool
  std::vector<int> interval;                  // sparse interval index of each entry
  std::vector<torch::Tensor> bias;            // (B, T) float, the b the layer routed with
};

// A reference selection scheme of Table 10 at one (K, n).
struct ReferenceScheme {
  double coverage = 0;
  double jaccard = 0;
  std::vector<double> updates;  // updates[m]: fraction of tokens updated m times, m = 0..n
};

// The analytical references for selection fraction p = 1/K over intervals of n layers.
// Requires K >= 1, n >= 1.
ReferenceScheme IdenticalSubsetReference(int k, int n);
ReferenceScheme RandomSubsetsReference(int k, int n);

struct RoutingDiagnostics {
  double coverage = 0;   // mean fraction of tokens selected at least once per interval
  double jaccard = 0;    // mean consecutive-layer Jaccard index
  double agreement = 0;  // fraction of matching top-k / threshold decisions, threshold pass
  double agreement_topk_pass = 0;  // the same in top-k-driven passes (Table 10's column)
  double agreement_passes = 0;     // top-k-driven vs threshold-driven pass decisions
  // updates[n]: fraction of token-interval observations updated n times, n = 0..T_max.
  std::vector<double> updates;
  int64_t observations = 0;  // sequence-interval observations behind coverage / updates
  int interval_length = 0;   // layers of the complete intervals (n of the references)
};

// Accumulates traces of many evaluation batches; Result() averages as B.7 prescribes.
class RoutingDiagnosticsAccumulator {
 public:
  // A threshold-driven pass: coverage, Jaccard, updates and `agreement`.
  void Add(const RoutingTrace& trace);
  // A top-k-driven pass over the batch `threshold_pass` came from (same routed layers):
  // `agreement_topk_pass` from its own masks, `agreement_passes` against the other pass.
  void AddTopKPass(const RoutingTrace& topk_pass, const RoutingTrace& threshold_pass);
  RoutingDiagnostics Result() const;

 private:
  double coverage_sum_ = 0;
  int64_t coverage_n_ = 0;
  double jaccard_sum_ = 0;
  int64_t jaccard_n_ = 0;
  int64_t agree_ = 0;
  int64_t decisions_ = 0;
  int64_t agree_topk_pass_ = 0;
  int64_t decisions_topk_pass_ = 0;
  int64_t agree_passes_ = 0;
  int64_t decisions_passes_ = 0;
  std::vector<int64_t> update_counts_;  // index n: token-interval observations with n updates
  int interval_length_ = 0;
};

// Diagnostics of a single trace.
RoutingDiagnostics ComputeRoutingDiagnostics(const RoutingTrace& trace);

}  // namespace xmod

#endif  // XMOD_MODEL_ROUTING_DIAGNOSTICS_H_
