// The next-token loss on CUDA: see launch.h. Forward reads each row of logits once, keeping a
// running maximum and the sum of exponentials below it per thread, then merges the threads'
// pairs; backward writes softmax - onehot in the logits' dtype in one pass. Neither makes the
// float32 copy of bfloat16 logits, nor the (N, V) log-softmax, that the composite saves.
#include <cmath>

#include "model/cuda/device_math.cuh"

namespace xmod::cuda {
namespace {

// Merges (m2, s2) into (m, s): sums of exp(x - m) over two sets, rebased to the larger maximum.
__device__ __forceinline__ void Merge(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float top = fmaxf(m, m2);
  s = s * expf(m - top) + s2 * expf(m2 - top);
  m = top;
}

template <typename T>
__global__ void LossForwardKernel(const T* logits, const int64_t* targets, float* lse,
                                  float* row_loss, int64_t v) {
  __shared__ float shared_m[32], shared_s[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * v;
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) {
    const float value = ToFloat(x[j]);
    // A NaN takes the new-maximum branch, so that it reaches the sum (s = NaN) and Merge,
    // as the composite's log-softmax gives NaN for a row holding one.
    if (!(value <= m)) {
      s = (m == -INFINITY ? 0.0f : s * expf(m - value)) + 1.0f;
      m = value;
    } else {
      s += expf(value - m);
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    Merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) {
    shared_m[warp] = m;
    shared_s[warp] = s;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < warps; ++i) Merge(m, s, shared_m[i], shared_s[i]);
    const float log_sum = m + logf(s);
    lse[row] = log_sum;
    const int64_t target = targets[row];
    row_loss[row] = target >= 0 && target < v ? log_sum - ToFloat(x[target]) : NAN;
  }
}

template <typename T>
__global__ void LossBackwardKernel(const T* logits, const int64_t* targets, const float* lse,
                                   const float* grad, float scale, T* dlogits, int64_t n,
                                   int64_t v) {
  const float g = grad[0] * scale;
  const int64_t total = n * v, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += stride) {
    const int64_t row = i / v, col = i - row * v;
    const float p = expf(ToFloat(logits[i]) - lse[row]);
    dlogits[i] = FromFloat<T>((p - (col == targets[row] ? 1.0f : 0.0f)) * g);
  }
}

template <typename T>
cudaError_t Forward(const void* logits, const int64_t* targets, float* lse, float* row_loss,
                    int64_t n, int64_t v, cudaStream_t stream) {
  LossForwardKernel<T><<<static_cast<unsigned int>(n), 256, 0, stream>>>(
      static_cast<const T*>(logits), targets, lse, row_loss, v);
  return cudaGetLastError();
}

template <typename T>
cudaError_t Backward(const void* logits, const int64_t* targets, const float* lse,
                     const float* grad, float scale, void* dlogits, int64_t n, int64_t v,
                     cudaStream_t stream) {
  LossBackwardKernel<T><<<GridFor(n * v), 256, 0, stream>>>(
      static_cast<const T*>(logits), targets, lse, grad, scale, static_cast<T*>(dlogits), n, v);
  return cudaGetLastError();
}

}  // namespace

namespace launch {

cudaError_t NextTokenLossForward(Dtype dtype, const void* logits, const int64_t* targets,
                                 float* lse, float* row_loss, int64_t n, int64_t v,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dtype == Dtype::kBFloat16
             ? Forward<__nv_bfloat16>(logits, targets, lse, row_loss, n, v, stream)
             : Forward<float>(logits, targets, lse, row_loss, n, v, stream);
}

cudaError_t NextTokenLossBackward(Dtype dtype, const void* logits, const int64_t* targets,
                                  const float* lse, const float* grad, float scale, void* dlogits,
                                  int64_t n, int64_t v, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return dtype == Dtype::kBFloat16
             ? Backward<__nv_bfloat16>(logits, targets, lse, grad, scale, dlogits, n, v, stream)
             : Backward<float>(logits, targets, lse, grad, scale, dlogits, n, v, stream);
}

}  // namespace launch
}  // namespace xmod::cuda
