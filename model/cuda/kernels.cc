// The LibTorch side of the CUDA kernels: see kernels.h. Each entry point records itself
// (RECORD_FUNCTION), so that a profile names the kernels where no ATen op stands for them.
#include "model/cuda/kernels.h"

#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <vector>

#include "model/cuda/launch.h"

namespace xmod::cuda {
namespace {

launch::Dtype DtypeOf(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(
      t.is_cuda() && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16),
      what, ": float32 or bfloat16 CUDA tensors, got ", t.scalar_type(), " on ", t.device());
  return t.scalar_type() == torch::kBFloat16 ? launch::Dtype::kBFloat16 : launch::Dtype::kFloat32;
}

cudaStream_t Stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

void Check(cudaError_t status, const char* what) {
  TORCH_CHECK(status == cudaSuccess, what, ": ", cudaGetErrorString(status));
}

void CheckFloatOn(const torch::Tensor& t, const torch::Tensor& like, const char* what) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat && t.device() == like.device(), what,
              ": a float32 tensor on ", like.device(), ", got ", t.scalar_type(), " on ",
              t.device());
}

}  // namespace

torch::Tensor SwiGluForward(const torch::Tensor& a_in, const torch::Tensor& b_in) {
  RECORD_FUNCTION("xmod::cuda::SwiGluForward", std::vector<c10::IValue>());
  const launch::Dtype dtype = DtypeOf(a_in, "SwiGluForward");
  TORCH_CHECK(a_in.sizes() == b_in.sizes() && a_in.scalar_type() == b_in.scalar_type() &&
                  a_in.device() == b_in.device(),
              "SwiGluForward: a ", a_in.sizes(), " and b ", b_in.sizes(), " differ");
  const c10::cuda::CUDAGuard on_device(a_in.device());
  const torch::Tensor a = a_in.contiguous(), b = b_in.contiguous();
  torch::Tensor out = torch::empty_like(a);
  Check(
      launch::SwiGluForward(dtype, a.data_ptr(), b.data_ptr(), out.data_ptr(), a.numel(), Stream()),
      "SwiGluForward");
  return out;
}

std::pair<torch::Tensor, torch::Tensor> SwiGluBackward(const torch::Tensor& g_in,
                                                       const torch::Tensor& a_in,
                                                       const torch::Tensor& b_in) {
  RECORD_FUNCTION("xmod::cuda::SwiGluBackward", std::vector<c10::IValue>());
  const launch::Dtype dtype = DtypeOf(a_in, "SwiGluBackward");
  TORCH_CHECK(a_in.sizes() == b_in.sizes() && g_in.sizes() == a_in.sizes(), "SwiGluBackward: g ",
              g_in.sizes(), ", a ", a_in.sizes(), ", b ", b_in.sizes());
  const c10::cuda::CUDAGuard on_device(a_in.device());
  const torch::Tensor a = a_in.contiguous(), b = b_in.to(a.scalar_type()).contiguous(),
                      g = g_in.to(a.scalar_type()).contiguous();
  torch::Tensor da = torch::empty_like(a), db = torch::empty_like(a);
  Check(launch::SwiGluBackward(dtype, g.data_ptr(), a.data_ptr(), b.data_ptr(), da.data_ptr(),
                               db.data_ptr(), a.numel(), Stream()),
        "SwiGluBackward");
  return {da, db};
}

std::pair<torch::Tensor, torch::Tensor> RmsNormForward(const torch::Tensor& x_in,
                                                       const torch::Tensor& w_in, double eps) {
  RECORD_FUNCTION("xmod::cuda::RmsNormForward", std::vector<c10::IValue>());
  const launch::Dtype dtype = DtypeOf(x_in, "RmsNormForward");
  CheckFloatOn(w_in, x_in, "RmsNormForward's gain");
  const int64_t d = x_in.size(-1), n = x_in.numel() / std::max<int64_t>(1, d);
  TORCH_CHECK(w_in.dim() == 1 && w_in.size(0) == d, "RmsNormForward: gain ", w_in.sizes(),
              " for rows of ", d);
  const c10::cuda::CUDAGuard on_device(x_in.device());
  const torch::Tensor x = x_in.contiguous(), w = w_in.contiguous();
  torch::Tensor y = torch::empty(x.sizes(), x.options().dtype(torch::kFloat));  // (..., D)
  std::vector<int64_t> rows = x.sizes().vec();
  rows.pop_back();
  torch::Tensor inv = torch::empty(rows, x.options().dtype(torch::kFloat));  // (...)
  Check(launch::RmsNormForward(dtype, x.data_ptr(), w.data_ptr<float>(), eps, y.data_ptr<float>(),
                               inv.data_ptr<float>(), n, d, Stream()),
        "RmsNormForward");
  return {y, inv};
}

std::pair<torch::Tensor, torch::Tensor> RmsNormBackward(const torch::Tensor& dy_in,
                                                        const torch::Tensor& x_in,
                                                        const torch::Tensor& inv_in,
                                                        const torch::Tensor& w_in) {
  RECORD_FUNCTION("xmod::cuda::RmsNormBackward", std::vector<c10::IValue>());
  const launch::Dtype dtype = DtypeOf(x_in, "RmsNormBackward");
  const int64_t d = x_in.size(-1), n = x_in.numel() / std::max<int64_t>(1, d);
  TORCH_CHECK(dy_in.sizes() == x_in.sizes() && inv_in.numel() == n && w_in.numel() == d,
              "RmsNormBackward: dy ", dy_in.sizes(), ", x ", x_in.sizes(), ", inv ", inv_in.sizes(),
              ", w ", w_in.sizes());
  const c10::cuda::CUDAGuard on_device(x_in.device());
  const torch::Tensor x = x_in.contiguous(), dy = dy_in.to(torch::kFloat).contiguous(),
                      inv = inv_in.contiguous(), w = w_in.contiguous();
  CheckFloatOn(inv, x, "RmsNormBackward's inv");
  CheckFloatOn(w, x, "RmsNormBackward's gain");
  // Chunks of rows for dw's partial sums: at most 65535 (a grid's second dimension), about
  // 256 rows each.
  const int64_t chunk_rows = std::max<int64_t>(256, (n + 65534) / 65535);
  // No rows: no chunk, so dw is the sum of nothing (zeros), not of an unwritten buffer.
  const int64_t chunks = (n + chunk_rows - 1) / chunk_rows;
  torch::Tensor dx = torch::empty_like(x);
  torch::Tensor partial = torch::empty({chunks, d}, x.options().dtype(torch::kFloat));
  Check(launch::RmsNormBackward(dtype, dy.data_ptr<float>(), x.data_ptr(), inv.data_ptr<float>(),
                                w.data_ptr<float>(), dx.data_ptr(), partial.data_ptr<float>(), n, d,
                                chunk_rows, Stream()),
        "RmsNormBackward");
  return {dx, partial.sum(/*dim=*/0)};
}

std::pair<torch::Tensor, torch::Tensor> NextTokenLossForward(const torch::Tensor& logits_in,
                                                             const torch::Tensor& targets_in) {
  RECORD_FUNCTION("xmod::cuda::NextTokenLossForward", std::vector<c10::IValue>());
  const launch::Dtype dtype = DtypeOf(logits_in, "NextTokenLossForward");
  TORCH_CHECK(
      logits_in.dim() == 2 && targets_in.dim() == 1 && targets_in.size(0) == logits_in.size(0) &&
          targets_in.scalar_type() == torch::kLong && targets_in.device() == logits_in.device(),
      "NextTokenLossForward: logits ", logits_in.sizes(), ", targets ", targets_in.sizes());
  const c10::cuda::CUDAGuard on_device(logits_in.device());
  const torch::Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const int64_t n = logits.size(0), v = logits.size(1);
  torch::Tensor lse = torch::empty({n}, logits.options().dtype(torch::kFloat));
  torch::Tensor row_loss = torch::empty({n}, logits.options().dtype(torch::kFloat));
  Check(launch::NextTokenLossForward(dtype, logits.data_ptr(), targets.data_ptr<int64_t>(),
                                     lse.data_ptr<float>(), row_loss.data_ptr<float>(), n, v,
                                     Stream()),
        "NextTokenLossForward");
  // The mean summed in float64, in a fixed order (ATen's reduction); no rows: NaN, as the
  // composite's mean of nothing.
  torch::Tensor loss = row_loss.to(torch::kFloat64).sum().div_(static_cast<double>(n));
  return {loss.to(torch::kFloat), lse};
}

torch::Tensor NextTokenLossBackward(const torch::Tensor& grad, const torch::Tensor& logits_in,
                                    const torch::Tensor& targets_in, const torch::Tensor& lse_in) {
  RECORD_FUNCTION("xmod::cuda::NextTokenLossBackward", std::vector<c10::IValue>());
  const launch::Dtype dtype = DtypeOf(logits_in, "NextTokenLossBackward");
  const int64_t n = logits_in.size(0), v = logits_in.size(1);
  TORCH_CHECK(grad.numel() == 1 && lse_in.numel() == n && targets_in.numel() == n,
              "NextTokenLossBackward: grad ", grad.sizes(), ", lse ", lse_in.sizes(), ", targets ",
              targets_in.sizes(), " for logits ", logits_in.sizes());
  const c10::cuda::CUDAGuard on_device(logits_in.device());
  const torch::Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous(),
                      lse = lse_in.contiguous();
  CheckFloatOn(lse, logits, "NextTokenLossBackward's lse");
  const torch::Tensor g = grad.to(logits.device(), torch::kFloat).reshape({1});  // stays there
  torch::Tensor dlogits = torch::empty_like(logits);
  Check(launch::NextTokenLossBackward(dtype, logits.data_ptr(), targets.data_ptr<int64_t>(),
                                      lse.data_ptr<float>(), g.data_ptr<float>(),
                                      1.0f / static_cast<float>(std::max<int64_t>(1, n)),
                                      dlogits.data_ptr(), n, v, Stream()),
        "NextTokenLossBackward");
  return dlogits;
}

}  // namespace xmod::cuda
