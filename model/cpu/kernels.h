// Hand-vectorised single-pass CPU kernels for the model's elementwise hot spots, each doing in
// one pass over memory what the ATen composite does in several (see ffn.cc for the callers).
// kernels_isa.cc holds the loops, written once with at::vec::Vectorized and compiled once per
// instruction set (DEFAULT, AVX2, AVX512 on x86-64); kernels.cc picks the variant that ATen
// itself runs (at::get_cpu_capability(), which honours ATEN_CPU_CAPABILITY).
// Every kernel takes contiguous CPU tensors of float or double and parallelises over elements
// with at::parallel_for; SupportsFused says when a caller may use one, and callers keep the
// composite formula for every other device and dtype (CUDA, bf16).
// Legend: N = elements. Thread-compatible (no state but the variant table).
#ifndef XMOD_MODEL_CPU_KERNELS_H_
#define XMOD_MODEL_CPU_KERNELS_H_

#include <torch/torch.h>

#include <string>

namespace xmod::cpu {

// True when every tensor is defined, on the CPU, and float or double, all of one dtype.
bool SupportsFused(std::initializer_list<torch::Tensor> tensors);

// The instruction set of the variant in use: "DEFAULT", "AVX2" or "AVX512".
std::string KernelIsa();

// SwiGLU's gate (paper B.1): out = silu(a) * b = a * sigmoid(a) * b. a, b: (N) -> (N).
torch::Tensor SwiGluForward(const torch::Tensor& a, const torch::Tensor& b);

// Its gradients for the incoming gradient g, with s = sigmoid(a):
//   da = g * b * s * (1 + a * (1 - s)),   db = g * a * s.   g, a, b: (N) -> {da, db}.
std::pair<torch::Tensor, torch::Tensor> SwiGluBackward(const torch::Tensor& g,
                                                       const torch::Tensor& a,
                                                       const torch::Tensor& b);

// RMSNorm (rms_norm.h) over the last dimension, one pass per row: x (..., D), w (D) ->
// {y (..., D) = x * inv * w, inv (...) = (mean over D of x^2 + eps)^(-1/2)}.
std::pair<torch::Tensor, torch::Tensor> RmsNormForward(const torch::Tensor& x,
                                                       const torch::Tensor& w, double eps);

// Its gradients, one pass per row: with xhat = x * inv and m = mean over D of dy * w * xhat,
// dx = inv * (dy * w - xhat * m), dw = sum over rows of dy * xhat. -> {dx (..., D), dw (D)}.
std::pair<torch::Tensor, torch::Tensor> RmsNormBackward(const torch::Tensor& dy,
                                                        const torch::Tensor& x,
                                                        const torch::Tensor& inv,
                                                        const torch::Tensor& w);

// Rotary embedding (rope.h) of x (B, T, H, E), whose heads' values are contiguous and whose
// (b, t) rows may lie any fixed stride apart (a view of the fused q/k/v product), by the tables
// cos, sin (B or 1, T, 1, E/2): out = (x1 cos - sign x2 sin, x2 cos + sign x1 sin) of the
// halves x1, x2 of each head, contiguous (B, T, H, E). sin_sign -1 is the inverse rotation.
// RopeSupportsLayout says whether x's strides are such.
bool RopeSupportsLayout(const torch::Tensor& x);
torch::Tensor Rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                   double sin_sign);

namespace internal {
// One instruction set's loops over raw contiguous arrays, of element type float and double.
struct KernelTable {
  const char* isa;
  void (*swiglu_forward_f)(const float* a, const float* b, float* out, int64_t n);
  void (*swiglu_forward_d)(const double* a, const double* b, double* out, int64_t n);
  void (*swiglu_backward_f)(const float* g, const float* a, const float* b, float* da, float* db,
                            int64_t n);
  void (*swiglu_backward_d)(const double* g, const double* a, const double* b, double* da,
                            double* db, int64_t n);
  void (*rms_norm_forward_f)(const float* x, const float* w, double eps, float* y, float* inv,
                             int64_t rows, int64_t d);
  void (*rms_norm_forward_d)(const double* x, const double* w, double eps, double* y, double* inv,
                             int64_t rows, int64_t d);
  // dw_blocks: (ceil(rows / block_rows), D), block c's partial sum of dw.
  void (*rms_norm_backward_f)(const float* dy, const float* x, const float* inv, const float* w,
                              float* dx, float* dw_blocks, int64_t rows, int64_t d,
                              int64_t block_rows);
  void (*rms_norm_backward_d)(const double* dy, const double* x, const double* inv, const double* w,
                              double* dx, double* dw_blocks, int64_t rows, int64_t d,
                              int64_t block_rows);
  void (*rope_f)(const float* x, int64_t x_row_stride, const float* cos, const float* sin,
                 bool per_batch_tables, float sin_sign, float* out, int64_t rows, int64_t t,
                 int64_t heads, int64_t e);
  void (*rope_d)(const double* x, int64_t x_row_stride, const double* cos, const double* sin,
                 bool per_batch_tables, double sin_sign, double* out, int64_t rows, int64_t t,
                 int64_t heads, int64_t e);
};
}  // namespace internal

}  // namespace xmod::cpu

#endif  // XMOD_MODEL_CPU_KERNELS_H_
