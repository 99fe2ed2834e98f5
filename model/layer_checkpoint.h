// Activation checkpointing of one layer (TrainingSpec.activation_checkpointing): the layer
// runs without recording its graph, only its input is kept, and backward runs it again with
// the graph recorded, then back-propagates through the recomputation. The 161- and
// 298-layer X-MoD stacks of Table 9 keep one (B, T, D) tensor per layer instead of every
// intermediate, for about one extra forward pass of compute.
//
// The recomputation sees what the first pass saw: the same input, the token-choice bias b of
// the interval, the routing mode, the RoPE tables and the autocast state. Routing is
// deterministic given these, so the same tokens are selected again. Layers with a MoE FFN
// are not checkpointed (their expert-load counters would count the recomputation twice).
// Legend: B = batch, T = tokens, D = d_model. Thread-compatible.
#ifndef XMOD_MODEL_LAYER_CHECKPOINT_H_
#define XMOD_MODEL_LAYER_CHECKPOINT_H_

#include <torch/torch.h>

#include "model/blocks.h"

namespace xmod {

// layer->forward(x, ctx) with the layer's activations recomputed in backward. Updates ctx
// (bias, router_loss, routed_layers) as the plain call does; `layer` has no MoE FFN. Requires grad
// mode on and ctx->trace == nullptr; `layer` and *ctx->rope must outlive the backward pass.
// x: (B, T, D) -> (B, T, D).
torch::Tensor CheckpointedForward(BlockImpl* layer, const torch::Tensor& x, LayerContext* ctx);

}  // namespace xmod

#endif  // XMOD_MODEL_LAYER_CHECKPOINT_H_
