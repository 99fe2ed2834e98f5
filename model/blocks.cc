// Dense and routed layers: see blocks.h.
#include "model/blocks.h"

#include "model/routed_rows.h"

namespace xmod {

DenseBlockImpl::DenseBlockImpl(const DenseBlockOptions& options) {
  const int64_t d = options.attention.d_model;
  if (options.has_attention) {
    norm1 = register_module("norm1", RMSNorm(d));
    attention = register_module("attention", Attention(options.attention));
  }
  if (options.has_ffn) {
    norm2 = register_module("norm2", RMSNorm(d));
    if (options.use_moe) {
      moe = register_module("moe", MoE(options.moe));
    } else {
      ffn = register_module("ffn", SwiGlu(d, options.ffn_dim));
    }
  }
}

torch::Tensor DenseBlockImpl::forward(const torch::Tensor& x_in, LayerContext* ctx) {
  torch::Tensor x = x_in;  // (B, T, D)
  if (attention) {
    x = x + attention->forward(norm1->forward(x), torch::Tensor(), torch::Tensor(), *ctx->rope);
  }
  if (moe) {
    x = x + moe->forward(norm2->forward(x), &ctx->balance_loss);
  } else if (ffn) {
    x = x + ffn->forward(norm2->forward(x));
  }
  return x;
}

RoutedBlockImpl::RoutedBlockImpl(const RoutedBlockOptions& options) : options_(options) {
  const int64_t d = options.attention.d_model;
  norm1 = register_module("norm1", RMSNorm(d));
  router = register_module("router", Router(d, options.tau, options.router_init_std));
  if (options.attention_kind != RoutedBlockOptions::AttentionKind::kNone) {
    attention = register_module("attention", Attention(options.attention));
    norm2 = register_module("norm2", RMSNorm(d));
  }
  ffn = register_module("ffn", SwiGlu(d, options.ffn_dim));
  if (options.update == RoutedBlockOptions::Update::kXMoD && options.learn_gate_scale) {
    gate_scale = register_parameter("gate_scale", torch::full({}, options.gate_scale_init));
  }
}

torch::Tensor RoutedBlockImpl::forward(const torch::Tensor& x, LayerContext* ctx) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  const int64_t k = std::max<int64_t>(1, t / options_.sparsity);
  if (!ctx->bias.defined()) ctx->bias = torch::zeros({b, t}, x.options());
  Selection sel = router->forward(x, *norm1, ctx->bias, k, ctx->mode);

  ctx->router_loss = ctx->router_loss.defined() ? ctx->router_loss + sel.aux_loss : sel.aux_loss;
  ctx->routed_layers += 1;
  if (ctx->trace != nullptr) {
    ctx->trace->selected.push_back(sel.mask);
    ctx->trace->topk_mask.push_back(sel.topk_mask);
    ctx->trace->threshold_mask.push_back(sel.threshold_mask);
    ctx->trace->interval.push_back(ctx->interval);
    ctx->trace->bias.push_back(ctx->bias);
  }
  ctx->bias = ctx->bias + sel.mask.to(x.scalar_type());  // b_i counts this layer's choice
  if (sel.count() == 0) return x;                        // threshold rule selected nobody

  const int64_t k_sel = sel.count();
  torch::Tensor xs = sel.x_rows.view({b, k_sel, d});  // (B, k, D), gathered by the router
  // RMSNorm is per row: normalizing the selected rows is RMSNorm(x) gathered, at k/T the cost.
  torch::Tensor hs = norm1->forward(xs);  // (B, k, D)

  torch::Tensor a;  // (B, k, D) attention output, undefined for Routed-FFN
  switch (options_.attention_kind) {
    case RoutedBlockOptions::AttentionKind::kSelected:
      a = attention->forward(hs, sel.index, sel.valid, *ctx->rope);
      break;
    case RoutedBlockOptions::AttentionKind::kFullKv:
      a = attention->ForwardFullKv(hs, sel.index, norm1->forward(x), *ctx->rope);
      break;
    case RoutedBlockOptions::AttentionKind::kNone:
      break;
  }
  torch::Tensor f = a.defined() ? ffn->forward(norm2->forward(xs + a)) : ffn->forward(hs);

  // x_i += r_i (u1_i + u2_i) + p_i at the selected rows, in one pass (routed_rows.h).
  auto flat = [&](const torch::Tensor& v) { return v.reshape({b * k_sel, d}); };
  torch::Tensor r = sel.gate;  // (B, k), 0 on padding rows
  torch::Tensor out;           // (B*T, D)
  if (options_.update == RoutedBlockOptions::Update::kMoD) {
    torch::Tensor p;  // x_i += a_i + r_i f_i
    if (a.defined()) p = flat(sel.valid.defined() ? a * sel.valid.unsqueeze(-1) : a);
    out = ScatterScaledAdd(sel.x_pass, sel.rows, r.reshape({-1}), flat(f), torch::Tensor(), p);
  } else {
    if (gate_scale.defined()) r = r * gate_scale;  // x_i += ς r_i (a_i + f_i)
    out = ScatterScaledAdd(sel.x_pass, sel.rows, r.reshape({-1}), flat(f),
                           a.defined() ? flat(a) : torch::Tensor(), torch::Tensor());
  }
  return out.view({b, t, d});
}

}  // namespace xmod
