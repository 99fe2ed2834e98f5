// SwiGLU's gate on CUDA: see launch.h. One grid-stride pass forward (reads a and b, writes
// the product, rounded once), one backward (reads g, a and b, writes da and db), where ATen's
// composite runs silu, a product and, backward, five more passes with a rounding each.
#include "model/cuda/device_math.cuh"

namespace xmod::cuda {
namespace {

template <typename T>
__global__ void SwiGluForwardKernel(const T* a, const T* b, T* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]);
    const float s = 1.0f / (1.0f + expf(-x));  // sigmoid(a)
    out[i] = FromFloat<T>(x * s * y);
  }
}

template <typename T>
__global__ void SwiGluBackwardKernel(const T* g, const T* a, const T* b, T* da, T* db, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const float x = ToFloat(a[i]), y = ToFloat(b[i]), grad = ToFloat(g[i]);
    const float s = 1.0f / (1.0f + expf(-x));
    da[i] = FromFloat<T>(grad * y * s * (1.0f + x * (1.0f - s)));
    db[i] = FromFloat<T>(grad * x * s);
  }
}

template <typename T>
cudaError_t Forward(const void* a, const void* b, void* out, int64_t n, cudaStream_t stream) {
  SwiGluForwardKernel<T><<<GridFor(n), 256, 0, stream>>>(
      static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), n);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Backward(const void* g, const void* a, const void* b, void* da, void* db, int64_t n,
                     cudaStream_t stream) {
  SwiGluBackwardKernel<T><<<GridFor(n), 256, 0, stream>>>(
      static_cast<const T*>(g), static_cast<const T*>(a), static_cast<const T*>(b),
      static_cast<T*>(da), static_cast<T*>(db), n);
  return cudaGetLastError();
}

}  // namespace

namespace launch {

cudaError_t SwiGluForward(Dtype dtype, const void* a, const void* b, void* out, int64_t n,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dtype == Dtype::kBFloat16 ? Forward<__nv_bfloat16>(a, b, out, n, stream)
                                   : Forward<float>(a, b, out, n, stream);
}

cudaError_t SwiGluBackward(Dtype dtype, const void* g, const void* a, const void* b, void* da,
                           void* db, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dtype == Dtype::kBFloat16 ? Backward<__nv_bfloat16>(g, a, b, da, db, n, stream)
                                   : Backward<float>(g, a, b, da, db, n, stream);
}

}  // namespace launch
}  // namespace xmod::cuda
