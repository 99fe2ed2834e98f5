// xmod's CUDA kernels, the LibTorch side: the GPU siblings of model/cpu's kernels for the
// SwiGLU gate, RMSNorm and the next-token loss, with the same signatures (kernel_choice.h
// puts them in one table per operation). Each checks its tensors, allocates its outputs and
// queues the kernels of launch.h on the current CUDA stream; nothing waits for the device.
// Built only with -DXMOD_CUDA=ON and XMOD_CUDA_KERNELS (nvcc); kernel_choice.h says when a
// call takes them: CUDA tensors of float32 or bfloat16 (RMSNorm's gain float32).
// Legend: N = elements or rows, D = row width, V = vocabulary. Thread-safe (no state).
#ifndef XMOD_MODEL_CUDA_KERNELS_H_
#define XMOD_MODEL_CUDA_KERNELS_H_

#include <torch/torch.h>

#include <utility>

namespace xmod::cuda {

// silu(a) * b, rounded once: a, b (N) -> (N). Backward for g: {da, db}.
torch::Tensor SwiGluForward(const torch::Tensor& a, const torch::Tensor& b);
std::pair<torch::Tensor, torch::Tensor> SwiGluBackward(const torch::Tensor& g,
                                                       const torch::Tensor& a,
                                                       const torch::Tensor& b);

// RMSNorm over the last dimension: x (..., D) float32 or bfloat16, w (D) float32 ->
// {y (..., D) float32 (the composite's type: x times a float32 gain), inv (...) float32}.
// Backward for dy: {dx (..., D) in x's dtype, dw (D) float32}.
std::pair<torch::Tensor, torch::Tensor> RmsNormForward(const torch::Tensor& x,
                                                       const torch::Tensor& w, double eps);
std::pair<torch::Tensor, torch::Tensor> RmsNormBackward(const torch::Tensor& dy,
                                                        const torch::Tensor& x,
                                                        const torch::Tensor& inv,
                                                        const torch::Tensor& w);

// The mean next-token cross-entropy: logits (N, V) float32 or bfloat16, targets (N) int64 ->
// {loss () float32, lse (N) float32}; a target outside [0, V) makes the loss NaN (which the
// trainer's divergence check reports) rather than an error, since checking would wait for the
// device. Backward for the loss's grad (): dlogits (N, V) in the logits' dtype.
std::pair<torch::Tensor, torch::Tensor> NextTokenLossForward(const torch::Tensor& logits,
                                                             const torch::Tensor& targets);
torch::Tensor NextTokenLossBackward(const torch::Tensor& grad, const torch::Tensor& logits,
                                    const torch::Tensor& targets, const torch::Tensor& lse);

}  // namespace xmod::cuda

#endif  // XMOD_MODEL_CUDA_KERNELS_H_
