#pragma once
// Shared pieces of the attention kernels (internal): tile sizes per head dimension,
// loading a tile of head vectors into shared memory, and the head-dim dispatch.
//
// Layouts: q, out, dout [B, Tn, H, D]; k, v [B, Tn, G, D]; lse, delta [B, H, Tn].
// A tile is `rows` consecutive positions of one head, stored in shared memory as fp32
// rows of D + 1 floats (the pad puts consecutive rows in different banks).
#include <type_traits>

#include "common.cuh"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::kernels::cuda::detail {

inline constexpr int kAttnThreads = 256;

// Query rows per tile (BR) and keys per tile (BC): 64 for head dims up to 100, 32 up to
// 128, 16 above (256: Gemma 3 1b-12b). Shared memory of each kernel below (the dK/dV
// kernel is the largest): 4 * (4 * BR * (D + 1) + BR * (BR + 1) + 3 * BR) bytes, 118 KB at
// D = 100 (64-row tiles; 100 is not a multiple of the 8 threads a 32-row tile gives each
// row), 61 KB at D = 112, 69 KB at D = 128, 65.5 KB at D = 256 (16-row tiles: a 32-row tile
// would take 133 KB, past the 99 KB of sm_86 / sm_89). Checked below against sm_80's
// 163 KB (the static_assert) and named when a launch fails (allow_shared).
template <int D>
struct AttnTile {
  static constexpr int BR = D > 128 ? 16 : D > 100 ? 32 : 64;
  static constexpr int BC = BR;
  static constexpr int TPR = kAttnThreads / BR;  // threads sharing one tile row
  static_assert(32 % TPR == 0, "a tile row's threads must sit in one warp");
  static_assert(D % TPR == 0 && BC % TPR == 0, "columns split evenly over a row's threads");
  // Dynamic shared memory (bytes) of the forward, dK/dV and dQ kernels.
  static constexpr size_t kForwardSmem =
      sizeof(float) * ((BR + 2 * BC) * (D + 1) + BR * (BC + 1));
  static constexpr size_t kDkDvSmem =
      sizeof(float) * (2 * BC * (D + 1) + 2 * BR * (D + 1) + BC * (BR + 1) + 3 * BR);
  static constexpr size_t kDqSmem =
      sizeof(float) * (2 * BR * (D + 1) + 2 * BC * (D + 1) + BR * (BC + 1));
  static_assert(kForwardSmem <= 163 * 1024 && kDkDvSmem <= 163 * 1024 && kDqSmem <= 163 * 1024,
                "an attention kernel's shared memory must fit sm_80's 163 KB per block");
};

// Attention logit soft-capping in the kernels: the scaled score z becomes cap tanh(z / cap)
// (inv_cap = 1 / cap; cap 0: none); *dcap gets its derivative 1 - tanh^2(z / cap).
__device__ __forceinline__ float softcap_score(float z, float cap, float inv_cap, float* dcap) {
  if (cap <= 0.0f) {
    *dcap = 1.0f;
    return z;
  }
  const float t = tanhf(z * inv_cap);
  *dcap = 1.0f - t * t;
  return cap * t;
}

// dst [rows][D + 1] <- rows t0 .. t0 + rows - 1 of one head (zeros past Tn).
// base points at position 0 of this (batch, head); consecutive positions are `stride`
// elements apart (heads * D).
template <class T, int D>
__device__ __forceinline__ void load_tile(float* dst, int rows, const T* base, int64_t stride,
                                          int t0, int Tn) {
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int rr = idx / D, d = idx % D;
    const int t = t0 + rr;
    dst[rr * (D + 1) + d] = t < Tn ? to_f32(base[static_cast<int64_t>(t) * stride + d]) : 0.0f;
  }
}

// Sum / max over the TPR consecutive lanes that share a tile row.
template <int TPR>
__device__ __forceinline__ float row_sum(float v) {
#pragma unroll
  for (int o = TPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <int TPR>
__device__ __forceinline__ float row_max(float v) {
#pragma unroll
  for (int o = TPR / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Raises a kernel's dynamic shared-memory limit when it needs more than the default 48 KB.
template <class Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(bytes)));
}

// Calls f(std::integral_constant<int, D>{}) for a head dim of attention_head_dims()
// (keep the two lists equal: attention.cpp); InputError otherwise.
template <class F>
void dispatch_head_dim(int64_t D, F&& f) {
  switch (D) {
    case 16: f(std::integral_constant<int, 16>{}); return;
    case 32: f(std::integral_constant<int, 32>{}); return;
    case 48: f(std::integral_constant<int, 48>{}); return;
    case 64: f(std::integral_constant<int, 64>{}); return;
    case 80: f(std::integral_constant<int, 80>{}); return;
    case 96: f(std::integral_constant<int, 96>{}); return;
    case 100: f(std::integral_constant<int, 100>{}); return;  // OpenLLaMA-3B
    case 112: f(std::integral_constant<int, 112>{}); return;
    case 128: f(std::integral_constant<int, 128>{}); return;
    case 256: f(std::integral_constant<int, 256>{}); return;  // Gemma 3 1b, 4b, 12b
    default: break;
  }
  throw InputError(strf("attention head dim %lld is not supported by the CUDA kernels",
                        static_cast<long long>(D)),
                   "zt's CUDA attention is compiled for head dims 16, 32, 48, 64, 80, 96, 100, "
                   "112, 128 and 256 (hidden / heads); choose heads so that hidden / heads is "
                   "one of them.");
}

// Checks shapes the launchers rely on (grid limits, H % G).
inline void check_attention_shape(int64_t B, int64_t Tn, int64_t H, int64_t G) {
  ZT_CHECK(G > 0 && H % G == 0, strf("attention with H=%lld, G=%lld", static_cast<long long>(H),
                                     static_cast<long long>(G)),
           "the query heads must be a multiple of the kv heads");
  ZT_CHECK(B * H <= 65535 && Tn < (int64_t{1} << 30),
           strf("attention with B*H=%lld, T=%lld", static_cast<long long>(B * H),
                static_cast<long long>(Tn)),
           "batch x heads must be at most 65535 (grid y) for the CUDA attention kernels");
}

}  // namespace zt::kernels::cuda::detail
