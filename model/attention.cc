// Grouped-query causal attention: see attention.h.
#include "model/attention.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <limits>
#include <optional>

#include "model/attention_backend.h"
#include "model/cpu/flash_attention.h"
#include "model/kernel_choice.h"

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Plain causal attention on CPU as one autograd node over model/cpu/flash_attention.h: saves
// q, k, v, the output and its log-sum-exp, and recomputes the probabilities tile by tile in
// backward. q (B, T, H, E) already scaled; k, v (B, T, G, E). Returns (B, T, H, E).
class CausalFlashAttentionFunction
    : public torch::autograd::Function<CausalFlashAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* actx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v) {
    auto [out, lse] = cpu::FlashAttentionForward(q, k, v, /*scale=*/1.0);
    actx->save_for_backward({q, k, v, out, lse});
    return out;
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    auto [dq, dk, dv] = cpu::FlashAttentionBackward(grads[0], saved[0], saved[1], saved[2],
                                                    saved[3], saved[4], /*scale=*/1.0);
    return {dq, dk, dv};
  }
};

// Queries (B, Tq, H, E) -> (B, G, R, Tq, E) so that query head h = g*R + r uses kv head g.
torch::Tensor GroupQueries(const torch::Tensor& q, int64_t groups) {
  const int64_t b = q.size(0), t = q.size(1), h = q.size(2), e = q.size(3);
  return q.view({b, t, groups, h / groups, e}).permute({0, 2, 3, 1, 4});
}

// Additive mask (0 where allowed, -inf where blocked) from a boolean "blocked" mask.
torch::Tensor AdditiveMask(const torch::Tensor& blocked, const torch::TensorOptions& options) {
  return torch::zeros(blocked.sizes(), options)
      .masked_fill_(blocked, -std::numeric_limits<float>::infinity());
}

// Softmax attention of grouped queries q5 (B, G, R, Tq, E) over k, v (B, G, Tk, E).
// mask: additive, either (R*Tq, Tk) shared by the batch or (B, Tq, Tk). The mask is the
// `input` of one baddbmm, so masking costs no pass of its own and nothing in backward.
// Returns (B, G, R, Tq, E).
torch::Tensor GroupedSoftmaxAttention(const torch::Tensor& q5, const torch::Tensor& k,
                                      const torch::Tensor& v, const torch::Tensor& mask) {
  const int64_t b = q5.size(0), g = q5.size(1), r = q5.size(2), tq = q5.size(3), e = q5.size(4),
                tk = k.size(2);
  torch::Tensor q = q5.reshape({b * g, r * tq, e});              // (B*G, R*Tq, E)
  torch::Tensor kt = k.reshape({b * g, tk, e}).transpose(1, 2);  // (B*G, E, Tk)
  torch::Tensor bias;                                            // (B*G, R*Tq, Tk)
  if (mask.dim() == 2) {
    bias = mask.expand({b * g, r * tq, tk});  // a view: no copy
  } else {
    bias = mask.view({b, 1, 1, tq, tk}).expand({b, g, r, tq, tk}).reshape({b * g, r * tq, tk});
  }
  torch::Tensor probs = torch::softmax(torch::baddbmm(bias, q, kt), /*dim=*/-1);
  return torch::bmm(probs, v.reshape({b * g, tk, e})).view({b, g, r, tq, e});
}

}  // namespace

AttentionImpl::AttentionImpl(const AttentionOptions& options) : options_(options) {
  TORCH_CHECK(options.n_heads % options.n_kv_heads == 0, "n_heads ", options.n_heads,
              " is not a multiple of n_kv_heads ", options.n_kv_heads);
  const int64_t d = options.d_model, e = options.head_dim;
  auto linear = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  wq = register_module("wq", linear(d, options.n_heads * e));
  wk = register_module("wk", linear(d, options.n_kv_heads * e));
  wv = register_module("wv", linear(d, options.n_kv_heads * e));
  wo = register_module("wo", linear(options.n_heads * e, d));
  if (options.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(e));
    k_norm = register_module("k_norm", RMSNorm(e));
  }
}

void AttentionImpl::NormalizeQk(torch::Tensor* q, torch::Tensor* k) {
  if (!options_.qk_norm) return;
  *q = q_norm->forward(*q).to(q->scalar_type());  // (B, T, H, E), per head over E
  *k = k_norm->forward(*k).to(k->scalar_type());
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& h, const torch::Tensor& positions,
                                     const torch::Tensor& key_valid, const Rope& rope) {
  const int64_t b = h.size(0), t = h.size(1), e = options_.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(e));
  std::vector<torch::Tensor> qkv = Project(h, {wq, wk, wv});
  torch::Tensor q = qkv[0].view({b, t, options_.n_heads, e});     // (B, T, H, E)
  torch::Tensor k = qkv[1].view({b, t, options_.n_kv_heads, e});  // (B, T, G, E)
  torch::Tensor v = qkv[2].view({b, t, options_.n_kv_heads, e});  // (B, T, G, E)
  NormalizeQk(&q, &k);
  q = Rope::Apply(q, rope.Tables(positions, t, scale));  // 1/sqrt(E) folded into the rotation
  k = Rope::Apply(k, rope.Tables(positions, t, 1.0));
  torch::Tensor blocked;
  if (key_valid.defined()) {
    // Causal by original position; padding keys hidden; the diagonal always open.
    torch::Tensor pos_q = positions.unsqueeze(2),
                  pos_k = positions.unsqueeze(1);                             // (B,T,1),(B,1,T)
    torch::Tensor diagonal = torch::eye(t, h.options().dtype(torch::kBool));  // (T, T)
    blocked = ((pos_k > pos_q) | key_valid.logical_not().unsqueeze(1)) & diagonal.logical_not();
  }
  return wo->forward(Attend(q, k, v, blocked));
}

torch::Tensor AttentionImpl::ForwardFullKv(const torch::Tensor& hq, const torch::Tensor& pos_q,
                                           const torch::Tensor& hkv, const Rope& rope) {
  const int64_t b = hq.size(0), tq = hq.size(1), t = hkv.size(1), e = options_.head_dim;
  const double scale = 1.0 / std::sqrt(static_cast<double>(e));
  torch::Tensor q = wq->forward(hq).view({b, tq, options_.n_heads, e});  // (B, Tq, H, E)
  std::vector<torch::Tensor> kv = Project(hkv, {wk, wv});
  torch::Tensor k = kv[0].view({b, t, options_.n_kv_heads, e});  // (B, T, G, E)
  torch::Tensor v = kv[1].view({b, t, options_.n_kv_heads, e});  // (B, T, G, E)
  NormalizeQk(&q, &k);
  q = Rope::Apply(q, rope.Tables(pos_q, tq, scale));
  k = Rope::Apply(k, rope.Tables(torch::Tensor(), t, 1.0));
  torch::Tensor pos_k = torch::arange(t, pos_q.options()).view({1, 1, t});  // (1, 1, T)
  torch::Tensor blocked = pos_k > pos_q.unsqueeze(2);                       // (B, Tq, T)
  return wo->forward(Attend(q, k, v, blocked));
}

std::vector<torch::Tensor> AttentionImpl::Project(const torch::Tensor& x,
                                                  const std::vector<torch::nn::Linear>& linears) {
  std::vector<torch::Tensor> weights;
  std::vector<int64_t> widths;
  for (const torch::nn::Linear& linear : linears) {
    weights.push_back(linear->weight);
    widths.push_back(linear->weight.size(0));
  }
  // (..., sum of widths) split into views; the backward of the split is one cat of the
  // projections' gradients, then one product for dx and one for the stacked dW.
  return torch::linear(x, torch::cat(weights)).split_with_sizes(widths, /*dim=*/-1);
}

torch::Tensor AttentionImpl::Attend(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, const torch::Tensor& blocked) const {
  const int64_t b = q.size(0), tq = q.size(1), g = options_.n_kv_heads,
                hd = options_.n_heads * options_.head_dim;
  if (options_.fused && !blocked.defined()) {
    if (auto cpu = CpuCausalAttentionInputs(q, k, v)) {  // (B, Tq, H, E), (B, Tk, G, E) x2
      const auto& [qc, kc, vc] = *cpu;
      torch::Tensor out = CausalFlashAttentionFunction::apply(qc, kc, vc);  // (B, Tq, H, E)
      // bf16 inputs converted to float32 give a bfloat16 result, as SDPA's is.
      if (!qc.is_same(q) || !kc.is_same(k) || !vc.is_same(v)) out = out.to(torch::kBFloat16);
      return out.view({b, tq, hd});  // (B, Tq, H*E)
    }
  }
  if (options_.fused) {
    std::optional<torch::Tensor> allowed;  // (B, 1, Tq, Tk) bool; none = plain causal
    if (blocked.defined()) allowed = blocked.logical_not().unsqueeze(1);
    const torch::Tensor qh = q.transpose(1, 2), kh = k.transpose(1, 2),
                        vh = v.transpose(1, 2);  // (B, H, Tq, E), (B, G, Tk, E) x2
    // Plain causal attention on a GPU takes the backend measured fastest for its shape.
    const SdpaBackendGuard backend(allowed.has_value() ? SdpaBackend::kDefault
                                                       : ChooseSdpaBackend(qh, kh, vh));
    // Scale 1: q is already scaled; GQA: query head h reads key/value head h / (H/G).
    torch::Tensor out = at::scaled_dot_product_attention(
        qh, kh, vh, allowed, /*dropout_p=*/0.0, /*is_causal=*/!allowed.has_value(),
        /*scale=*/1.0, /*enable_gqa=*/g != options_.n_heads);  // (B, H, Tq, E)
    return out.transpose(1, 2).reshape({b, tq, hd});           // (B, Tq, H*E)
  }
  torch::Tensor q5 = GroupQueries(q, g);       // (B, G, R, Tq, E)
  torch::Tensor kg = k.permute({0, 2, 1, 3});  // (B, G, Tk, E)
  torch::Tensor vg = v.permute({0, 2, 1, 3});  // (B, G, Tk, E)
  torch::Tensor out;                           // (B, G, R, Tq, E)
  const int64_t r = options_.n_heads / g;
  if (blocked.defined()) {
    out = GroupedSoftmaxAttention(q5, kg, vg, AdditiveMask(blocked, q.options()));
  } else {
    // Plain causal: query rows [s, s+c) only need keys [0, s+c); inside that window the
    // keys j > s+i are blocked. Skips about half of the T x T products for long sequences.
    std::vector<torch::Tensor> chunks;
    // Chunks of about a quarter of the rows (at least 64, at most query_chunk) skip ~3/8 of
    // the square at any length while keeping each product large enough to run at speed.
    const int64_t chunk =
        std::max<int64_t>(1, std::min(options_.query_chunk, std::max<int64_t>(64, (tq + 3) / 4)));
    for (int64_t s = 0; s < tq; s += chunk) {
      const int64_t c = std::min(chunk, tq - s), end = s + c;
      torch::Tensor upper =
          torch::ones({c, end}, q.options().dtype(torch::kBool)).triu(/*diagonal=*/s + 1);
      torch::Tensor mask = AdditiveMask(upper, q.options()).repeat({r, 1});  // (R*c, end)
      chunks.push_back(GroupedSoftmaxAttention(q5.narrow(3, s, c), kg.narrow(2, 0, end),
                                               vg.narrow(2, 0, end), mask));
    }
    out = chunks.size() == 1 ? chunks[0] : torch::cat(chunks, /*dim=*/3);
  }
  return out.permute({0, 3, 1, 2, 4}).reshape({b, tq, hd});  // (B, Tq, H*E)
}

}  // namespace xmod
