#pragma once
// Device helpers shared by the CUDA kernels (internal): fp32 <-> storage conversions,
// 128-bit packed loads and stores with a scalar tail, warp and block reductions with a
// fixed order (so results do not depend on timing), and launch-size arithmetic.
#include <cuda_bf16.h>

#include <cstdint>
#include <type_traits>

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

// ---- 128-bit packed access ------------------------------------------------------------
// A pack is kVec = 8 consecutive elements: one 16-byte load for bf16, two for fp32. The
// element-wise kernels walk [0, n) in packs when every pointer they touch is 16-byte
// aligned (aligned16 on the host picks the kernel), then the n % 8 tail one element at a
// time; unaligned pointers (an offset into a buffer) take the scalar walk throughout.
inline constexpr int kVec = 8;

// True when p is nullptr or 16-byte aligned, for every p.
template <class... P>
inline bool aligned16(const P*... p) {
  return ((reinterpret_cast<uintptr_t>(p) % 16 == 0) && ...);
}

// f[0..W) <- p[0..W) as fp32; W == kVec reads packed (p 16-byte aligned), W == 1 scalar.
template <int W, class T>
__device__ __forceinline__ void load_n(float (&f)[W], const T* p) {
  if constexpr (W == kVec && std::is_same_v<T, float>) {
    const float4 a = reinterpret_cast<const float4*>(p)[0];
    const float4 b = reinterpret_cast<const float4*>(p)[1];
    f[0] = a.x; f[1] = a.y; f[2] = a.z; f[3] = a.w;
    f[4] = b.x; f[5] = b.y; f[6] = b.z; f[7] = b.w;
  } else if constexpr (W == kVec && std::is_same_v<T, __nv_bfloat16>) {
    const int4 raw = *reinterpret_cast<const int4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) {
      const float2 x = __bfloat1622float2(h[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) f[i] = to_f32(p[i]);
  }
}

// p[0..W) <- f[0..W) rounded to T; packed as load_n.
template <int W, class T>
__device__ __forceinline__ void store_n(T* p, const float (&f)[W]) {
  if constexpr (W == kVec && std::is_same_v<T, float>) {
    reinterpret_cast<float4*>(p)[0] = make_float4(f[0], f[1], f[2], f[3]);
    reinterpret_cast<float4*>(p)[1] = make_float4(f[4], f[5], f[6], f[7]);
  } else if constexpr (W == kVec && std::is_same_v<T, __nv_bfloat16>) {
    union {
      int4 raw;
      __nv_bfloat162 h[kVec / 2];
    } u;
#pragma unroll
    for (int i = 0; i < kVec / 2; ++i) u.h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
    *reinterpret_cast<int4*>(p) = u.raw;
  } else {
#pragma unroll
    for (int i = 0; i < W; ++i) p[i] = from_f32<T>(f[i]);
  }
}

// Calls f(std::integral_constant<int, W>{}, i) for the elements [i, i + W) of [0, n) that
// thread `tid` of `nthreads` owns: packs of W = kVec at i % kVec == 0 when Vec, then the
// tail (or everything, when !Vec) with W = 1. The mapping depends only on (tid, nthreads),
// so two walks of one thread visit the same elements.
template <bool Vec, class F>
__device__ __forceinline__ void for_each_pack(int64_t n, int64_t tid, int64_t nthreads, F&& f) {
  int64_t done = 0;
  if constexpr (Vec) {
    const int64_t packs = n / kVec;
    for (int64_t p = tid; p < packs; p += nthreads) f(std::integral_constant<int, kVec>{}, p * kVec);
    done = packs * kVec;
  }
  for (int64_t i = done + tid; i < n; i += nthreads) f(std::integral_constant<int, 1>{}, i);
}

// The grid-stride form: every thread of the grid.
template <bool Vec, class F>
__device__ __forceinline__ void grid_for_each_pack(int64_t n, F&& f) {
  for_each_pack<Vec>(n, blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x,
                     static_cast<int64_t>(gridDim.x) * blockDim.x, f);
}

// Sum / max over the 32 lanes of a warp (butterfly: every lane gets the result).
template <class V>
__device__ __forceinline__ V warp_sum(V v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
// The rows of a warp-per-row kernel (blocks of `warps` warps, grid-stride): f(n) for each
// row n of [0, rows) this thread's warp owns.
template <class F>
__device__ __forceinline__ void for_each_warp_row(int64_t rows, int warps, F&& f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * warps;
  for (int64_t n = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / 32; n < rows;
       n += step)
    f(n);
}

// The sum of squares of row[0, D) over the 32 lanes of a warp (lane l reads l, l + 32, ...,
// a fixed order); every lane gets it.
template <class T>
__device__ __forceinline__ float warp_sum_squares(const T* row, int64_t D) {
  float ss = 0.0f;
  for (int64_t c = threadIdx.x % 32; c < D; c += 32) {
    const float v = to_f32(row[c]);
    ss += v * v;
  }
  return warp_sum(ss);
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

// Column sums in a fixed order, for a block of kColumnBlock = (32, 8) threads over the 32
// columns c0 .. c0 + 31 (c0 = blockIdx.x * 32; column_blocks(C) blocks cover C columns):
// the sum over the rows n in [begin, end) of term(n) for column c = c0 + threadIdx.x.
// Thread (cx, ry) sums rows begin + ry, begin + ry + 8, ...; the 8 partial sums are then
// added in ry order, so the result does not depend on timing. Returned on the threads
// with threadIdx.y == 0 (0 elsewhere); the caller writes it where c < C. Contains
// __syncthreads: call it once per kernel, from every thread of the block.
inline const dim3 kColumnBlock(32, 8);
template <class F>
__device__ __forceinline__ float column_sum(int64_t c, int64_t C, int64_t begin, int64_t end,
                                            F&& term) {
  __shared__ float part[8][33];
  float acc = 0.0f;
  if (c < C)
    for (int64_t n = begin + threadIdx.y; n < end; n += 8) acc += term(n);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  float s = 0.0f;
  if (threadIdx.y == 0)
    for (int i = 0; i < 8; ++i) s += part[i][threadIdx.x];
  return s;
}
__device__ __forceinline__ int64_t column_of_block() {
  return static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
}
inline unsigned column_blocks(int64_t C) { return static_cast<unsigned>((C + 31) / 32); }

// Blocks of `threads` covering n elements, capped (grid-stride loops cover the rest).
inline unsigned grid_for(int64_t n, int threads, int64_t cap = 65535) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > cap) blocks = cap;
  return static_cast<unsigned>(blocks);
}

// Blocks for a (grid_)for_each_pack walk of n elements: packed (vec) or scalar.
inline unsigned grid_for_packs(int64_t n, bool vec, int threads = 256) {
  return grid_for(vec ? n / kVec + n % kVec : n, threads);
}

}  // namespace zt::kernels::cuda::detail
