// RMSNorm on CUDA: see launch.h. Forward: one block a row, one read of x for the sum of
// squares and one for y. Backward: one block a row for dx (one reduction, m), and a second
// kernel for dw's partial sums, each thread one column over a chunk of rows, so that the
// reads stay coalesced and no atomic makes the sum vary from run to run.
#include "model/cuda/device_math.cuh"

namespace xmod::cuda {
namespace {

template <typename T>
__global__ void RmsNormForwardKernel(const T* x, const float* w, float eps, float* y, float* inv,
                                     int64_t d) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * d;
  float squares = 0.0f;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = ToFloat(xr[j]);
    squares += v * v;
  }
  const float r = rsqrtf(BlockSum(squares, shared) / static_cast<float>(d) + eps);
  if (threadIdx.x == 0) inv[row] = r;
  float* yr = y + row * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) yr[j] = ToFloat(xr[j]) * r * w[j];
}

template <typename T>
__global__ void RmsNormBackwardKernel(const float* dy, const T* x, const float* inv, const float* w,
                                      T* dx, int64_t d) {
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const float r = inv[row];
  const float* dyr = dy + row * d;
  const T* xr = x + row * d;
  float dot = 0.0f;  // sum over D of dy w xhat
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) dot += dyr[j] * w[j] * ToFloat(xr[j]) * r;
  const float m = BlockSum(dot, shared) / static_cast<float>(d);
  T* dxr = dx + row * d;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    dxr[j] = FromFloat<T>(r * (dyr[j] * w[j] - ToFloat(xr[j]) * r * m));
  }
}

// dw_partial[c, j] = sum over the rows of chunk c of dy x inv at column j.
template <typename T>
__global__ void RmsNormWeightGradKernel(const float* dy, const T* x, const float* inv,
                                        float* dw_partial, int64_t n, int64_t d,
                                        int64_t chunk_rows) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const int64_t first = static_cast<int64_t>(blockIdx.y) * chunk_rows;
  const int64_t last = first + chunk_rows < n ? first + chunk_rows : n;
  float sum = 0.0f;
  for (int64_t row = first; row < last; ++row)
    sum += dy[row * d + j] * ToFloat(x[row * d + j]) * inv[row];
  dw_partial[blockIdx.y * d + j] = sum;
}

template <typename T>
cudaError_t Forward(const void* x, const float* w, double eps, float* y, float* inv, int64_t n,
                    int64_t d, cudaStream_t stream) {
  RmsNormForwardKernel<T><<<static_cast<unsigned int>(n), RowThreads(d), 0, stream>>>(
      static_cast<const T*>(x), w, static_cast<float>(eps), y, inv, d);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Backward(const float* dy, const void* x, const float* inv, const float* w, void* dx,
                     float* dw_partial, int64_t n, int64_t d, int64_t chunk_rows,
                     cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  RmsNormBackwardKernel<T><<<static_cast<unsigned int>(n), RowThreads(d), 0, stream>>>(
      dy, xt, inv, w, static_cast<T*>(dx), d);
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) return status;
  const dim3 grid(static_cast<unsigned int>((d + 255) / 256),
                  static_cast<unsigned int>((n + chunk_rows - 1) / chunk_rows));
  RmsNormWeightGradKernel<T><<<grid, 256, 0, stream>>>(dy, xt, inv, dw_partial, n, d, chunk_rows);
  return cudaGetLastError();
}

}  // namespace

namespace launch {

cudaError_t RmsNormForward(Dtype dtype, const void* x, const float* w, double eps, float* y,
                           float* inv, int64_t n, int64_t d, cudaStream_t stream) {
  if (n == 0 || d == 0) return cudaSuccess;
  return dtype == Dtype::kBFloat16 ? Forward<__nv_bfloat16>(x, w, eps, y, inv, n, d, stream)
                                   : Forward<float>(x, w, eps, y, inv, n, d, stream);
}

cudaError_t RmsNormBackward(Dtype dtype, const float* dy, const void* x, const float* inv,
                            const float* w, void* dx, float* dw_partial, int64_t n, int64_t d,
                            int64_t chunk_rows, cudaStream_t stream) {
  if (n == 0 || d == 0) return cudaSuccess;
  return dtype == Dtype::kBFloat16
             ? Backward<__nv_bfloat16>(dy, x, inv, w, dx, dw_partial, n, d, chunk_rows, stream)
             : Backward<float>(dy, x, inv, w, dx, dw_partial, n, d, chunk_rows, stream);
}

}  // namespace launch
}  // namespace xmod::cuda
