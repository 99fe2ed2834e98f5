// The language model of every architecture: see transformer.h.
#include "model/transformer.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <string>

#include "model/kernel_choice.h"
#include "model/layer_checkpoint.h"

namespace xmod {
namespace {

constexpr double kInitStd = 0.02;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The mean next-token cross-entropy as one node. With kernel_choice.h's kernels (model/cpu,
// model/cuda) two passes over the logits, saving them and one log-sum-exp per row; otherwise
// log_softmax in float32 (at least), saved whole for the backward.
class NextTokenLossFunction : public torch::autograd::Function<NextTokenLossFunction> {
 public:
  // logits: (N, V), targets: (N) -> ().
  static torch::Tensor forward(AutogradContext* actx, const torch::Tensor& logits,
                               const torch::Tensor& targets) {
    const NextTokenLossKernels* kernels = NextTokenLossKernelsFor(logits, targets);
    actx->saved_data["kernels"] = SaveKernels(kernels);
    if (kernels != nullptr) {
      auto [loss, lse] = kernels->forward(logits, targets);
      actx->save_for_backward({logits, targets, lse});
      return loss;
    }
    torch::Tensor logp = torch::log_softmax(  // (N, V)
        logits.to(at::promote_types(logits.scalar_type(), torch::kFloat)), /*dim=*/-1);
    actx->save_for_backward({logp, targets});
    actx->saved_data["logits_dtype"] = logits.scalar_type();
    return logp.gather(/*dim=*/1, targets.unsqueeze(1)).mean().neg();
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    if (const auto* kernels = SavedKernels<NextTokenLossKernels>(actx->saved_data["kernels"])) {
      return {kernels->backward(grads[0], saved[0], saved[1], saved[2]), torch::Tensor()};
    }
    const torch::Tensor &logp = saved[0], &targets = saved[1];
    const int64_t n = logp.size(0);
    torch::Tensor dlogits = logp.exp();  // (N, V) softmax
    dlogits.scatter_add_(/*dim=*/1, targets.unsqueeze(1),
                         torch::full({n, 1}, -1.0, dlogits.options()));  // - onehot
    dlogits.mul_(grads[0].to(dlogits.scalar_type()) / static_cast<double>(n));
    const torch::Dtype dtype = actx->saved_data["logits_dtype"].toScalarType();
    return {dlogits.to(dtype), torch::Tensor()};
  }
};

// Every layer's attention on backbone `bb` (its QK-Norm) under the runtime's kernel choice.
AttentionOptions AttentionOptionsOf(const Backbone& bb, const ModelRuntimeOptions& runtime) {
  AttentionOptions out{bb.d_model, bb.n_heads, bb.n_kv_heads, bb.head_dim};
  out.fused = runtime.fused_attention;
  out.qk_norm = bb.qk_norm;
  return out;
}

// A dense layer's options: SwiGLU, or for MoE its experts.
DenseBlockOptions DenseOptionsOf(const xmod::v1::ModelSpec& spec, const Backbone& bb,
                                 const AttentionOptions& attention) {
  DenseBlockOptions dense;
  dense.attention = attention;
  dense.ffn_dim = bb.ffn_dim;
  if (spec.arch() == xmod::v1::MOE) {
    const auto& m = spec.moe();
    dense.use_moe = true;
    dense.moe.d_model = bb.d_model;
    dense.moe.total_experts = m.total_experts();
    dense.moe.active_experts = m.active_experts();
    dense.moe.shared_experts = m.shared_experts();
    // Default d_e keeps the active width equal to the dense FFN (Table 6: 6:64+2 at 556M
    // gives d_e = 3072 / 8 = 384).
    dense.moe.expert_dim = m.expert_dim() > 0
                               ? m.expert_dim()
                               : bb.ffn_dim / (m.active_experts() + m.shared_experts());
    dense.moe.bias_update_rate = m.bias_update_rate() > 0 ? m.bias_update_rate() : 1e-3;
  }
  return dense;
}

// A routed layer's options, whatever its attention kind.
RoutedBlockOptions RoutedOptionsOf(const xmod::v1::ModelSpec& spec, const Backbone& bb,
                                   const AttentionOptions& attention) {
  const xmod::v1::Architecture arch = spec.arch();
  RoutedBlockOptions routed;
  routed.attention = attention;
  routed.ffn_dim = bb.ffn_dim;
  routed.sparsity = std::max(1, spec.k());
  routed.tau = spec.has_tau() ? spec.tau() : 1.0;
  if (spec.no_token_choice_bias() || arch == xmod::v1::MOD) routed.tau = 0.0;
  routed.learn_gate_scale = !spec.no_gated_scaling();
  routed.gate_scale_init = spec.has_gate_scale_init() ? spec.gate_scale_init() : 1.0;
  routed.router_init_std = kInitStd;
  if (arch == xmod::v1::MOD) routed.update = RoutedBlockOptions::Update::kMoD;
  return routed;
}

// The options of every kind of layer of one model.
struct BlockOptionsSet {
  DenseBlockOptions dense;
  DenseBlockOptions attention_only;
  RoutedBlockOptions routed;
};

BlockOptionsSet BlockOptionsOf(const xmod::v1::ModelSpec& spec, const Backbone& bb,
                               const ModelRuntimeOptions& runtime) {
  const AttentionOptions attention = AttentionOptionsOf(bb, runtime);
  BlockOptionsSet options;
  options.dense = DenseOptionsOf(spec, bb, attention);
  options.attention_only = options.dense;
  options.attention_only.has_ffn = false;
  options.routed = RoutedOptionsOf(spec, bb, attention);
  return options;
}

std::shared_ptr<BlockImpl> MakeBlock(LayerKind kind, const BlockOptionsSet& options) {
  std::shared_ptr<BlockImpl> block;
  RoutedBlockOptions o = options.routed;
  switch (kind) {
    case LayerKind::kDense:
      block = std::make_shared<DenseBlockImpl>(options.dense);
      break;
    case LayerKind::kAttention:
      block = std::make_shared<DenseBlockImpl>(options.attention_only);
      break;
    case LayerKind::kSparse:
      o.attention_kind = RoutedBlockOptions::AttentionKind::kSelected;
      block = std::make_shared<RoutedBlockImpl>(o);
      break;
    case LayerKind::kSparseFullKv:
      o.attention_kind = RoutedBlockOptions::AttentionKind::kFullKv;
      block = std::make_shared<RoutedBlockImpl>(o);
      break;
    case LayerKind::kRoutedFfn:
      o.attention_kind = RoutedBlockOptions::AttentionKind::kNone;
      block = std::make_shared<RoutedBlockImpl>(o);
      break;
  }
  return block;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

torch::Tensor NextTokenLoss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return NextTokenLossFunction::apply(logits, targets);
}

TransformerImpl::TransformerImpl(const xmod::v1::ModelSpec& spec, const Accounting& accounting,
                                 int seq_len, const ModelRuntimeOptions& runtime) {
  const Backbone& bb = accounting.backbone;
  head_dim_ = bb.head_dim;
  interval_of_layer_ = accounting.plan.interval_of_layer;
  router_loss_weight_ = spec.has_router_loss_weight() ? spec.router_loss_weight() : 0.01;
  balance_loss_weight_ =
      spec.moe().balance_loss_weight() > 0 ? spec.moe().balance_loss_weight() : 1e-3;
  TORCH_CHECK(interval_of_layer_.size() == accounting.plan.layers.size(),
              "layer plan: interval_of_layer has ", interval_of_layer_.size(), " entries for ",
              accounting.plan.layers.size(), " layers");

  const BlockOptionsSet options = BlockOptionsOf(spec, bb, runtime);
  embed = register_module("embed", torch::nn::Embedding(bb.vocab_size, bb.d_model));
  for (size_t l = 0; l < accounting.plan.layers.size(); ++l) {
    std::shared_ptr<BlockImpl> block = MakeBlock(accounting.plan.layers[l], options);
    layers_.push_back(register_module("layer" + std::to_string(l), block));
    const auto* d = dynamic_cast<DenseBlockImpl*>(block.get());
    if (d != nullptr && d->moe) moe_layers_.push_back(d->moe);
    checkpointable_.push_back(runtime.activation_checkpointing && (d == nullptr || !d->moe));
  }
  norm_f = register_module("norm_f", RMSNorm(bb.d_model));
  lm_head = register_module(
      "lm_head",
      torch::nn::Linear(torch::nn::LinearOptions(bb.d_model, bb.vocab_size).bias(false)));
  rope_ = Rope(bb.head_dim, seq_len, bb.rope_theta, torch::kCPU);
  InitParameters(accounting);
}

void TransformerImpl::InitParameters(const Accounting& accounting) {
  torch::NoGradGuard no_grad;
  const double out_std = kInitStd / std::sqrt(2.0 * std::max(1, accounting.backbone.n_layers));
  for (auto& p : named_parameters()) {
    const std::string& name = p.key();
    torch::Tensor& w = p.value();
    if (w.dim() != 2) continue;  // norms, ς and router vectors keep their constructor init
    const bool residual_out = EndsWith(name, "wo.weight") || EndsWith(name, "w2.weight");
    w.normal_(0.0, residual_out ? out_std : kInitStd);
  }
}

torch::Tensor TransformerImpl::Body(const torch::Tensor& tokens, RoutingMode mode,
                                    RoutingTrace* trace, LayerContext* ctx) {
  const int64_t t = tokens.size(1);
  const torch::Dtype dtype = embed->weight.scalar_type();
  if (rope_.device() != tokens.device() || rope_.dtype() != dtype || rope_.max_positions() < t) {
    rope_ =
        Rope(head_dim_, std::max(t, rope_.max_positions()), rope_.theta(), tokens.device(), dtype);
  }
  ctx->mode = mode;
  ctx->rope = &rope_;
  ctx->trace = trace;
  torch::Tensor x = embed->forward(tokens);  // (B, T, D)
  for (size_t l = 0; l < layers_.size(); ++l) {
    const int interval = interval_of_layer_[l];
    if (interval >= 0 && interval != ctx->interval) {
      ctx->bias = torch::Tensor();  // b_i restarts at every sparse interval (§2.3)
      ctx->interval = interval;
    }
    if (checkpointable_[l] && trace == nullptr && torch::GradMode::is_enabled()) {
      x = CheckpointedForward(layers_[l].get(), x, ctx);
    } else {
      x = layers_[l]->forward(x, ctx);
    }
  }
  return norm_f->forward(x);  // (B, T, D)
}

torch::Tensor TransformerImpl::Logits(const torch::Tensor& tokens, RoutingMode mode,
                                      RoutingTrace* trace) {
  LayerContext ctx;
  return lm_head->forward(Body(tokens, mode, trace, &ctx));  // (B, T, V)
}

ModelOutput TransformerImpl::forward(const torch::Tensor& tokens, const torch::Tensor& targets,
                                     RoutingMode mode, RoutingTrace* trace) {
  LayerContext ctx;
  torch::Tensor logits = lm_head->forward(Body(tokens, mode, trace, &ctx));  // (B, T, V)
  ModelOutput out;
  out.loss = NextTokenLoss(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
  out.aux_loss = torch::zeros({}, logits.options());
  if (ctx.routed_layers > 0) {
    out.aux_loss = out.aux_loss +
                   router_loss_weight_ * ctx.router_loss / static_cast<double>(ctx.routed_layers);
  }
  if (ctx.balance_loss.defined())
    out.aux_loss = out.aux_loss + balance_loss_weight_ * ctx.balance_loss;
  return out;
}

std::vector<torch::Tensor> TransformerImpl::MuonParameters() {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters()) {
    const std::string& name = p.key();
    if (p.value().dim() == 2 && name.rfind("layer", 0) == 0 &&
        name.find("router") == std::string::npos) {
      out.push_back(p.value());
    }
  }
  return out;
}

std::vector<torch::Tensor> TransformerImpl::AdamWParameters() {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters()) {
    const std::string& name = p.key();
    if (!(p.value().dim() == 2 && name.rfind("layer", 0) == 0 &&
          name.find("router") == std::string::npos)) {
      out.push_back(p.value());
    }
  }
  return out;
}

void TransformerImpl::AfterOptimizerStep() {
  for (auto& moe : moe_layers_) moe->UpdateBias();
}

std::vector<torch::Tensor> TransformerImpl::MayMissGradients() const {
  std::vector<torch::Tensor> out;
  for (const MoE& moe : moe_layers_) {
    for (const SwiGlu& expert : moe->experts) {
      for (const torch::Tensor& p : expert->parameters()) out.push_back(p);
    }
  }
  return out;
}

}  // namespace xmod
