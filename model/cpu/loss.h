// The next-token cross-entropy of transformer.h (NextTokenLoss) on the CPU in two passes over
// the logits, where the composite formula makes six: log_softmax in float32 (after a float32
// copy of bfloat16 logits), a gather, and in backward exp, a scatter, a scale and a cast, each
// into a fresh (N, V) float32 tensor whose pages the kernel faults in anew every step. Here the
// forward keeps one log-sum-exp per row, and the backward writes softmax - onehot directly in
// the logits' dtype. It saves the logits themselves for the backward (bfloat16 under autocast)
// rather than an (N, V) float32 log_softmax.
// Legend: N rows (tokens), V the vocabulary. Thread-compatible (no state but the variant table).
#ifndef XMOD_MODEL_CPU_LOSS_H_
#define XMOD_MODEL_CPU_LOSS_H_

#include <torch/torch.h>

#include <utility>

namespace xmod::cpu {

// True when logits (N, V) are contiguous CPU float, double or bfloat16 and targets (N) int64.
bool NextTokenLossSupports(const torch::Tensor& logits, const torch::Tensor& targets);

// loss = mean over rows of lse_n - logits[n, targets[n]], with lse_n = log sum_v exp(logits[n,
// v]). -> {loss () and lse (N), float32 (double for double logits)}. A target outside [0, V)
// is an error that names it.
std::pair<torch::Tensor, torch::Tensor> NextTokenLossForward(const torch::Tensor& logits,
                                                             const torch::Tensor& targets);

// d loss / d logits for the incoming scalar grad: (exp(logits - lse) - onehot(targets)) *
// grad / N, (N, V) in the logits' dtype (computed in float32 for bfloat16, rounded once).
torch::Tensor NextTokenLossBackward(const torch::Tensor& grad, const torch::Tensor& logits,
                                    const torch::Tensor& targets, const torch::Tensor& lse);

namespace internal {

// One instruction set's loops. row_loss (N) in double: the entry point sums it in order, so the
// loss does not depend on how rows were split among threads.
struct LossTable {
  const char* isa;
  void (*forward_f)(const float* logits, const int64_t* targets, int64_t n, int64_t v, float* lse,
                    double* row_loss);
  void (*forward_d)(const double* logits, const int64_t* targets, int64_t n, int64_t v, double* lse,
                    double* row_loss);
  void (*forward_bf16)(const c10::BFloat16* logits, const int64_t* targets, int64_t n, int64_t v,
                       float* lse, double* row_loss);
  void (*backward_f)(const float* logits, const int64_t* targets, const float* lse, double scale,
                     int64_t n, int64_t v, float* dlogits);
  void (*backward_d)(const double* logits, const int64_t* targets, const double* lse, double scale,
                     int64_t n, int64_t v, double* dlogits);
  void (*backward_bf16)(const c10::BFloat16* logits, const int64_t* targets, const float* lse,
                        double scale, int64_t n, int64_t v, c10::BFloat16* dlogits);
};

}  // namespace internal
}  // namespace xmod::cpu

#endif  // XMOD_MODEL_CPU_LOSS_H_
