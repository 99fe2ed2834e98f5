// Mixture-of-Experts FFN: see moe.h.
#include "model/moe.h"

#include <string>

namespace xmod {

MoEImpl::MoEImpl(const MoEOptions& options) : options_(options) {
  TORCH_CHECK(options.active_experts >= 1 && options.active_experts <= options.total_experts,
              "moe.active_experts must be in [1, total_experts]");
  router = register_module(
      "router", torch::nn::Linear(
                    torch::nn::LinearOptions(options.d_model, options.total_experts).bias(false)));
  for (int64_t e = 0; e < options.total_experts; ++e) {
    experts.push_back(
        register_module("expert" + std::to_string(e), SwiGlu(options.d_model, options.expert_dim)));
  }
  if (options.shared_experts > 0) {
    shared = register_module("shared",
                             SwiGlu(options.d_model, options.shared_experts * options.expert_dim));
  }
  expert_bias = register_buffer("expert_bias", torch::zeros({options.total_experts}));
  load = register_buffer("load", torch::zeros({options.total_experts}));
}

MoERouting MoEImpl::Route(const torch::Tensor& x) {
  MoERouting routing;
  routing.probs = torch::softmax(router->forward(x), /*dim=*/-1);  // (N, E)
  {
    torch::NoGradGuard no_grad;  // the bias steers the choice only, never the gates
    routing.experts =
        std::get<1>((routing.probs + expert_bias).topk(options_.active_experts, /*dim=*/-1));
  }
  torch::Tensor chosen = routing.probs.gather(/*dim=*/1, routing.experts);  // (N, k)
  routing.gates = chosen / chosen.sum(/*dim=*/-1, /*keepdim=*/true);
  return routing;
}

torch::Tensor MoEImpl::forward(const torch::Tensor& x, torch::Tensor* balance_loss) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2), n = b * t;
  const int64_t k = options_.active_experts, e_count = options_.total_experts;
  torch::Tensor flat = x.reshape({n, d});  // (N, D)
  MoERouting routing = Route(flat);

  // Sort the N*k (token, expert) pairs by expert.
  torch::Tensor pair_expert = routing.experts.reshape({-1});  // (N*k)
  torch::Tensor order =
      std::get<1>(pair_expert.sort(/*stable=*/c10::optional<bool>(true), /*dim=*/0));
  torch::Tensor pair_token = order.div(k, "floor");                              // (N*k)
  torch::Tensor counts = torch::bincount(pair_expert, /*weights=*/{}, e_count);  // (E)
  torch::Tensor rows = flat.index_select(0, pair_token);                         // (N*k, D)
  torch::Tensor gates = routing.gates.reshape({-1}).index_select(0, order);      // (N*k)

  torch::Tensor counts_cpu = counts.to(torch::kCPU);
  const int64_t* count = counts_cpu.data_ptr<int64_t>();
  std::vector<torch::Tensor> outputs;
  int64_t offset = 0;
  for (int64_t e = 0; e < e_count; ++e) {
    if (count[e] == 0) continue;
    outputs.push_back(experts[e]->forward(rows.narrow(0, offset, count[e])));  // (n_e, D)
    offset += count[e];
  }
  torch::Tensor routed = torch::cat(outputs, /*dim=*/0) * gates.unsqueeze(1);    // (N*k, D)
  // Under bf16 autocast the experts return bf16; the sum is kept in the stream's dtype.
  torch::Tensor out =
      torch::zeros_like(flat).index_add(0, pair_token, routed.to(flat.scalar_type()));  // (N, D)
  if (shared) out = out + shared->forward(flat);

  if (balance_loss != nullptr) {
    torch::Tensor share = counts.to(x.scalar_type()) / static_cast<double>(n * k);  // f_e
    torch::Tensor mean_prob = routing.probs.mean(/*dim=*/0);                        // P_e
    torch::Tensor loss = static_cast<double>(e_count) * (share * mean_prob).sum();
    *balance_loss = balance_loss->defined() ? *balance_loss + loss : loss;
  }
  if (is_training()) {
    torch::NoGradGuard no_grad;
    load.add_(counts.to(load.scalar_type()));
  }
  return out.view({b, t, d});
}

void MoEImpl::UpdateBias() {
  torch::NoGradGuard no_grad;
  if (load.sum().item<double>() == 0) return;
  expert_bias.add_(torch::sign(load.mean() - load) * options_.bias_update_rate);
  load.zero_();
}

}  // namespace xmod
