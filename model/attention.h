// Grouped-query causal self-attention with RoPE (paper B.1: GQA, Table 4). Two kernels, the
// same mathematics: fused (options.fused, the default of training.attention "auto") and
// batched matrix products with a boolean mask and softmax ("manual", the reference the fused
// kernel is tested against). Fused is, for plain causal attention on the CPU, xmod's own
// tiled kernel (model/cpu/flash_attention.h; its bfloat16 AMX variant under bf16 autocast,
// float32 copies where the processor has no AMX; kernel_choice.h decides), and otherwise
// (CUDA, masks, head widths it does not take) at::scaled_dot_product_attention's kernels — on
// a GPU, for plain causal attention, the backend measured fastest for the shape
// (attention_backend.h).
//
// Three call shapes serve every layer kind of the paper:
//  - dense: all T tokens, positions 0..T-1, plain causal mask;
//  - routed (X-MoD / MoD sparse layer): the k selected tokens only, rotated at their original
//    positions, causal by original position, padded entries (threshold rule) masked as keys;
//  - selected-Q / full-KV control (Table 7): queries of the selected tokens, keys and values
//    of all T tokens, key j visible to query i iff pos_j <= pos_i.
// The routed layer keeps its selected tokens in sequence order, so causal attention among
// them is an ordinary causal mask over k tokens and takes the fused causal kernel too.
// The q, k, v projections run as one matrix product with the stacked weights.
// Efficiency of the matmul kernel: the G key/value heads are never copied to H heads — the R = H/G
// query heads of a group are stacked along the row dimension and share one (B, G, R*Tq, Tk)
// product; plain causal attention skips the key blocks above the diagonal, query chunk by query
// chunk. Legend: B = batch, T/Tq/Tk = tokens, D = d_model, H = query heads, G = key/value heads, R
// = H/G, E = head_dim. Thread-compatible.
#ifndef XMOD_MODEL_ATTENTION_H_
#define XMOD_MODEL_ATTENTION_H_

#include <torch/torch.h>

#include "model/rms_norm.h"
#include "model/rope.h"

namespace xmod {

struct AttentionOptions {
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t query_chunk = 256;  // most rows per block of the causal block-skipping product
  bool fused = false;         // at::scaled_dot_product_attention; false = the matmul kernel
  // Qwen3's QK-Norm: every query and key head RMS-normalised over head_dim, with a gain of
  // its own, before RoPE (Backbone::qk_norm; docs/paper-fidelity.md, "Backbones follow
  // Qwen3").
  bool qk_norm = false;
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const AttentionOptions& options);

  // Causal self-attention among the rows of h: (B, T, D) -> (B, T, D).
  // positions: (B, T) int64 original positions, increasing along T for the valid rows, or
  // undefined for 0..T-1. key_valid: (B, T) bool, false for padding rows, which no valid
  // query sees (each row always sees itself, so no softmax row is empty); undefined = all.
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& positions,
                        const torch::Tensor& key_valid, const Rope& rope);

  // Selected queries over the full sequence: hq (B, Tq, D) at positions pos_q (B, Tq) attend
  // to hkv (B, T, D) at 0..T-1 causally by position. Returns (B, Tq, D).
  torch::Tensor ForwardFullKv(const torch::Tensor& hq, const torch::Tensor& pos_q,
                              const torch::Tensor& hkv, const Rope& rope);

  torch::nn::Linear wq{nullptr}, wk{nullptr}, wv{nullptr}, wo{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // (E) gains; only with options.qk_norm

 private:
  // With options.qk_norm, q (B, T, H, E) and k (B, T, G, E) normalised per head (QK-Norm),
  // in their own dtype; otherwise unchanged.
  void NormalizeQk(torch::Tensor* q, torch::Tensor* k);

  // The projections of x: (..., D) by `linears` as one matrix product with their stacked
  // weights (the parameters stay separate, as checkpoints name them): fewer, larger products,
  // and one dx in backward instead of a sum of several. Returns (..., out_i) views, in order.
  static std::vector<torch::Tensor> Project(const torch::Tensor& x,
                                            const std::vector<torch::nn::Linear>& linears);

  // q: (B, Tq, H, E) already rotated and scaled; k, v: (B, Tk, G, E). blocked: (B, Tq, Tk)
  // bool, true where attention is not allowed; undefined means plain causal (Tq == Tk, row
  // i sees keys 0..i). Returns (B, Tq, H*E).
  torch::Tensor Attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& blocked) const;

  AttentionOptions options_;
};
TORCH_MODULE(Attention);

}  // namespace xmod

#endif  // XMOD_MODEL_ATTENTION_H_
