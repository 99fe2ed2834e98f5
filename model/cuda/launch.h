// The launchers of xmod's CUDA kernels (elementwise.cu, rms_norm.cu, loss.cu): raw device
// pointers, sizes and a stream, no LibTorch type, so that nvcc compiles the kernels without
// LibTorch's headers. kernels.h is their LibTorch side (checks, outputs, the current stream).
// Each launcher queues its kernels on `stream` and returns at once; cudaSuccess, or the
// launch's own error. Every kernel reads bfloat16 or float32 storage and computes in float32.
// Legend: N = elements or rows, D = row width, V = vocabulary. Thread-safe (no state).
#ifndef XMOD_MODEL_CUDA_LAUNCH_H_
#define XMOD_MODEL_CUDA_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace xmod::cuda::launch {

enum class Dtype { kFloat32, kBFloat16 };

// SwiGLU's gate (ffn.h): out = silu(a) * b, rounded once. a, b, out: (N) of `dtype`.
cudaError_t SwiGluForward(Dtype dtype, const void* a, const void* b, void* out, int64_t n,
                          cudaStream_t stream);
// Its gradients for g, with s = sigmoid(a): da = g b s (1 + a (1 - s)), db = g a s.
cudaError_t SwiGluBackward(Dtype dtype, const void* g, const void* a, const void* b, void* da,
                           void* db, int64_t n, cudaStream_t stream);

// RMSNorm (rms_norm.h) of the N rows of x (N, D) of `dtype` with the gain w (D): y = x inv w
// (N, D) float32 and inv = (mean over D of x^2 + eps)^(-1/2) (N) float32. One block a row.
cudaError_t RmsNormForward(Dtype dtype, const void* x, const float* w, double eps, float* y,
                           float* inv, int64_t n, int64_t d, cudaStream_t stream);
// Its gradients for dy (N, D) float32, with xhat = x inv and m = mean over D of dy w xhat:
// dx = inv (dy w - xhat m) (N, D) of `dtype`, and dw's partial sums over the rows of each
// chunk of `chunk_rows` rows, dw_partial (ceil(N / chunk_rows), D) float32 (the caller sums
// them: a fixed order, so the result does not vary from run to run).
cudaError_t RmsNormBackward(Dtype dtype, const float* dy, const void* x, const float* inv,
                            const float* w, void* dx, float* dw_partial, int64_t n, int64_t d,
                            int64_t chunk_rows, cudaStream_t stream);

// The next-token loss's rows (transformer.h): for logits (N, V) of `dtype` and targets (N)
// int64, lse (N) = log sum_v exp(logits) and row_loss (N) = lse - logits[target], both
// float32, in one pass over each row (online maximum); row_loss is NaN for a target outside
// [0, V). One block a row.
cudaError_t NextTokenLossForward(Dtype dtype, const void* logits, const int64_t* targets,
                                 float* lse, float* row_loss, int64_t n, int64_t v,
                                 cudaStream_t stream);
// dlogits (N, V) of `dtype` = (exp(logits - lse) - onehot(targets)) * grad[0] * scale, with
// grad a float32 on the device (read there: no host synchronisation).
cudaError_t NextTokenLossBackward(Dtype dtype, const void* logits, const int64_t* targets,
                                  const float* lse, const float* grad, float scale, void* dlogits,
                                  int64_t n, int64_t v, cudaStream_t stream);

}  // namespace xmod::cuda::launch

#endif  // XMOD_MODEL_CUDA_LAUNCH_H_
