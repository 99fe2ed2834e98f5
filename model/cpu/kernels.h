// Hand-vectorised single-pass CPU kernels for the model's elementwise hot spots, each doing in
// one pass over memory what the ATen composite does in several (see ffn.cc for the callers).
// kernels_isa.cc holds the loops, written once with at::vec::Vectorized and compiled once per
// instruction set (DEFAULT, AVX2, AVX512 on x86-64); kernels.cc picks the variant that ATen
// itself runs (at::get_cpu_capability(), which honours ATEN_CPU_CAPABILITY).
// Every kernel takes contiguous CPU tensors of float or double (the SwiGLU gate and RoPE
// bfloat16 too) and parallelises over elements with at::parallel_for; SupportsFused
// (SupportsSwiGlu, RopeSupports) says which tensors one takes, and model/kernel_choice.h, the
// one place that chooses, sends calls here, to model/cuda's kernels or to the composite
// formula (CUDA without kernels; bf16 but for the gate and RoPE).
// Legend: N = elements. Thread-compatible (no state but the variant table).
#ifndef XMOD_MODEL_CPU_KERNELS_H_
#define XMOD_MODEL_CPU_KERNELS_H_

#include <torch/torch.h>

#include <string>
#include <tuple>

namespace xmod::cpu {

// True when every tensor is defined, on the CPU, and float or double, all of one dtype.
bool SupportsFused(std::initializer_list<torch::Tensor> tensors);

// The instruction set of the variant in use: "DEFAULT", "AVX2" or "AVX512".
std::string KernelIsa();

// True when every tensor is defined, on the CPU, and bfloat16 (bf16 autocast's products).
bool SupportsBf16(std::initializer_list<torch::Tensor> tensors);

// True when the SwiGLU kernels take these tensors: SupportsFused's or SupportsBf16's (computed
// in float32, stored in bfloat16).
bool SupportsSwiGlu(std::initializer_list<torch::Tensor> tensors);

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
// RopeSupports says whether the kernel takes them: x's strides such, and x, cos, sin of one
// float or double dtype, or x bfloat16 with float32 tables (bf16 autocast: the result is
// bfloat16, computed in float32).
bool RopeSupports(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
torch::Tensor Rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                   double sin_sign);

// The router's scores (router.h) in one pass per row: x (..., D), c (D) (the norm's gain
// times the router vector) -> {inv (...) = (mean over D of x^2 + eps)^(-1/2), s (...) =
// inv * (x . c)}.
std::pair<torch::Tensor, torch::Tensor> RouterScores(const torch::Tensor& x, const torch::Tensor& c,
                                                     double eps);

// Routed rows (blocks.h's routed layer): x (N, D) and M selected rows of it, rows (M) int64.
// RowPositions: pos (N) int64 with pos[rows[m]] = m and -1 on the rows not selected, or an
// undefined tensor when a row is selected twice (callers then take the composite path, whose
// index_add sums repeats). Rows out of [0, N) are an error.
torch::Tensor RowPositions(const torch::Tensor& rows, int64_t n);

// The routed residual update in one pass over x (N, D): out = x, and for each selected row
// out[rows[m]] += r[m] * (u1[m] + u2[m]) + p[m]. pos from RowPositions; r (M); u1, u2, p
// (M, D), u2 and p may be undefined (zero). -> out (N, D).
torch::Tensor ScatterScaledAdd(const torch::Tensor& x, const torch::Tensor& pos,
                               const torch::Tensor& r, const torch::Tensor& u1,
                               const torch::Tensor& u2, const torch::Tensor& p);

// Its gradients for the incoming g (N, D), one pass over the selected rows, with
// gm = g[rows[m]]: du = r[m] * gm (the gradient of u1 and u2 alike), dr[m] = gm . (u1 + u2)[m],
// dp = gm when want_dp (else undefined). -> {du (M, D), dr (M), dp (M, D)}.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> ScatterScaledAddBackward(
    const torch::Tensor& g, const torch::Tensor& rows, const torch::Tensor& r,
    const torch::Tensor& u1, const torch::Tensor& u2, bool want_dp);

// The gradient of a routed layer's input x (N, D) that reaches the router, the rows' gather
// and the residual update, in one pass over dx:
//   dx = g_pass + (g_rows scattered to rows) + alpha c + beta x
// (the router's term of router.h, per row n: alpha[n] c + beta[n] x[n]). g_pass (N, D),
// g_rows (M, D) and the router's term (alpha, beta (N), c (D), x (N, D)) may be undefined
// (zero); pos from RowPositions. -> dx (N, D) of `dtype`.
struct RowAffine {
  torch::Tensor alpha, beta, c, x;
};
torch::Tensor GatherRowsBackward(const torch::Tensor& g_pass, const torch::Tensor& g_rows,
                                 const torch::Tensor& pos, const RowAffine& router, int64_t d,
                                 torch::Dtype dtype);

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
  // bfloat16 in and out, computed in float32.
  void (*swiglu_forward_bf16)(const c10::BFloat16* a, const c10::BFloat16* b, c10::BFloat16* out,
                              int64_t n);
  void (*swiglu_backward_bf16)(const c10::BFloat16* g, const c10::BFloat16* a,
                               const c10::BFloat16* b, c10::BFloat16* da, c10::BFloat16* db,
                               int64_t n);
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
  // bfloat16 x and out, float32 tables and arithmetic.
  void (*rope_bf16)(const c10::BFloat16* x, int64_t x_row_stride, const float* cos,
                    const float* sin, bool per_batch_tables, float sin_sign, c10::BFloat16* out,
                    int64_t rows, int64_t t, int64_t heads, int64_t e);
  void (*router_scores_f)(const float* x, const float* c, double eps, float* inv, float* s,
                          int64_t rows, int64_t d);
  void (*router_scores_d)(const double* x, const double* c, double eps, double* inv, double* s,
                          int64_t rows, int64_t d);
  // Routed rows; u2, p, dp, g_pass and g_rows may be null.
  void (*scatter_scaled_add_f)(const float* x, const int64_t* pos, const float* r, const float* u1,
                               const float* u2, const float* p, float* out, int64_t n, int64_t d);
  void (*scatter_scaled_add_d)(const double* x, const int64_t* pos, const double* r,
                               const double* u1, const double* u2, const double* p, double* out,
                               int64_t n, int64_t d);
  void (*scatter_scaled_add_backward_f)(const float* g, const int64_t* rows, const float* r,
                                        const float* u1, const float* u2, float* du, float* dr,
                                        float* dp, int64_t m, int64_t d);
  void (*scatter_scaled_add_backward_d)(const double* g, const int64_t* rows, const double* r,
                                        const double* u1, const double* u2, double* du, double* dr,
                                        double* dp, int64_t m, int64_t d);
  void (*gather_rows_backward_f)(const float* g_pass, const float* g_rows, const int64_t* pos,
                                 const float* alpha, const float* beta, const float* c,
                                 const float* x, float* dx, int64_t n, int64_t d);
  void (*gather_rows_backward_d)(const double* g_pass, const double* g_rows, const int64_t* pos,
                                 const double* alpha, const double* beta, const double* c,
                                 const double* x, double* dx, int64_t n, int64_t d);
};
}  // namespace internal

}  // namespace xmod::cpu

#endif  // XMOD_MODEL_CPU_KERNELS_H_
