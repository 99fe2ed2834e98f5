// Activation checkpointing of one layer: see layer_checkpoint.h.
#include "model/layer_checkpoint.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "model/autocast.h"

namespace xmod {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the recomputation needs besides the saved tensors. The pointers are stored in the
// autograd context as integers: the model owns the layer and the RoPE tables, and the
// trainer finishes backward before the next forward.
struct Replay {
  BlockImpl* layer = nullptr;
  const Rope* rope = nullptr;
  RoutingMode mode = RoutingMode::kTopK;
  int interval = -1;
  AutocastState cpu_autocast;
  AutocastState cuda_autocast;
};

void Save(AutogradContext* actx, const Replay& r) {
  actx->saved_data["layer"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(r.layer));
  actx->saved_data["rope"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(r.rope));
  actx->saved_data["mode"] = static_cast<int64_t>(r.mode);
  actx->saved_data["interval"] = static_cast<int64_t>(r.interval);
  actx->saved_data["cpu_autocast"] = r.cpu_autocast.enabled;
  actx->saved_data["cpu_dtype"] = static_cast<int64_t>(r.cpu_autocast.dtype);
  actx->saved_data["cuda_autocast"] = r.cuda_autocast.enabled;
  actx->saved_data["cuda_dtype"] = static_cast<int64_t>(r.cuda_autocast.dtype);
}

Replay Load(AutogradContext* actx) {
  Replay r;
  r.layer = reinterpret_cast<BlockImpl*>(static_cast<intptr_t>(actx->saved_data["layer"].toInt()));
  r.rope = reinterpret_cast<const Rope*>(static_cast<intptr_t>(actx->saved_data["rope"].toInt()));
  r.mode = static_cast<RoutingMode>(actx->saved_data["mode"].toInt());
  r.interval = static_cast<int>(actx->saved_data["interval"].toInt());
  r.cpu_autocast = {actx->saved_data["cpu_autocast"].toBool(),
                    static_cast<torch::Dtype>(actx->saved_data["cpu_dtype"].toInt())};
  r.cuda_autocast = {actx->saved_data["cuda_autocast"].toBool(),
                     static_cast<torch::Dtype>(actx->saved_data["cuda_dtype"].toInt())};
  return r;
}

// Runs the layer with a fresh context holding the interval's bias b.
struct LayerRun {
  torch::Tensor y;            // (B, T, D)
  torch::Tensor bias;         // (B, T) b after this layer
  torch::Tensor router_loss;  // () this layer's BCE, 0 if none
  int64_t routed_layers = 0;
};

LayerRun RunLayer(const Replay& r, const torch::Tensor& x, const torch::Tensor& bias) {
  LayerContext local;
  local.mode = r.mode;
  local.rope = r.rope;
  local.bias = bias;
  local.interval = r.interval;
  LayerRun run;
  run.y = r.layer->forward(x, &local);
  run.bias = local.bias;
  const torch::Tensor zero = torch::zeros({}, x.options().dtype(torch::kFloat));
  run.router_loss = local.router_loss.defined() ? local.router_loss : zero;
  run.routed_layers = local.routed_layers;
  return run;
}

// Inputs: x (B, T, D), bias (B, T), the Replay and the caller's routed-layer count. Outputs:
// y and the layer's router loss (differentiable), and b after the layer (not).
class LayerRecompute : public torch::autograd::Function<LayerRecompute> {
 public:
  static variable_list forward(AutogradContext* actx, torch::Tensor x, torch::Tensor bias,
                               Replay replay, int64_t* routed_layers) {
    LayerRun run = RunLayer(replay, x, bias);
    *routed_layers += run.routed_layers;
    actx->save_for_backward({x, bias});
    Save(actx, replay);
    // An output that is an input unchanged (dense layers pass b through) must be a copy.
    torch::Tensor bias_out = run.bias.is_same(bias) ? bias.clone() : run.bias;
    actx->mark_non_differentiable({bias_out});
    return {run.y, run.router_loss, bias_out};
  }

  static variable_list backward(AutogradContext* actx, variable_list grads) {
    const variable_list saved = actx->get_saved_variables();
    const Replay replay = Load(actx);
    torch::Tensor x = saved[0].detach().requires_grad_(true);
    LayerRun run;
    {
      torch::AutoGradMode grad_mode(true);
      AutocastGuard cpu(torch::kCPU, replay.cpu_autocast);
      AutocastGuard cuda(torch::kCUDA, replay.cuda_autocast);
      run = RunLayer(replay, x, saved[1].detach());
    }
    variable_list outputs, output_grads;
    const torch::Tensor results[2] = {run.y, run.router_loss};
    for (int i = 0; i < 2; ++i) {
      if (grads[i].defined() && results[i].requires_grad()) {
        outputs.push_back(results[i]);
        output_grads.push_back(grads[i]);
      }
    }
    if (!outputs.empty()) torch::autograd::backward(outputs, output_grads);
    return {x.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor CheckpointedForward(BlockImpl* layer, const torch::Tensor& x, LayerContext* ctx) {
  TORCH_CHECK(ctx->trace == nullptr, "activation checkpointing cannot record a routing trace");
  if (!ctx->bias.defined()) ctx->bias = torch::zeros({x.size(0), x.size(1)}, x.options());
  Replay replay;
  replay.layer = layer;
  replay.rope = ctx->rope;
  replay.mode = ctx->mode;
  replay.interval = ctx->interval;
  replay.cpu_autocast = CurrentAutocast(torch::kCPU);
  replay.cuda_autocast = CurrentAutocast(torch::kCUDA);
  int64_t routed_layers = 0;
  variable_list out = LayerRecompute::apply(x, ctx->bias, replay, &routed_layers);
  ctx->bias = out[2];
  if (routed_layers > 0) {
    ctx->router_loss = ctx->router_loss.defined() ? ctx->router_loss + out[1] : out[1];
    ctx->routed_layers += routed_layers;
  }
  return out[0];
}

}  // namespace xmod
