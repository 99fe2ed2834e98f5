// Causal grouped-query attention on the CPU in tiles that stay in the core's caches
// (FlashAttention-2: online softmax forward, recomputed probabilities backward), for the plain
// causal call of attention.h (dense layers, and the routed layer's selected tokens in top-k
// training). ATen's CPU flash kernel spends most of its time outside the products at small
// head widths: blocks of 256 x 512 scores (causal skipping at that granularity computes 5/8 of
// the square, not 1/2), several passes over each block, and GEMM calls whose depth is E = 32.
// Here 64 x 64 tiles skip every tile above the diagonal, each tile's products run as
// register-blocked outer products in float32/float64 (model/cpu/flash_attention_isa.cc), or as
// AMX tiles for bfloat16 operands (flash_attention_bf16_isa.cc, bf16 autocast's kernel), and
// the softmax works on the tile while it is in L1; key/value heads are read in place, never
// repeated per query head, and the output is written in the (B, T, H, E) layout the output
// projection reads.
// Legend: B batch, T tokens, H query heads, G key/value heads (query head h reads kv head
// h / (H / G)), E head_dim. Thread-compatible (no state but the variant table).
#ifndef XMOD_MODEL_CPU_FLASH_ATTENTION_H_
#define XMOD_MODEL_CPU_FLASH_ATTENTION_H_

#include <torch/torch.h>

#include <tuple>
#include <utility>

namespace xmod::cpu {

// True when q (B, T, H, E), k and v (B, T, G, E) can take this kernel: CPU tensors of one
// dtype, float or double (products in registers), or bfloat16 where
// FlashAttentionHasBf16Products() (products in AMX tiles: bf16 autocast's); each head's E
// values contiguous and heads E apart (token rows any stride apart, as in a view of a fused
// q/k/v product), G dividing H, and E a multiple of the float vector width in use.
bool FlashAttentionSupports(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// True when this processor runs bfloat16 calls (oneDNN's brgemm packs bfloat16 for AMX tiles
// here, the AVX512 kernels are in use and AVX512-BF16's conversions exist).
bool FlashAttentionHasBf16Products();

// softmax(scale q k^T + causal mask) v: query i sees keys 0..i. -> {out (B, T, H, E)
// contiguous in q's dtype, lse (B, H, T) the log-sum-exp of each query's scaled scores (float32
// for bfloat16 operands), for the backward}. In bfloat16 the products take bfloat16 operands
// (P rounded so too) with float32 sums, and the softmax runs in float32, as FlashAttention's
// bf16 kernels do on GPUs.
std::pair<torch::Tensor, torch::Tensor> FlashAttentionForward(const torch::Tensor& q,
                                                              const torch::Tensor& k,
                                                              const torch::Tensor& v, double scale);

// The gradients for the incoming dout (B, T, H, E), from the forward's out and lse:
// with P = exp(scale q k^T - lse) and delta_i = dout_i . out_i,
//   dv = P^T dout,  dS = P * (dout v^T - delta),  dq = scale dS k,  dk = scale dS^T q.
// -> {dq (B, T, H, E), dk (B, T, G, E), dv (B, T, G, E)}, contiguous.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> FlashAttentionBackward(
    const torch::Tensor& dout, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& out, const torch::Tensor& lse, double scale);

namespace internal {

// The operands' geometry: element strides of the batch and token dimensions of each (B, T,
// heads, E) operand, whose heads lie E apart and whose E values are contiguous.
struct FlashGeometry {
  int64_t b = 0, t = 0, h = 0, g = 0, e = 0;
  int64_t q_batch = 0, q_row = 0, k_batch = 0, k_row = 0, v_batch = 0, v_row = 0;
  int64_t dout_batch = 0, dout_row = 0;  // backward only
  double scale = 1;
};

// One instruction set's loops. out and dq are contiguous (B, T, H, E), dk and dv contiguous
// (B, T, G, E), lse (B, H, T); the backward writes every entry of dq, dk, dv.
struct FlashAttentionTable {
  const char* isa;
  int64_t float_width, double_width;  // at::vec::Vectorized lanes
  void (*forward_f)(const FlashGeometry& s, const float* q, const float* k, const float* v,
                    float* out, float* lse);
  void (*forward_d)(const FlashGeometry& s, const double* q, const double* k, const double* v,
                    double* out, double* lse);
  void (*backward_f)(const FlashGeometry& s, const float* q, const float* k, const float* v,
                     const float* out, const float* dout, const float* lse, float* dq, float* dk,
                     float* dv);
  void (*backward_d)(const FlashGeometry& s, const double* q, const double* k, const double* v,
                     const double* out, const double* dout, const double* lse, double* dq,
                     double* dk, double* dv);
  // bfloat16 operands, float32 lse; products in AMX tiles through oneDNN's brgemm. Null in the
  // variants that do not build them.
  void (*forward_bf16)(const FlashGeometry& s, const c10::BFloat16* q, const c10::BFloat16* k,
                       const c10::BFloat16* v, c10::BFloat16* out, float* lse);
  void (*backward_bf16)(const FlashGeometry& s, const c10::BFloat16* q, const c10::BFloat16* k,
                        const c10::BFloat16* v, const c10::BFloat16* out, const c10::BFloat16* dout,
                        const float* lse, c10::BFloat16* dq, c10::BFloat16* dk, c10::BFloat16* dv);
};

}  // namespace internal
}  // namespace xmod::cpu

#endif  // XMOD_MODEL_CPU_FLASH_ATTENTION_H_
