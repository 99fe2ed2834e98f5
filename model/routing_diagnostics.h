// Routing record of a forward pass and the diagnostics of paper B.7 / Table 10 computed from
// it: coverage per sparse interval, consecutive-layer Jaccard, update-count histogram and
// threshold / top-k mask agreement. The trainer turns RoutingDiagnostics into the metrics
// route/coverage, route/jaccard, route/agreement and route/updates_<n>.
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
//    from the same scores agree (jointly selected or jointly skipped).
// Only complete intervals (as long as the longest one) enter coverage, Jaccard and update
// counts, as B.7 does for A4K8 whose first interval is shortened; agreement uses all layers.
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

struct RoutingDiagnostics {
  double coverage = 0;   // mean fraction of tokens selected at least once per interval
  double jaccard = 0;    // mean consecutive-layer Jaccard index
  double agreement = 0;  // fraction of matching top-k / threshold decisions
  // updates[n]: fraction of token-interval observations updated n times, n = 0..T_max.
  std::vector<double> updates;
  int64_t observations = 0;  // sequence-interval observations behind coverage / updates
};

// Accumulates traces of many evaluation batches; Result() averages as B.7 prescribes.
class RoutingDiagnosticsAccumulator {
 public:
  void Add(const RoutingTrace& trace);
  RoutingDiagnostics Result() const;

 private:
  double coverage_sum_ = 0;
  int64_t coverage_n_ = 0;
  double jaccard_sum_ = 0;
  int64_t jaccard_n_ = 0;
  int64_t agree_ = 0;
  int64_t decisions_ = 0;
  std::vector<int64_t> update_counts_;  // index n: token-interval observations with n updates
};

// Diagnostics of a single trace.
RoutingDiagnostics ComputeRoutingDiagnostics(const RoutingTrace& trace);

}  // namespace xmod

#endif  // XMOD_MODEL_ROUTING_DIAGNOSTICS_H_
