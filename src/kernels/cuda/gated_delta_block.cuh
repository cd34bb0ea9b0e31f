#pragma once
// Block-level pieces of the chunked gated delta rule on the GPU (internal), shared by the
// forward (gated_delta.cu) and the backward (gated_delta_backward.cu). The algebra is the CPU
// reference's (src/kernels/cpu/gated_delta_chunk.hpp): for a chunk of L <= 64 tokens, Q, K the
// L2-normalised rows (Q times Dk^-1/2), gam the cumulative log decay, E = exp(gam),
// Et = exp(gam_last - gam), A the strictly lower diag(beta) (K K^T) o Dm, P the lower
// (Q K^T) o Dm with Dm[i, j] = exp(gam_i - gam_j), [U | W] = (I + A)^-1 [diag(beta) V |
// diag(beta E) K], Vn = U - W S, O = diag(E) Q S + P Vn, S' = E_last S + (diag(Et) K)^T Vn.
//
// Matrices are fp32, row-major with a leading dimension (shared memory pads rows by one
// float, so a column walk hits 32 different banks). Every helper is called by all threads of
// the block and splits its elements over them in a fixed way; none synchronises: the caller
// puts __syncthreads() between the steps. Each output element is one thread's sum in a fixed
// order, so results do not depend on timing.
#include <cstdint>

#include "common.cuh"
#include "zt/kernels/cuda/gated_delta.hpp"

namespace zt::kernels::cuda::detail {

inline constexpr int kDeltaThreads = 256;  // threads per block of the chunked kernels
inline constexpr int kDeltaL = 64;         // rows of a chunk (kDeltaChunk)
inline constexpr int kDeltaLd = kDeltaL + 1;  // leading dimension of an [L, L] matrix
inline constexpr float kDeltaL2Eps = 1e-6f;   // transformers' l2norm eps

// The GPU rule's shape preconditions (zt::Error naming the sizes: a caller's bug).
void check_delta_cuda(const DeltaShape& s, const char* kernel);
// Lets `kernel` take `bytes` of dynamic shared memory (an Error naming `name` where the
// device allows less per block).
void allow_smem(const void* kernel, size_t bytes, const char* name);

// out(i, j, acc) for each (i, j) of [M, N], acc = sum over k < K of a(i, k) b(k, j) in k order,
// a(i, k) = A[i lda + k] (TA: A[k lda + i]), b(k, j) = B[k ldb + j] (TB: B[j ldb + k]).
template <bool TA, bool TB, class F>
__device__ __forceinline__ void block_mm(int M, int N, int K, const float* A, int lda,
                                         const float* B, int ldb, F&& out) {
  for (int idx = threadIdx.x; idx < M * N; idx += blockDim.x) {
    const int i = idx / N, j = idx % N;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
      acc += (TA ? A[k * lda + i] : A[i * lda + k]) * (TB ? B[j * ldb + k] : B[k * ldb + j]);
    out(i, j, acc);
  }
}

// f(i, j) for each (i, j) of [M, N] (the same split as block_mm).
template <class F>
__device__ __forceinline__ void block_each(int M, int N, F&& f) {
  for (int idx = threadIdx.x; idx < M * N; idx += blockDim.x) f(idx / N, idx % N);
}

// X = (I + A)^-1 X in place (A strictly lower [L, L], lda): forward substitution, one thread
// per column of X (the columns [0, n0) of X0 [L, ld0], then [0, n1) of X1 [L, ld1]).
__device__ __forceinline__ void block_solve_lower(int L, const float* A, int lda, float* X0,
                                                  int ld0, int n0, float* X1, int ld1, int n1) {
  for (int c = threadIdx.x; c < n0 + n1; c += blockDim.x) {
    float* x = c < n0 ? X0 + c : X1 + (c - n0);
    const int ld = c < n0 ? ld0 : ld1;
    for (int i = 1; i < L; ++i) {
      float acc = x[i * ld];
      for (int j = 0; j < i; ++j) acc -= A[i * lda + j] * x[j * ld];
      x[i * ld] = acc;
    }
  }
}

// X = (I + A)^-T X in place: back substitution, as block_solve_lower.
__device__ __forceinline__ void block_solve_upper_t(int L, const float* A, int lda, float* X0,
                                                    int ld0, int n0, float* X1, int ld1,
                                                    int n1) {
  for (int c = threadIdx.x; c < n0 + n1; c += blockDim.x) {
    float* x = c < n0 ? X0 + c : X1 + (c - n0);
    const int ld = c < n0 ? ld0 : ld1;
    for (int i = L - 2; i >= 0; --i) {
      float acc = x[i * ld];
      for (int j = i + 1; j < L; ++j) acc -= A[j * lda + i] * x[j * ld];
      x[i * ld] = acc;
    }
  }
}

// The per-token vectors of a chunk: beta, gam, E = exp(gam), Et = exp(gam_last - gam), and
// the rows' inverse norms rq, rk (1 / sqrt(|row|^2 + eps)).
struct ChunkVecs {
  float* beta;
  float* gam;
  float* E;
  float* Et;
  float* rq;
  float* rk;
};

// Step 1 of a chunk (tokens t0 .. t0 + L - 1 of example b, value head h): Q [L, ldq], K
// [L, ldk] normalised (one warp per row), beta and gam (thread 0 sums g in token order).
// Then __syncthreads() and chunk_decays.
template <class T>
__device__ void chunk_load_qk(float* Q, int ldq, float* K, int ldk, const ChunkVecs& c,
                              const DeltaShape& s, const T* q, const T* k, const float* g,
                              const float* beta, int64_t b, int64_t h, int64_t t0, int L) {
  const int64_t hk = h / (s.Hv / s.Hk);
  const int Dk = static_cast<int>(s.Dk);
  const float scale = rsqrtf(static_cast<float>(Dk));
  const int warps = blockDim.x / 32, lane = threadIdx.x % 32;
  for (int i = threadIdx.x / 32; i < L; i += warps) {
    const int64_t row = ((b * s.T + t0 + i) * s.Hk + hk) * s.Dk;
    const float rq = 1.0f / sqrtf(warp_sum_squares(q + row, Dk) + kDeltaL2Eps);
    const float rk = 1.0f / sqrtf(warp_sum_squares(k + row, Dk) + kDeltaL2Eps);
    for (int a = lane; a < Dk; a += 32) {
      Q[i * ldq + a] = to_f32(q[row + a]) * (rq * scale);
      K[i * ldk + a] = to_f32(k[row + a]) * rk;
    }
    if (lane == 0) c.rq[i] = rq, c.rk[i] = rk;
  }
  if (threadIdx.x == 0) {
    float run = 0.0f;
    for (int i = 0; i < L; ++i) {
      const int64_t gi = (b * s.T + t0 + i) * s.Hv + h;
      run += g[gi];
      c.gam[i] = run;
      c.beta[i] = beta[gi];
    }
  }
}

// Step 2: E, Et from gam (after chunk_load_qk and a __syncthreads()).
__device__ __forceinline__ void chunk_decays(const ChunkVecs& c, int L) {
  for (int i = threadIdx.x; i < L; i += blockDim.x) {
    c.E[i] = expf(c.gam[i]);
    c.Et[i] = expf(c.gam[L - 1] - c.gam[i]);
  }
}

// A [L, kDeltaLd] = strictly lower diag(beta) (K K^T) o Dm; P (nullable) = lower (Q K^T) o Dm.
__device__ __forceinline__ void chunk_a_p(float* A, float* P, const float* Q, int ldq,
                                          const float* K, int ldk, const ChunkVecs& c, int L,
                                          int Dk) {
  block_mm<false, true>(L, L, Dk, K, ldk, K, ldk, [&](int i, int j, float acc) {
    A[i * kDeltaLd + j] = j < i ? c.beta[i] * acc * expf(c.gam[i] - c.gam[j]) : 0.0f;
  });
  if (P)
    block_mm<false, true>(L, L, Dk, Q, ldq, K, ldk, [&](int i, int j, float acc) {
      P[i * kDeltaLd + j] = j <= i ? acc * expf(c.gam[i] - c.gam[j]) : 0.0f;
    });
}

}  // namespace zt::kernels::cuda::detail
