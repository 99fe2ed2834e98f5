// Device-side helpers shared by xmod's CUDA kernels: loads and stores of float32 and bfloat16
// storage as float32 values, and block-wide reductions. Included by the .cu files only.
#ifndef XMOD_MODEL_CUDA_DEVICE_MATH_CUH_
#define XMOD_MODEL_CUDA_DEVICE_MATH_CUH_

#include <cuda_bf16.h>

#include <cstdint>

#include "model/cuda/launch.h"

namespace xmod::cuda {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// The sum of v over the block (every thread gets it). `shared` holds 32 floats; blockDim.x is
// a multiple of 32, at most 1024.
__device__ __forceinline__ float BlockSum(float v, float* shared) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  const float total = shared[0];
  __syncthreads();  // `shared` may be reused at once
  return total;
}

// Threads for a block over rows of width d: d rounded up to a warp, at most 256.
inline int RowThreads(int64_t d) {
  const int64_t warps = (d + 31) / 32;
  return static_cast<int>(warps >= 8 ? 256 : warps * 32);
}

// Blocks of 256 threads for a grid-stride loop over n elements, capped (each thread then
// takes several).
inline unsigned int GridFor(int64_t n) {
  const int64_t blocks = (n + 255) / 256;
  return static_cast<unsigned int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

}  // namespace xmod::cuda

#endif  // XMOD_MODEL_CUDA_DEVICE_MATH_CUH_
