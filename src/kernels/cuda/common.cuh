#pragma once
// Device helpers shared by the CUDA kernels (internal): fp32 <-> storage conversions,
// warp and block reductions with a fixed order (so results do not depend on timing),
// and launch-size arithmetic.
#include <cuda_bf16.h>

#include <cstdint>

#include "zt/kernels/cuda/check.hpp"
#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda::detail {

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Sum / max over the 32 lanes of a warp (butterfly: every lane gets the result).
template <class V>
__device__ __forceinline__ V warp_sum(V v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread
// gets the result. `scratch` is __shared__ V[32]. Contains __syncthreads: call it from
// every thread of the block.
template <class V>
__device__ V block_sum(V v, V* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  V total = lane < warps ? scratch[lane] : V(0);
  return warp_sum(total);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(m);
}

// Blocks of `threads` covering n elements, capped (grid-stride loops cover the rest).
inline unsigned grid_for(int64_t n, int threads, int64_t cap = 65535) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned>(blocks);
}

}  // namespace zt::kernels::cuda::detail
