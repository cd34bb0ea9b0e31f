// Causal GQA attention forward on the GPU, flash-attention-2 style: one block per
// (query tile, batch, head); key/value tiles stream through shared memory; each row keeps
// a running max m and sum l (online softmax) and its output accumulator in registers.
// Writes out and each row's log-sum-exp m + log(l) for the backward. With positions
// (packed examples) a query sees only keys from its example's first token on. With sinks
// (gpt-oss) each row's running max and sum start at the sink's logit and exp(0) = 1: the
// sink joins the softmax (and the lse) and adds no value. With a soft-cap each scaled score
// z becomes cap tanh(z / cap) before the mask and softmax (the sink is not capped).
#include <algorithm>
#include <cmath>

#include "attention_common.cuh"
#include "zt/kernels/cuda/attention.hpp"

namespace zt::kernels::cuda {
namespace {

using detail::AttnTile;
using detail::kAttnThreads;

// Thread layout: tile row r = tid / TPR, j0 = tid % TPR. The thread scores keys
// c = j0 + TPR * j of the key tile and owns output columns d = j0 + TPR * i of row r.
template <class T, int D>
__global__ void __launch_bounds__(kAttnThreads)
    attention_forward_kernel(T* out, float* lse, const T* q, const T* k, const T* v, int Tn,
                             int H, int G, float scale, const int32_t* pos, int window,
                             const T* sink, float cap, float inv_cap) {
  using Tile = AttnTile<D>;
  constexpr int BR = Tile::BR, BC = Tile::BC, TPR = Tile::TPR;
  constexpr int SC = BC / TPR;  // scores per thread per key tile
  constexpr int OC = D / TPR;   // output columns per thread
  extern __shared__ float smem[];
  float* Qs = smem;                  // [BR][D + 1]
  float* Ks = Qs + BR * (D + 1);     // [BC][D + 1]
  float* Vs = Ks + BC * (D + 1);     // [BC][D + 1]
  float* Ps = Vs + BC * (D + 1);     // [BR][BC + 1]

  const int b = blockIdx.y / H, h = blockIdx.y % H, g = h / (H / G);
  const int q0 = blockIdx.x * BR;
  const int r = threadIdx.x / TPR, j0 = threadIdx.x % TPR;
  const int tq = q0 + r;  // this thread's query position
  // first key of this query's example (0 without positions)
  const int lo = pos && tq < Tn ? tq - pos[static_cast<int64_t>(b) * Tn + tq] : 0;
  const T* qbase = q + (static_cast<int64_t>(b) * Tn * H + h) * D;  // position 0 of (b, h)
  const T* kbase = k + (static_cast<int64_t>(b) * Tn * G + g) * D;  // position 0 of (b, g)
  const T* vbase = v + (static_cast<int64_t>(b) * Tn * G + g) * D;

  detail::load_tile<T, D>(Qs, BR, qbase, static_cast<int64_t>(H) * D, q0, Tn);

  float o[OC];
#pragma unroll
  for (int i = 0; i < OC; ++i) o[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  if (sink) {  // the sink column: logit sink[h], weight exp(sink - m) = 1 at m = sink
    m = detail::to_f32(sink[h]);
    l = 1.0f;
  }

  const int last_key = min(Tn - 1, q0 + BR - 1);  // causal: no key after the tile's last query
  // sliding window: no key before the tile's first query's window (tile-aligned)
  const int first_key = window > 0 ? max(0, q0 - window + 1) / BC * BC : 0;
  for (int k0 = first_key; k0 <= last_key; k0 += BC) {
    __syncthreads();  // the previous tile's Ks, Vs, Ps are no longer read
    detail::load_tile<T, D>(Ks, BC, kbase, static_cast<int64_t>(G) * D, k0, Tn);
    detail::load_tile<T, D>(Vs, BC, vbase, static_cast<int64_t>(G) * D, k0, Tn);
    __syncthreads();

    float sc[SC];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < SC; ++j) {
      const int c = j0 + TPR * j;
      const int s = k0 + c;
      float acc = 0.0f;
#pragma unroll 8
      for (int d = 0; d < D; ++d) acc += Qs[r * (D + 1) + d] * Ks[c * (D + 1) + d];
      // lo <= s <= tq < Tn, and tq - window < s with a sliding window
      const bool valid = tq < Tn && s <= tq && s >= lo && (window <= 0 || s > tq - window);
      float dcap;
      sc[j] = valid ? detail::softcap_score(acc * scale, cap, inv_cap, &dcap) : -INFINITY;
      mx = fmaxf(mx, sc[j]);
    }
    mx = detail::row_max<TPR>(mx);
    const float m_new = fmaxf(m, mx);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // rows with nothing valid yet
    const float alpha = expf(m - m_use);                     // rescales the old l and o
    float psum = 0.0f;
#pragma unroll
    for (int j = 0; j < SC; ++j) {
      const float p = expf(sc[j] - m_use);  // 0 for masked scores
      Ps[r * (BC + 1) + j0 + TPR * j] = p;
      psum += p;
    }
    psum = detail::row_sum<TPR>(psum);
    l = l * alpha + psum;
    m = m_new;
#pragma unroll
    for (int i = 0; i < OC; ++i) o[i] *= alpha;
    __syncthreads();  // Ps complete
    for (int c = 0; c < BC; ++c) {
      const float p = Ps[r * (BC + 1) + c];
#pragma unroll
      for (int i = 0; i < OC; ++i) o[i] += p * Vs[c * (D + 1) + j0 + TPR * i];
    }
  }

  if (tq < Tn) {
    const float inv = 1.0f / l;
    T* orow = out + ((static_cast<int64_t>(b) * Tn + tq) * H + h) * D;  // [D]
#pragma unroll
    for (int i = 0; i < OC; ++i) orow[j0 + TPR * i] = detail::from_f32<T>(o[i] * inv);
    if (j0 == 0) lse[(static_cast<int64_t>(b) * H + h) * Tn + tq] = m + logf(l);
  }
}

}  // namespace

template <class T>
void attention_forward_zt(T* out, float* lse, const T* q, const T* k, const T* v, int64_t B,
                       int64_t Tn, int64_t H, int64_t G, int64_t D, cudaStream_t stream,
                       const int32_t* pos, int64_t window, const T* sink, double softcap) {
  if (B == 0 || Tn == 0) return;
  detail::check_attention_shape(B, Tn, H, G);
  detail::dispatch_head_dim(D, [&](auto dim) {
    constexpr int kD = decltype(dim)::value;
    using Tile = AttnTile<kD>;
    const size_t smem = Tile::kForwardSmem;
    auto kernel = attention_forward_kernel<T, kD>;
    detail::allow_shared(kernel, smem);
    const dim3 grid(static_cast<unsigned>((Tn + Tile::BR - 1) / Tile::BR),
                    static_cast<unsigned>(B * H));
    kernel<<<grid, kAttnThreads, smem, stream>>>(out, lse, q, k, v, static_cast<int>(Tn),
                                                 static_cast<int>(H), static_cast<int>(G),
                                                 static_cast<float>(1.0 / std::sqrt(double(kD))),
                                                 pos, static_cast<int>(std::min(window, Tn)),
                                                 sink, static_cast<float>(softcap),
                                                 softcap > 0 ? static_cast<float>(1.0 / softcap)
                                                             : 0.0f);
    ZT_CUDA_LAUNCH_CHECK("attention_forward_kernel");
  });
}

template void attention_forward_zt<float>(float*, float*, const float*, const float*,
                                          const float*, int64_t, int64_t, int64_t, int64_t,
                                          int64_t, cudaStream_t, const int32_t*, int64_t,
                                          const float*, double);
template void attention_forward_zt<bf16_t>(bf16_t*, float*, const bf16_t*, const bf16_t*,
                                           const bf16_t*, int64_t, int64_t, int64_t, int64_t,
                                           int64_t, cudaStream_t, const int32_t*, int64_t,
                                           const bf16_t*, double);

}  // namespace zt::kernels::cuda
