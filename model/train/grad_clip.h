// Global gradient-norm clipping without a host synchronisation: the scale factor stays a
// device tensor (LibTorch's clip_grad_norm_ returns the norm as a double, which waits for
// the GPU every step). Same rule as torch.nn.utils.clip_grad_norm_: scale every gradient by
// min(1, max_norm / (‖g‖₂ + 1e-6)), ‖g‖₂ over all gradients together.
#ifndef XMOD_MODEL_TRAIN_GRAD_CLIP_H_
#define XMOD_MODEL_TRAIN_GRAD_CLIP_H_

#include <torch/torch.h>

#include <vector>

namespace xmod {

// Clips in place; parameters without a gradient are skipped. Returns the total norm before
// clipping: () float32 on the gradients' device, undefined when no parameter has one.
torch::Tensor ClipGradNorm(const std::vector<torch::Tensor>& parameters, double max_norm);

}  // namespace xmod

#endif  // XMOD_MODEL_TRAIN_GRAD_CLIP_H_
