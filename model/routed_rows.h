// The routed layer's way back into the residual stream (blocks.h, paper §2.3): add the
// block's router-weighted update into the selected rows of x,
//   out_i = x_i + r_i (u1_i + u2_i) + p_i   for the selected tokens i, out_i = x_i elsewhere
// (X-MoD: u1 = a, u2 = f, r = ς r_i, p = 0; MoD: u1 = f, p = a; Routed-FFN: u1 = f).
// On float and double CPU tensors (kernel_choice.h, RoutedRowsOnCpu) one autograd node over
// the single-pass kernels of model/cpu/kernels.h: out in one pass over x, and a backward that
// produces du = r * g[rows] and dr = g[rows] . (u1 + u2) in one pass over the selected rows, dx
// being g itself (the router's node adds the gather's gradient to it, router.h); bfloat16 updates
// of a float32 x (bf16 autocast) are converted and take it too. On every other device and dtype
// (CUDA, a bf16 x), and for rows selected more than once, ATen's index_add of the same sum. Legend:
// N = B*T rows of x, M = B*k selected rows, D = d_model. Thread-compatible.
#ifndef XMOD_MODEL_ROUTED_ROWS_H_
#define XMOD_MODEL_ROUTED_ROWS_H_

#include <torch/torch.h>

namespace xmod {

// x: (N, D), rows: (M) int64 in [0, N), r: (M), u1: (M, D), u2, p: (M, D) or undefined -> (N, D).
torch::Tensor ScatterScaledAdd(const torch::Tensor& x, const torch::Tensor& rows,
                               const torch::Tensor& r, const torch::Tensor& u1,
                               const torch::Tensor& u2, const torch::Tensor& p);

}  // namespace xmod

#endif  // XMOD_MODEL_ROUTED_ROWS_H_
