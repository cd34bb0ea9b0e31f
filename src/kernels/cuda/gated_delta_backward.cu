// The backward of the chunked gated delta rule on the GPU, as the CPU reference's
// (src/kernels/cpu/gated_delta_backward.cpp): chunk by chunk from the last, each chunk
// recomputed from the state at its start (the forward's `starts`, or one forward pass
// without outputs into the scratch). With dO [L, Dv] and dS' [Dk, Dv] (the chunk's end state):
//   dVn = P^T dO + Kd dS'                  (Kd = diag(Et) K)
//   dS  = Q^T diag(E) dO + E_last dS' - W^T dVn
//   dP  = dO Vn^T                          (on P's lower triangle)
//   [dVb | dKbe] = M^-T [dVn | -dVn S^T]   (Vb = diag(beta) V, Kbe = diag(beta E) K)
//   dA  = -(dVb U^T + dKbe W^T)            (on A's strictly lower triangle)
// then through Dm, E, Et to gam; dg the reverse cumulative sum of dgam; q and k through the
// L2 normalisation.
//
// One block of 256 threads per (example, value head), at most kBlocks blocks (each takes
// pairs blockIdx.x, + kBlocks, ...). The [L, L] matrices A, P, dP, dA (4 x [64, 65] floats,
// 66,560 bytes) and the per-token vectors sit in shared memory; the [L, D] and [Dk, Dv]
// ones in a per-block slice of the scratch (global memory, L2-resident: 147,456 floats,
// 576 KB, at Dk = Dv = 128). dq and dk are written per value head to the scratch, then
// summed over the value heads of each key head in head order (no atomics).
#include <string>

#include "gated_delta_block.cuh"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/gated_delta.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int64_t kBlocks = 132;  // blocks of the backward (one wave on an H100)
constexpr int L64 = detail::kDeltaL, Ld = detail::kDeltaLd;

// The per-block workspace: 3 [Dk, Dv] + 6 [64, Dk] + 6 [64, Dv] floats.
__host__ __device__ int64_t block_floats(int64_t Dk, int64_t Dv) { return 3 * Dk * Dv + 6 * L64 * (Dk + Dv); }

// One block's matrices: row-major, leading dimension Dk or Dv (the [L, L] ones: Ld).
struct Work {
  float *S, *dS, *dS0;               // [Dk, Dv]
  float *Q, *K, *W, *dQ, *dK, *YW;   // [64, Dk]
  float *V, *dO, *U, *Vn, *dVn, *YU;  // [64, Dv]
  float *A, *P, *dP, *dA;            // [64, Ld] shared
};

__device__ Work work_of(float* ws, float* sm, int64_t Dk, int64_t Dv) {
  Work w;
  const int64_t DD = Dk * Dv, LK = L64 * Dk, LV = L64 * Dv;
  w.S = ws, w.dS = ws + DD, w.dS0 = ws + 2 * DD;
  float* k0 = ws + 3 * DD;
  w.Q = k0, w.K = k0 + LK, w.W = k0 + 2 * LK, w.dQ = k0 + 3 * LK, w.dK = k0 + 4 * LK,
  w.YW = k0 + 5 * LK;
  float* v0 = k0 + 6 * LK;
  w.V = v0, w.dO = v0 + LV, w.U = v0 + 2 * LV, w.Vn = v0 + 3 * LV, w.dVn = v0 + 4 * LV,
  w.YU = v0 + 5 * LV;
  w.A = sm, w.P = sm + L64 * Ld, w.dP = sm + 2 * L64 * Ld, w.dA = sm + 3 * L64 * Ld;
  return w;
}

// Recomputes chunk (t0, L) of (b, h) from its start state w.S: Q, K, V, dO, the vectors,
// A, P, U, W (the solve) and Vn. Ends synchronised.
template <class T>
__device__ void chunk_recompute(const Work& w, const detail::ChunkVecs& c, const DeltaShape& s,
                                const T* q, const T* k, const T* v, const float* g,
                                const float* beta, const T* dout, int64_t b, int64_t h,
                                int64_t t0, int L) {
  const int Dk = static_cast<int>(s.Dk), Dv = static_cast<int>(s.Dv);
  detail::chunk_load_qk(w.Q, Dk, w.K, Dk, c, s, q, k, g, beta, b, h, t0, L);
  detail::block_each(L, Dv, [&](int i, int j) {
    const int64_t row = ((b * s.T + t0 + i) * s.Hv + h) * Dv + j;
    w.V[i * Dv + j] = detail::to_f32(v[row]);
    w.dO[i * Dv + j] = detail::to_f32(dout[row]);
  });
  __syncthreads();
  detail::chunk_decays(c, L);
  __syncthreads();
  detail::chunk_a_p(w.A, w.P, w.Q, Dk, w.K, Dk, c, L, Dk);
  detail::block_each(L, Dv, [&](int i, int j) { w.U[i * Dv + j] = c.beta[i] * w.V[i * Dv + j]; });
  detail::block_each(L, Dk, [&](int i, int a) {
    w.W[i * Dk + a] = c.beta[i] * c.E[i] * w.K[i * Dk + a];
  });
  __syncthreads();
  detail::block_solve_lower(L, w.A, Ld, w.U, Dv, Dv, w.W, Dk, Dk);
  __syncthreads();
  detail::block_mm<false, false>(L, Dv, Dk, w.W, Dk, w.S, Dv, [&](int i, int j, float acc) {
    w.Vn[i * Dv + j] = w.U[i * Dv + j] - acc;
  });
  __syncthreads();
}

// One chunk's backward: w.dS holds dS' on entry, the start state's gradient on exit. dqh,
// dkh [B, T, Hv, Dk] float (this value head's dq, dk), dv, dg, dbeta: the outputs.
template <class T>
__device__ void chunk_backward(const Work& w, const detail::ChunkVecs& c, float* dgam,
                               float* dbeta_c, float* red, const DeltaShape& s, int64_t b,
                               int64_t h, int64_t t0, int L, float* dqh, float* dkh, T* dv,
                               float* dg, float* dbeta) {
  const int Dk = static_cast<int>(s.Dk), Dv = static_cast<int>(s.Dv);
  const float eL = c.E[L - 1];
  // dVn = P^T dO + diag(Et) K dS';  dQ = diag(E) dO S^T;  dK = diag(Et) Vn dS'^T;  dP = dO Vn^T
  detail::block_each(L, Dv, [&](int i, int j) {
    float a1 = 0.0f, a2 = 0.0f;
    for (int r = i; r < L; ++r) a1 += w.P[r * Ld + i] * w.dO[r * Dv + j];
    for (int a = 0; a < Dk; ++a) a2 += w.K[i * Dk + a] * w.dS[a * Dv + j];
    w.dVn[i * Dv + j] = a1 + c.Et[i] * a2;
  });
  detail::block_mm<false, true>(L, Dk, Dv, w.dO, Dv, w.S, Dv, [&](int i, int a, float acc) {
    w.dQ[i * Dk + a] = c.E[i] * acc;
  });
  detail::block_mm<false, true>(L, Dk, Dv, w.Vn, Dv, w.dS, Dv, [&](int i, int a, float acc) {
    w.dK[i * Dk + a] = c.Et[i] * acc;
  });
  detail::block_mm<false, true>(L, L, Dv, w.dO, Dv, w.Vn, Dv,
                                [&](int i, int j, float acc) { w.dP[i * Ld + j] = acc; });
  __syncthreads();
  // dS0 = Q^T diag(E) dO + E_last dS' - W^T dVn;  YU = dVn;  YW = -dVn S^T
  detail::block_each(Dk, Dv, [&](int a, int j) {
    float acc = 0.0f;
    for (int i = 0; i < L; ++i)
      acc += w.Q[i * Dk + a] * c.E[i] * w.dO[i * Dv + j] - w.W[i * Dk + a] * w.dVn[i * Dv + j];
    w.dS0[a * Dv + j] = acc + eL * w.dS[a * Dv + j];
  });
  detail::block_each(L, Dv, [&](int i, int j) { w.YU[i * Dv + j] = w.dVn[i * Dv + j]; });
  detail::block_mm<false, true>(L, Dk, Dv, w.dVn, Dv, w.S, Dv, [&](int i, int a, float acc) {
    w.YW[i * Dk + a] = -acc;
  });
  // dgam from diag(E) Q S, from S' (the kd terms) and from P = (Q K^T) o Dm
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    float qdq = 0.0f, kd = 0.0f, hp = 0.0f;
    for (int a = 0; a < Dk; ++a) {
      qdq += w.Q[i * Dk + a] * w.dQ[i * Dk + a];
      kd += w.K[i * Dk + a] * w.dK[i * Dk + a];
    }
    for (int j = 0; j < L; ++j) hp += w.dP[i * Ld + j] * w.P[i * Ld + j] - w.dP[j * Ld + i] * w.P[j * Ld + i];
    dgam[i] = qdq - kd + hp;
    dbeta_c[i] = kd;  // kept for the sum below
  }
  float sds = 0.0f;
  for (int64_t e = threadIdx.x; e < s.Dk * s.Dv; e += blockDim.x) sds += w.S[e] * w.dS[e];
  sds = detail::block_sum(sds, red);  // synchronises
  if (threadIdx.x == 0) {
    float kds = 0.0f;
    for (int i = 0; i < L; ++i) kds += dbeta_c[i];
    dgam[L - 1] += eL * sds + kds;
  }
  detail::block_each(L, L, [&](int i, int j) {  // dP o Dm on the lower triangle
    w.dP[i * Ld + j] = j <= i ? w.dP[i * Ld + j] * expf(c.gam[i] - c.gam[j]) : 0.0f;
  });
  detail::block_solve_upper_t(L, w.A, Ld, w.YU, Dv, Dv, w.YW, Dk, Dk);  // [dVb | dKbe]
  __syncthreads();
  // dQ += dP K;  dK += dP^T Q;  dA = -(dVb U^T + dKbe W^T) strictly lower
  detail::block_mm<false, false>(L, Dk, L, w.dP, Ld, w.K, Dk,
                                 [&](int i, int a, float acc) { w.dQ[i * Dk + a] += acc; });
  detail::block_mm<true, false>(L, Dk, L, w.dP, Ld, w.Q, Dk,
                                [&](int i, int a, float acc) { w.dK[i * Dk + a] += acc; });
  detail::block_each(L, L, [&](int i, int j) {
    float acc = 0.0f;
    if (j < i) {
      for (int x = 0; x < Dv; ++x) acc += w.YU[i * Dv + x] * w.U[j * Dv + x];
      for (int a = 0; a < Dk; ++a) acc += w.YW[i * Dk + a] * w.W[j * Dk + a];
    }
    w.dA[i * Ld + j] = -acc;
  });
  __syncthreads();
  // dbeta and dgam from Vb, Kbe and A's o Dm (HA = dA o A)
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    float kbe = 0.0f, vb = 0.0f, ha = 0.0f;
    for (int a = 0; a < Dk; ++a) kbe += w.YW[i * Dk + a] * w.K[i * Dk + a];
    for (int j = 0; j < Dv; ++j) vb += w.YU[i * Dv + j] * w.V[i * Dv + j];
    for (int j = 0; j < L; ++j) ha += w.dA[i * Ld + j] * w.A[i * Ld + j] - w.dA[j * Ld + i] * w.A[j * Ld + i];
    dbeta_c[i] = vb + c.E[i] * kbe;
    dgam[i] += c.beta[i] * c.E[i] * kbe + ha;
  }
  __syncthreads();
  detail::block_each(L, L, [&](int i, int j) {  // dA o Dm
    w.dA[i * Ld + j] = j < i ? w.dA[i * Ld + j] * expf(c.gam[i] - c.gam[j]) : 0.0f;
  });
  __syncthreads();
  // dK += diag(beta E) dKbe + diag(beta) dA K + (diag(beta) dA)^T K;  dP = dA o (K K^T)
  detail::block_each(L, Dk, [&](int i, int a) {
    float acc = c.beta[i] * c.E[i] * w.YW[i * Dk + a];
    for (int j = 0; j < L; ++j)
      acc += c.beta[i] * w.dA[i * Ld + j] * w.K[j * Dk + a] +
             c.beta[j] * w.dA[j * Ld + i] * w.K[j * Dk + a];
    w.dK[i * Dk + a] += acc;
  });
  detail::block_mm<false, true>(L, L, Dk, w.K, Dk, w.K, Dk, [&](int i, int j, float acc) {
    w.dP[i * Ld + j] = w.dA[i * Ld + j] * acc;
  });
  __syncthreads();
  // the outputs: dbeta, dg (the reverse cumulative sum of dgam), dv, dq and dk per value head
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    float acc = dbeta_c[i];
    for (int j = 0; j < L; ++j) acc += w.dP[i * Ld + j];
    dbeta[(b * s.T + t0 + i) * s.Hv + h] = acc;
  }
  if (threadIdx.x == 0) {
    float run = 0.0f;
    for (int i = L - 1; i >= 0; --i) {
      run += dgam[i];
      dg[(b * s.T + t0 + i) * s.Hv + h] = run;
    }
  }
  detail::block_each(L, Dv, [&](int i, int j) {
    dv[((b * s.T + t0 + i) * s.Hv + h) * Dv + j] = detail::from_f32<T>(c.beta[i] * w.YU[i * Dv + j]);
  });
  const float scale = rsqrtf(static_cast<float>(Dk));
  const int lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int i = threadIdx.x / 32; i < L; i += warps) {  // one warp per row
    float qd = 0.0f, kdk = 0.0f;
    for (int a = lane; a < Dk; a += 32) {
      qd += w.Q[i * Dk + a] * w.dQ[i * Dk + a];
      kdk += w.K[i * Dk + a] * w.dK[i * Dk + a];
    }
    qd = detail::warp_sum(qd), kdk = detail::warp_sum(kdk);
    const int64_t row = ((b * s.T + t0 + i) * s.Hv + h) * Dk;
    for (int a = lane; a < Dk; a += 32) {
      dqh[row + a] = c.rq[i] * (scale * w.dQ[i * Dk + a] - w.Q[i * Dk + a] * (qd / scale));
      dkh[row + a] = c.rk[i] * (w.dK[i * Dk + a] - w.K[i * Dk + a] * kdk);
    }
  }
  detail::block_each(Dk, Dv, [&](int a, int j) { w.dS[a * Dv + j] = w.dS0[a * Dv + j]; });
  __syncthreads();
}

template <class T>
__global__ void __launch_bounds__(detail::kDeltaThreads, 1)
    delta_backward_kernel(T* dv, float* dg, float* dbeta, float* dstate0, float* dqh,
                          float* dkh, float* ws_all, DeltaShape s, const T* q, const T* k,
                          const T* v, const float* g, const float* beta, const float* starts,
                          const T* dout, const float* dstate1) {
  extern __shared__ float smem[];  // A, P, dP, dA: 4 x [64, 65]
  __shared__ float vecs[8 * L64];
  __shared__ float red[32];
  const detail::ChunkVecs c{vecs, vecs + 64, vecs + 128, vecs + 192, vecs + 256, vecs + 320};
  float* dgam = vecs + 384;
  float* dbeta_c = vecs + 448;
  const Work w = work_of(ws_all + blockIdx.x * block_floats(s.Dk, s.Dv), smem, s.Dk, s.Dv);
  const int64_t DD = s.Dk * s.Dv, nC = (s.T + L64 - 1) / L64;
  for (int64_t bh = blockIdx.x; bh < s.B * s.Hv; bh += gridDim.x) {
    const int64_t b = bh / s.Hv, h = bh % s.Hv;
    for (int64_t e = threadIdx.x; e < DD; e += blockDim.x)
      w.dS[e] = dstate1 ? dstate1[bh * DD + e] : 0.0f;
    for (int64_t ci = nC - 1; ci >= 0; --ci) {
      const int64_t t0 = ci * L64;
      const int L = static_cast<int>(s.T - t0 < L64 ? s.T - t0 : L64);
      for (int64_t e = threadIdx.x; e < DD; e += blockDim.x)
        w.S[e] = starts[(bh * nC + ci) * DD + e];
      chunk_recompute(w, c, s, q, k, v, g, beta, dout, b, h, t0, L);
      chunk_backward(w, c, dgam, dbeta_c, red, s, b, h, t0, L, dqh, dkh, dv, dg, dbeta);
    }
    for (int64_t e = threadIdx.x; e < DD && dstate0; e += blockDim.x)
      dstate0[bh * DD + e] = w.dS[e];
    __syncthreads();
  }
}

// dq[b, t, hk] = the sum over j < Hv / Hk of dqh[b, t, hk (Hv / Hk) + j], j in order; dk alike.
template <class T>
__global__ void delta_dqk_sum_kernel(T* dq, T* dk, const float* dqh, const float* dkh,
                                     DeltaShape s) {
  const int64_t n = s.B * s.T * s.Hk * s.Dk, group = s.Hv / s.Hk;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    const int64_t a = i % s.Dk, r = i / s.Dk;  // r = (b T + t) Hk + hk
    const int64_t h0 = ((r / s.Hk) * s.Hv + (r % s.Hk) * group) * s.Dk + a;
    float sq = 0.0f, sk = 0.0f;
    for (int64_t j = 0; j < group; ++j) sq += dqh[h0 + j * s.Dk], sk += dkh[h0 + j * s.Dk];
    dq[i] = detail::from_f32<T>(sq);
    dk[i] = detail::from_f32<T>(sk);
  }
}

int64_t backward_blocks(const DeltaShape& s) { return s.B * s.Hv < kBlocks ? s.B * s.Hv : kBlocks; }

}  // namespace

int64_t gated_delta_backward_scratch(const DeltaShape& s, bool with_starts) {
  const int64_t nC = (s.T + L64 - 1) / L64;
  return (with_starts ? s.B * s.Hv * nC * s.Dk * s.Dv : 0) + 2 * s.B * s.T * s.Hv * s.Dk +
         backward_blocks(s) * block_floats(s.Dk, s.Dv);
}

template <class T>
void gated_delta_backward(T* dq, T* dk, T* dv, float* dg, float* dbeta, float* dstate0,
                          const DeltaShape& s, const T* q, const T* k, const T* v,
                          const float* g, const float* beta, const float* state0,
                          const float* starts, const T* dout, const float* dstate1,
                          float* scratch, cudaStream_t stream) {
  detail::check_delta_cuda(s, "gated_delta_backward");
  if (s.B == 0) return;
  if (!scratch)
    throw Error("gated_delta_backward: no scratch",
                "pass gated_delta_backward_scratch(s, starts == nullptr) floats");
  float* next = scratch;
  if (!starts) {  // the chunk-start states: one forward pass without outputs
    const int64_t nC = (s.T + L64 - 1) / L64;
    gated_delta_chunked_forward<T>(nullptr, nullptr, next, s, q, k, v, g, beta, state0, stream);
    starts = next;
    next += s.B * s.Hv * nC * s.Dk * s.Dv;
  }
  float* dqh = next;  // [B, T, Hv, Dk]
  float* dkh = dqh + s.B * s.T * s.Hv * s.Dk;
  float* ws = dkh + s.B * s.T * s.Hv * s.Dk;
  const size_t bytes = 4 * L64 * Ld * sizeof(float);
  detail::allow_smem(reinterpret_cast<const void*>(delta_backward_kernel<T>), bytes,
                     "gated_delta_backward");
  delta_backward_kernel<T><<<static_cast<unsigned>(backward_blocks(s)), detail::kDeltaThreads,
                             bytes, stream>>>(dv, dg, dbeta, dstate0, dqh, dkh, ws, s, q, k, v,
                                              g, beta, starts, dout, dstate1);
  ZT_CUDA_LAUNCH_CHECK("delta_backward_kernel");
  if (s.T == 0) return;
  delta_dqk_sum_kernel<T><<<detail::grid_for(s.B * s.T * s.Hk * s.Dk, 256), 256, 0, stream>>>(
      dq, dk, dqh, dkh, s);
  ZT_CUDA_LAUNCH_CHECK("delta_dqk_sum_kernel");
}

#define ZT_GATED_DELTA_CUDA_BWD(T)                                                             \
  template void gated_delta_backward<T>(T*, T*, T*, float*, float*, float*, const DeltaShape&, \
                                        const T*, const T*, const T*, const float*,            \
                                        const float*, const float*, const float*, const T*,    \
                                        const float*, float*, cudaStream_t);
ZT_GATED_DELTA_CUDA_BWD(float)
ZT_GATED_DELTA_CUDA_BWD(bf16_t)
#undef ZT_GATED_DELTA_CUDA_BWD

}  // namespace zt::kernels::cuda
