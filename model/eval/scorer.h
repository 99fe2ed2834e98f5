// Scorer: log-likelihoods of continuations after contexts under a Transformer in evaluation
// mode with the causal threshold rule (RoutingMode::kThreshold, paper §4.1, B.7) — the
// zero-shot evaluation's one model computation.
//
// Each request is the token sequence context ++ continuation. When it is longer than
// max_len + 1 tokens it is cut from the left (the context's start goes first; should the
// continuation alone exceed max_len tokens, only its last max_len tokens are scored). The
// model reads all but the last token; the continuation's tokens are scored at the positions
// before them. Requests are batched longest first, right-padded with token 0: the model is
// causal (causal attention, a per-token routing rule), so padding after a sequence changes
// nothing before it.
// Legend: B = batch, T = padded length, V = vocabulary. Thread-compatible; LibTorch errors
// are returned as INTERNAL.
#ifndef XMOD_MODEL_EVAL_SCORER_H_
#define XMOD_MODEL_EVAL_SCORER_H_

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/transformer.h"

namespace xmod {

struct ScoreRequest {
  std::vector<int64_t> context;       // token ids, at least one
  std::vector<int64_t> continuation;  // token ids, at least one
};

struct ContinuationScore {
  double loglik = 0;    // sum over the scored tokens of log p(token | everything before), nats
  bool greedy = false;  // every scored token is the argmax of its distribution
  int64_t tokens = 0;   // tokens scored (the continuation's, unless cut)
};

class Scorer {
 public:
  // `model` on `device`, built for sequences of `max_len` tokens; `batch_size` requests per
  // forward pass.
  Scorer(Transformer model, int64_t max_len, torch::Device device, int64_t batch_size);

  // One score per request, in order. INVALID_ARGUMENT naming the request whose context or
  // continuation is empty; INTERNAL on a LibTorch error.
  absl::StatusOr<std::vector<ContinuationScore>> Score(const std::vector<ScoreRequest>& requests);

 private:
  Transformer model_;
  int64_t max_len_;
  torch::Device device_;
  int64_t batch_size_;
};

}  // namespace xmod

#endif  // XMOD_MODEL_EVAL_SCORER_H_
