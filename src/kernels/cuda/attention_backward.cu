// Causal GQA attention backward on the GPU (flash-attention-2 style, no atomics).
// The probabilities are recomputed from the forward's log-sum-exp:
//   P[t, s] = exp(scale q_t . k_s - lse_t)                    (s <= t)
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - delta),  delta_t = dO_t . O_t
//   dQ = scale dS K,  dK = scale dS^T Q
// With a soft-cap the scores are cap tanh(z / cap), z = scale q_t . k_s: P is recomputed
// from them and dS picks up the factor 1 - tanh^2(z / cap).
// With sinks the forward's lse includes the sink, so P is right as recomputed and
//   dsink_h = -sum_(b, t) exp(sink_h - lse[b, h, t]) delta[b, h, t]
// (one block per head, a fixed summation order: deterministic).
// Three kernels (four with sinks): delta (one warp per row); dK and dV, one block per (key tile, batch,
// kv head) looping over the group's query heads and the query tiles at or after the key
// tile (so one block owns its dK, dV rows: no atomics); dQ, one block per (query tile,
// batch, head) looping over the key tiles up to the diagonal.
#include <algorithm>
#include <cmath>

#include "attention_common.cuh"
#include "zt/kernels/cuda/attention.hpp"

namespace zt::kernels::cuda {
namespace {

using detail::AttnTile;
using detail::kAttnThreads;

// delta [B, H, Tn] = rowsum(dout * out); one warp per (b, t, h) row.
template <class T>
__global__ void attention_delta_kernel(float* delta, const T* dout, const T* out, int64_t rows,
                                       int Tn, int H, int D) {
  const int warps = blockDim.x / 32;
  for (int64_t row = blockIdx.x * static_cast<int64_t>(warps) + threadIdx.x / 32; row < rows;
       row += static_cast<int64_t>(gridDim.x) * warps) {
    const T* a = dout + row * D;
    const T* o = out + row * D;
    float s = 0.0f;
    for (int d = threadIdx.x % 32; d < D; d += 32) s += detail::to_f32(a[d]) * detail::to_f32(o[d]);
    s = detail::warp_sum(s);
    if (threadIdx.x % 32 == 0) {
      const int64_t bt = row / H;  // b * Tn + t
      const int h = static_cast<int>(row % H);
      const int64_t b = bt / Tn;
      const int t = static_cast<int>(bt % Tn);
      delta[(b * H + h) * Tn + t] = s;
    }
  }
}

// dsink [H] (+)= -sum over (b, t) of p_sink delta; one block per head.
template <class T>
__global__ void attention_dsink_kernel(float* dsink, const T* sink, const float* lse,
                                       const float* delta, int B, int Tn, int H,
                                       bool accumulate) {
  __shared__ float scratch[32];
  const int h = blockIdx.x;
  const float s = detail::to_f32(sink[h]);
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < static_cast<int64_t>(B) * Tn; i += blockDim.x) {
    const int64_t row = (i / Tn * H + h) * Tn + i % Tn;  // [b, h, t]
    acc -= expf(s - lse[row]) * delta[row];
  }
  acc = detail::block_sum(acc, scratch);
  if (threadIdx.x == 0) dsink[h] = accumulate ? dsink[h] + acc : acc;
}

template <class T>
__device__ __forceinline__ void store_grad(T* p, float v, bool accumulate) {
  if (accumulate) v += detail::to_f32(*p);
  *p = detail::from_f32<T>(v);
}

// dK, dV for one key tile of one (batch, kv head). Thread layout: key row c = tid / TPR,
// j0 = tid % TPR; the thread scores query rows r = j0 + TPR * j and owns output columns
// d = j0 + TPR * i of key row c.
template <class T, int D>
__global__ void __launch_bounds__(kAttnThreads)
    attention_dkdv_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                          const float* lse, const float* delta, int Tn, int H, int G,
                          float scale, bool accumulate, const int32_t* pos, int window,
                          float cap, float inv_cap) {
  using Tile = AttnTile<D>;
  constexpr int BR = Tile::BR, BC = Tile::BC;
  constexpr int TPR = kAttnThreads / BC;
  constexpr int SC = BR / TPR;  // query rows scored per thread
  constexpr int OC = D / TPR;   // output columns per thread
  extern __shared__ float smem[];
  float* Ks = smem;                   // [BC][D + 1]
  float* Vs = Ks + BC * (D + 1);      // [BC][D + 1]
  float* Qs = Vs + BC * (D + 1);      // [BR][D + 1]
  float* dOs = Qs + BR * (D + 1);     // [BR][D + 1]
  float* Ts = dOs + BR * (D + 1);     // [BC][BR + 1]: P^T, then dS^T
  float* lse_s = Ts + BC * (BR + 1);  // [BR]
  float* delta_s = lse_s + BR;        // [BR]
  int* lo_s = reinterpret_cast<int*>(delta_s + BR);  // [BR] first key of each query's example

  const int per_group = H / G;
  const int b = blockIdx.y / G, g = blockIdx.y % G;
  const int k0 = blockIdx.x * BC;
  const int c = threadIdx.x / TPR, j0 = threadIdx.x % TPR;
  const int sk = k0 + c;  // this thread's key position
  const int64_t kv_stride = static_cast<int64_t>(G) * D;
  const T* kbase = k + (static_cast<int64_t>(b) * Tn * G + g) * D;
  const T* vbase = v + (static_cast<int64_t>(b) * Tn * G + g) * D;
  detail::load_tile<T, D>(Ks, BC, kbase, kv_stride, k0, Tn);
  detail::load_tile<T, D>(Vs, BC, vbase, kv_stride, k0, Tn);

  float dka[OC], dva[OC];
#pragma unroll
  for (int i = 0; i < OC; ++i) dka[i] = dva[i] = 0.0f;

  const int64_t q_stride = static_cast<int64_t>(H) * D;
  for (int h = g * per_group; h < (g + 1) * per_group; ++h) {
    const T* qbase = q + (static_cast<int64_t>(b) * Tn * H + h) * D;
    const T* obase = dout + (static_cast<int64_t>(b) * Tn * H + h) * D;
    const float* lse_bh = lse + (static_cast<int64_t>(b) * H + h) * Tn;
    const float* delta_bh = delta + (static_cast<int64_t>(b) * H + h) * Tn;
    // query tiles that can see this key tile (with a window: up to its last key + window - 1)
    const int q_end = window > 0 ? min(Tn, k0 + BC - 1 + window) : Tn;
    for (int q0 = (k0 / BR) * BR; q0 < q_end; q0 += BR) {
      __syncthreads();  // the previous query tile is no longer read
      detail::load_tile<T, D>(Qs, BR, qbase, q_stride, q0, Tn);
      detail::load_tile<T, D>(dOs, BR, obase, q_stride, q0, Tn);
      for (int rr = threadIdx.x; rr < BR; rr += blockDim.x) {
        const int t = q0 + rr;
        lse_s[rr] = t < Tn ? lse_bh[t] : 0.0f;
        delta_s[rr] = t < Tn ? delta_bh[t] : 0.0f;
        lo_s[rr] = pos && t < Tn ? t - pos[static_cast<int64_t>(b) * Tn + t] : 0;
      }
      __syncthreads();

      float ds[SC];
#pragma unroll
      for (int j = 0; j < SC; ++j) {
        const int r = j0 + TPR * j;
        const int t = q0 + r;
        float sdot = 0.0f, pdot = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; ++d) {
          sdot += Qs[r * (D + 1) + d] * Ks[c * (D + 1) + d];
          pdot += dOs[r * (D + 1) + d] * Vs[c * (D + 1) + d];
        }
        const bool valid = t < Tn && sk <= t && sk >= lo_s[r] &&  // lo_t <= sk <= t < Tn
                           (window <= 0 || sk > t - window);
        float dcap;
        const float z = detail::softcap_score(sdot * scale, cap, inv_cap, &dcap);
        const float p = valid ? expf(z - lse_s[r]) : 0.0f;
        ds[j] = p * (pdot - delta_s[r]) * dcap;
        Ts[c * (BR + 1) + r] = p;
      }
      __syncthreads();  // P^T complete
      for (int r = 0; r < BR; ++r) {
        const float p = Ts[c * (BR + 1) + r];
#pragma unroll
        for (int i = 0; i < OC; ++i) dva[i] += p * dOs[r * (D + 1) + j0 + TPR * i];
      }
      __syncthreads();  // P^T read; now dS^T
#pragma unroll
      for (int j = 0; j < SC; ++j) Ts[c * (BR + 1) + j0 + TPR * j] = ds[j];
      __syncthreads();
      for (int r = 0; r < BR; ++r) {
        const float d_s = Ts[c * (BR + 1) + r];
#pragma unroll
        for (int i = 0; i < OC; ++i) dka[i] += d_s * Qs[r * (D + 1) + j0 + TPR * i];
      }
    }
  }

  if (sk < Tn) {
    T* dkrow = dk + ((static_cast<int64_t>(b) * Tn + sk) * G + g) * D;  // [D]
    T* dvrow = dv + ((static_cast<int64_t>(b) * Tn + sk) * G + g) * D;  // [D]
#pragma unroll
    for (int i = 0; i < OC; ++i) {
      store_grad(dkrow + j0 + TPR * i, dka[i] * scale, accumulate);
      store_grad(dvrow + j0 + TPR * i, dva[i], accumulate);
    }
  }
}

// dQ for one query tile of one (batch, head). Thread layout as in the forward: row
// r = tid / TPR, j0 = tid % TPR, keys c = j0 + TPR * j, output columns d = j0 + TPR * i.
template <class T, int D>
__global__ void __launch_bounds__(kAttnThreads)
    attention_dq_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v,
                        const float* lse, const float* delta, int Tn, int H, int G, float scale,
                        bool accumulate, const int32_t* pos, int window, float cap,
                        float inv_cap) {
  using Tile = AttnTile<D>;
  constexpr int BR = Tile::BR, BC = Tile::BC, TPR = Tile::TPR;
  constexpr int SC = BC / TPR;
  constexpr int OC = D / TPR;
  extern __shared__ float smem[];
  float* Qs = smem;                 // [BR][D + 1]
  float* dOs = Qs + BR * (D + 1);   // [BR][D + 1]
  float* Ks = dOs + BR * (D + 1);   // [BC][D + 1]
  float* Vs = Ks + BC * (D + 1);    // [BC][D + 1]
  float* dSs = Vs + BC * (D + 1);   // [BR][BC + 1]

  const int b = blockIdx.y / H, h = blockIdx.y % H, g = h / (H / G);
  const int q0 = blockIdx.x * BR;
  const int r = threadIdx.x / TPR, j0 = threadIdx.x % TPR;
  const int tq = q0 + r;
  const int64_t q_stride = static_cast<int64_t>(H) * D;
  const int64_t kv_stride = static_cast<int64_t>(G) * D;
  detail::load_tile<T, D>(Qs, BR, q + (static_cast<int64_t>(b) * Tn * H + h) * D, q_stride, q0,
                          Tn);
  detail::load_tile<T, D>(dOs, BR, dout + (static_cast<int64_t>(b) * Tn * H + h) * D, q_stride,
                          q0, Tn);
  const T* kbase = k + (static_cast<int64_t>(b) * Tn * G + g) * D;
  const T* vbase = v + (static_cast<int64_t>(b) * Tn * G + g) * D;
  const int64_t bh = (static_cast<int64_t>(b) * H + h) * Tn;
  const float lse_r = tq < Tn ? lse[bh + tq] : 0.0f;
  const float delta_r = tq < Tn ? delta[bh + tq] : 0.0f;
  const int lo = pos && tq < Tn ? tq - pos[static_cast<int64_t>(b) * Tn + tq] : 0;

  float dqa[OC];
#pragma unroll
  for (int i = 0; i < OC; ++i) dqa[i] = 0.0f;

  const int last_key = min(Tn - 1, q0 + BR - 1);
  const int first_key = window > 0 ? max(0, q0 - window + 1) / BC * BC : 0;
  for (int k0 = first_key; k0 <= last_key; k0 += BC) {
    __syncthreads();
    detail::load_tile<T, D>(Ks, BC, kbase, kv_stride, k0, Tn);
    detail::load_tile<T, D>(Vs, BC, vbase, kv_stride, k0, Tn);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < SC; ++j) {
      const int c = j0 + TPR * j;
      const int s = k0 + c;
      float sdot = 0.0f, pdot = 0.0f;
#pragma unroll 8
      for (int d = 0; d < D; ++d) {
        sdot += Qs[r * (D + 1) + d] * Ks[c * (D + 1) + d];
        pdot += dOs[r * (D + 1) + d] * Vs[c * (D + 1) + d];
      }
      const bool valid = tq < Tn && s <= tq && s >= lo && (window <= 0 || s > tq - window);
      float dcap;
      const float z = detail::softcap_score(sdot * scale, cap, inv_cap, &dcap);
      const float p = valid ? expf(z - lse_r) : 0.0f;
      dSs[r * (BC + 1) + c] = p * (pdot - delta_r) * dcap;
    }
    __syncthreads();
    for (int c = 0; c < BC; ++c) {
      const float d_s = dSs[r * (BC + 1) + c];
#pragma unroll
      for (int i = 0; i < OC; ++i) dqa[i] += d_s * Ks[c * (D + 1) + j0 + TPR * i];
    }
  }

  if (tq < Tn) {
    T* dqrow = dq + ((static_cast<int64_t>(b) * Tn + tq) * H + h) * D;  // [D]
#pragma unroll
    for (int i = 0; i < OC; ++i) store_grad(dqrow + j0 + TPR * i, dqa[i] * scale, accumulate);
  }
}

}  // namespace

template <class T>
void attention_backward_zt(T* dq, T* dk, T* dv, float* delta, const T* dout, const T* out,
                        const T* q, const T* k, const T* v, const float* lse, int64_t B,
                        int64_t Tn, int64_t H, int64_t G, int64_t D, bool accumulate,
                        cudaStream_t stream, const int32_t* pos, int64_t window,
                        const T* sink, float* dsink, double softcap) {
  if (B == 0 || Tn == 0) return;
  detail::check_attention_shape(B, Tn, H, G);
  detail::dispatch_head_dim(D, [&](auto dim) {
    constexpr int kD = decltype(dim)::value;
    using Tile = AttnTile<kD>;
    constexpr int BR = Tile::BR, BC = Tile::BC;
    const int Ti = static_cast<int>(Tn), Hi = static_cast<int>(H), Gi = static_cast<int>(G);
    const float scale = static_cast<float>(1.0 / std::sqrt(double(kD)));
    const int win = static_cast<int>(std::min(window, Tn));
    const float cap = static_cast<float>(softcap);
    const float inv_cap = softcap > 0 ? static_cast<float>(1.0 / softcap) : 0.0f;

    const int64_t rows = B * Tn * H;
    attention_delta_kernel<T><<<detail::grid_for(rows, kAttnThreads / 32), kAttnThreads, 0,
                                stream>>>(delta, dout, out, rows, Ti, Hi, kD);
    ZT_CUDA_LAUNCH_CHECK("attention_delta_kernel");
    if (dsink) {
      ZT_CHECK(sink != nullptr, "attention_backward with dsink and no sink",
               "pass the forward's sink logits with their gradient");
      attention_dsink_kernel<T><<<static_cast<unsigned>(H), kAttnThreads, 0, stream>>>(
          dsink, sink, lse, delta, static_cast<int>(B), Ti, Hi, accumulate);
      ZT_CUDA_LAUNCH_CHECK("attention_dsink_kernel");
    }

    const size_t smem_kv = Tile::kDkDvSmem;
    auto kv_kernel = attention_dkdv_kernel<T, kD>;
    detail::allow_shared(kv_kernel, smem_kv);
    const dim3 kv_grid(static_cast<unsigned>((Tn + BC - 1) / BC), static_cast<unsigned>(B * G));
    kv_kernel<<<kv_grid, kAttnThreads, smem_kv, stream>>>(dk, dv, dout, q, k, v, lse, delta, Ti,
                                                          Hi, Gi, scale, accumulate, pos, win,
                                                          cap, inv_cap);
    ZT_CUDA_LAUNCH_CHECK("attention_dkdv_kernel");

    const size_t smem_q = Tile::kDqSmem;
    auto q_kernel = attention_dq_kernel<T, kD>;
    detail::allow_shared(q_kernel, smem_q);
    const dim3 q_grid(static_cast<unsigned>((Tn + BR - 1) / BR), static_cast<unsigned>(B * H));
    q_kernel<<<q_grid, kAttnThreads, smem_q, stream>>>(dq, dout, q, k, v, lse, delta, Ti, Hi, Gi,
                                                       scale, accumulate, pos, win, cap, inv_cap);
    ZT_CUDA_LAUNCH_CHECK("attention_dq_kernel");
  });
}

template void attention_backward_zt<float>(float*, float*, float*, float*, const float*,
                                        const float*, const float*, const float*, const float*,
                                        const float*, int64_t, int64_t, int64_t, int64_t, int64_t,
                                        bool, cudaStream_t, const int32_t*, int64_t,
                                        const float*, float*, double);
template void attention_backward_zt<bf16_t>(bf16_t*, bf16_t*, bf16_t*, float*, const bf16_t*,
                                         const bf16_t*, const bf16_t*, const bf16_t*,
                                         const bf16_t*, const float*, int64_t, int64_t, int64_t,
                                         int64_t, int64_t, bool, cudaStream_t, const int32_t*,
                                         int64_t, const bf16_t*, float*, double);

}  // namespace zt::kernels::cuda
