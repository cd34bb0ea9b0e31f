// The gated delta rule on the GPU, forward: the chunked form (chunks of 64 tokens, the UT
// transform's triangular solve, then the state passed from chunk to chunk; the algebra in
// gated_delta_block.cuh) and the recurrent form (one token after another: decoding). See
// zt/kernels/cuda/gated_delta.hpp.
//
// Chunked: one block of 256 threads per (example, value head, slice of 64 value columns).
// The state's value columns are independent (S' column j reads V's column j only), so a
// slice carries its own [Dk, 64] part of S through the chunks; the chunk's K, Q, A, P and W
// are computed again in each slice (Dv / 64 times: 2 at Dv = 128). Shared memory, fp32,
// rows padded by one float (L = 64 rows, n = min(Dv, 64) value columns):
//   K, Q then W   2 x [64, Dk + 1]     S   [Dk, n + 1]     A, P   2 x [64, 65]
//   U then Vn     [64, n + 1]          beta, gam, E, Et, rq, rk   6 x [64]
// At Dk = Dv = 128: (2 * 64 * 129 + 128 * 65 + 2 * 64 * 65 + 64 * 65 + 6 * 64) * 4 =
// 150,784 bytes, under sm_80's 166,912 bytes per block (sm_90: 232,448). The products run
// on the CUDA cores in fp32: the fp32 path must match the CPU reference to 1e-5, which
// tf32 tensor cores (10-bit mantissa) do not; see docs/cuda.md.
//
// Recurrent: one warp per (example, value head, slice of 32 value columns); lane j holds
// column j of the state [Dk, 32] in shared memory (16.9 KB at Dk = 128).
#include <string>

#include "gated_delta_block.cuh"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/gated_delta.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kSlice = 64;                                   // value columns per block
constexpr int kOutPerThread = kSlice * detail::kDeltaL / detail::kDeltaThreads;  // 16
constexpr int kRecSlice = 32;                                // value columns per warp

// The chunked forward's shared floats for Dk and n value columns.
int64_t forward_smem_floats(int64_t Dk, int64_t n) {
  constexpr int64_t L = detail::kDeltaL, Ld = detail::kDeltaLd;
  return 2 * L * (Dk + 1) + Dk * (n + 1) + 2 * L * Ld + L * (n + 1) + 6 * L;
}

template <class T>
__global__ void __launch_bounds__(detail::kDeltaThreads, 1)
    delta_chunked_forward_kernel(T* out, float* state1, float* starts, DeltaShape s, const T* q,
                                 const T* k, const T* v, const float* g, const float* beta,
                                 const float* state0) {
  extern __shared__ float smem[];
  const int Dk = static_cast<int>(s.Dk), Dv = static_cast<int>(s.Dv);
  const int64_t bh = blockIdx.x, b = bh / s.Hv, h = bh % s.Hv;
  const int j0 = blockIdx.y * kSlice, n = Dv - j0 < kSlice ? Dv - j0 : kSlice;
  const int ldk = Dk + 1, lds = (Dv < kSlice ? Dv : kSlice) + 1;
  float* K = smem;                         // [64, ldk]
  float* QW = K + detail::kDeltaL * ldk;   // [64, ldk] Q, then W
  float* S = QW + detail::kDeltaL * ldk;   // [Dk, lds] the state's columns j0 .. j0 + n - 1
  float* A = S + Dk * lds;                 // [64, 65]
  float* P = A + detail::kDeltaL * detail::kDeltaLd;  // [64, 65]
  float* U = P + detail::kDeltaL * detail::kDeltaLd;  // [64, lds] diag(beta) V, U, then Vn
  float* vec = U + detail::kDeltaL * lds;
  const detail::ChunkVecs c{vec, vec + 64, vec + 128, vec + 192, vec + 256, vec + 320};
  const int64_t DD = s.Dk * s.Dv;
  detail::block_each(Dk, n, [&](int a, int j) {
    S[a * lds + j] = state0 ? state0[bh * DD + a * Dv + j0 + j] : 0.0f;
  });
  const int64_t nC = (s.T + detail::kDeltaL - 1) / detail::kDeltaL;
  float oacc[kOutPerThread];
  for (int64_t ci = 0; ci < nC; ++ci) {
    const int64_t t0 = ci * detail::kDeltaL;
    const int L = static_cast<int>(s.T - t0 < detail::kDeltaL ? s.T - t0 : detail::kDeltaL);
    __syncthreads();  // S written; the previous chunk's buffers read
    if (starts)
      detail::block_each(Dk, n, [&](int a, int j) {
        starts[((bh * nC + ci) * Dk + a) * Dv + j0 + j] = S[a * lds + j];
      });
    detail::chunk_load_qk(QW, ldk, K, ldk, c, s, q, k, g, beta, b, h, t0, L);
    detail::block_each(L, n, [&](int i, int j) {
      const int64_t row = (b * s.T + t0 + i) * s.Hv + h;
      U[i * lds + j] = beta[row] * detail::to_f32(v[row * Dv + j0 + j]);
    });
    __syncthreads();
    detail::chunk_decays(c, L);
    __syncthreads();
    detail::chunk_a_p(A, out ? P : nullptr, QW, ldk, K, ldk, c, L, Dk);
    if (out) {  // diag(E) Q S, kept in registers until P Vn is added
#pragma unroll
      for (int r = 0; r < kOutPerThread; ++r) {
        const int idx = threadIdx.x + r * detail::kDeltaThreads, i = idx / n, j = idx % n;
        float acc = 0.0f;
        if (i < L)
          for (int a = 0; a < Dk; ++a) acc += QW[i * ldk + a] * S[a * lds + j];
        oacc[r] = i < L ? c.E[i] * acc : 0.0f;
      }
    }
    __syncthreads();
    detail::block_each(L, Dk, [&](int i, int a) {  // QW = diag(beta E) K
      QW[i * ldk + a] = c.beta[i] * c.E[i] * K[i * ldk + a];
    });
    __syncthreads();
    detail::block_solve_lower(L, A, detail::kDeltaLd, U, lds, n, QW, ldk, Dk);  // U, W
    __syncthreads();
    detail::block_mm<false, false>(L, n, Dk, QW, ldk, S, lds, [&](int i, int j, float acc) {
      U[i * lds + j] -= acc;  // Vn = U - W S
    });
    __syncthreads();
    if (out) {
#pragma unroll
      for (int r = 0; r < kOutPerThread; ++r) {
        const int idx = threadIdx.x + r * detail::kDeltaThreads, i = idx / n, j = idx % n;
        if (i >= L) continue;
        float acc = 0.0f;
        for (int m = 0; m <= i; ++m) acc += P[i * detail::kDeltaLd + m] * U[m * lds + j];
        out[((b * s.T + t0 + i) * s.Hv + h) * Dv + j0 + j] = detail::from_f32<T>(oacc[r] + acc);
      }
    }
    const float eL = c.E[L - 1];  // S' = E_last S + (diag(Et) K)^T Vn
    detail::block_each(Dk, n, [&](int a, int j) {
      float acc = 0.0f;
      for (int i = 0; i < L; ++i) acc += c.Et[i] * K[i * ldk + a] * U[i * lds + j];
      S[a * lds + j] = eL * S[a * lds + j] + acc;
    });
  }
  __syncthreads();
  if (state1)
    detail::block_each(Dk, n, [&](int a, int j) {
      state1[bh * DD + a * Dv + j0 + j] = S[a * lds + j];
    });
}

template <class T>
__global__ void __launch_bounds__(32)
    delta_recurrent_kernel(T* out, float* state1, DeltaShape s, const T* q, const T* k,
                           const T* v, const float* g, const float* beta, const float* state0) {
  __shared__ float S[kDeltaMaxDim * (kRecSlice + 1)];  // [Dk, 33]
  __shared__ float qs[kDeltaMaxDim], ks[kDeltaMaxDim];
  constexpr int ld = kRecSlice + 1;
  const int Dk = static_cast<int>(s.Dk), Dv = static_cast<int>(s.Dv);
  const int64_t bh = blockIdx.x, b = bh / s.Hv, h = bh % s.Hv, hk = h / (s.Hv / s.Hk);
  const int lane = threadIdx.x, col = blockIdx.y * kRecSlice + lane;
  const bool mine = col < Dv;
  const int64_t DD = s.Dk * s.Dv;
  for (int a = 0; a < Dk && mine; ++a)
    S[a * ld + lane] = state0 ? state0[bh * DD + a * Dv + col] : 0.0f;
  const float scale = rsqrtf(static_cast<float>(Dk));
  for (int64_t t = 0; t < s.T; ++t) {
    const int64_t row = ((b * s.T + t) * s.Hk + hk) * s.Dk, gi = (b * s.T + t) * s.Hv + h;
    const float rq = 1.0f / sqrtf(detail::warp_sum_squares(q + row, Dk) + detail::kDeltaL2Eps);
    const float rk = 1.0f / sqrtf(detail::warp_sum_squares(k + row, Dk) + detail::kDeltaL2Eps);
    for (int a = lane; a < Dk; a += 32) {
      qs[a] = detail::to_f32(q[row + a]) * (rq * scale);
      ks[a] = detail::to_f32(k[row + a]) * rk;
    }
    __syncwarp();
    if (mine) {  // S *= exp(g); delta = beta (v - k^T S); S += k delta; o = q^T S
      const float e = expf(g[gi]);
      float kS = 0.0f;
      for (int a = 0; a < Dk; ++a) {
        S[a * ld + lane] *= e;
        kS += ks[a] * S[a * ld + lane];
      }
      const float delta = beta[gi] * (detail::to_f32(v[gi * Dv + col]) - kS);
      float o = 0.0f;
      for (int a = 0; a < Dk; ++a) {
        S[a * ld + lane] += ks[a] * delta;
        o += qs[a] * S[a * ld + lane];
      }
      if (out) out[gi * Dv + col] = detail::from_f32<T>(o);
    }
    __syncwarp();
  }
  for (int a = 0; a < Dk && mine && state1; ++a) state1[bh * DD + a * Dv + col] = S[a * ld + lane];
}

}  // namespace

namespace detail {

void check_delta_cuda(const DeltaShape& s, const char* kernel) {
  const std::string sizes = std::string(kernel) + ": B " + std::to_string(s.B) + ", T " +
                            std::to_string(s.T) + ", Hk " + std::to_string(s.Hk) + ", Hv " +
                            std::to_string(s.Hv) + ", Dk " + std::to_string(s.Dk) + ", Dv " +
                            std::to_string(s.Dv) + ", chunk " + std::to_string(s.chunk);
  if (s.B < 0 || s.T < 0 || s.Hk < 1 || s.Hv < 1 || s.Hv % s.Hk != 0)
    throw Error(sizes, "heads must be positive and Hv a multiple of Hk");
  if (s.Dk < 1 || s.Dk > kDeltaMaxDim || s.Dv < 1 || s.Dv > kDeltaMaxDim)
    throw Error(sizes, "the GPU rule takes head dims 1 .. " + std::to_string(kDeltaMaxDim));
  if (s.chunk != kDeltaChunk)
    throw Error(sizes, "the GPU chunked rule computes chunks of " + std::to_string(kDeltaChunk) +
                           " tokens (transformers' chunk_size)");
}

void allow_smem(const void* kernel, size_t bytes, const char* name) {
  int dev = 0, optin = 0;
  ZT_CUDA_CHECK(cudaGetDevice(&dev));
  ZT_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (bytes > static_cast<size_t>(optin))
    throw Error(std::string(name) + ": " + std::to_string(bytes) +
                    " bytes of shared memory per block, the device allows " +
                    std::to_string(optin),
                "the GPU rule needs an sm_80 or newer device (163 KB per block)");
  ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
}

}  // namespace detail

template <class T>
void gated_delta_chunked_forward(T* out, float* state1, float* starts, const DeltaShape& s,
                                 const T* q, const T* k, const T* v, const float* g,
                                 const float* beta, const float* state0, cudaStream_t stream) {
  detail::check_delta_cuda(s, "gated_delta_chunked_forward");
  if (s.B == 0) return;
  const int64_t n = s.Dv < kSlice ? s.Dv : kSlice;
  const size_t bytes = static_cast<size_t>(forward_smem_floats(s.Dk, n)) * sizeof(float);
  detail::allow_smem(reinterpret_cast<const void*>(delta_chunked_forward_kernel<T>), bytes,
                     "gated_delta_chunked_forward");
  const dim3 grid(static_cast<unsigned>(s.B * s.Hv),
                  static_cast<unsigned>((s.Dv + kSlice - 1) / kSlice));
  delta_chunked_forward_kernel<T><<<grid, detail::kDeltaThreads, bytes, stream>>>(
      out, state1, starts, s, q, k, v, g, beta, state0);
  ZT_CUDA_LAUNCH_CHECK("delta_chunked_forward_kernel");
}

template <class T>
void gated_delta_recurrent_forward(T* out, float* state1, const DeltaShape& s, const T* q,
                                   const T* k, const T* v, const float* g, const float* beta,
                                   const float* state0, cudaStream_t stream) {
  detail::check_delta_cuda(s, "gated_delta_recurrent_forward");
  if (s.B == 0) return;
  const dim3 grid(static_cast<unsigned>(s.B * s.Hv),
                  static_cast<unsigned>((s.Dv + kRecSlice - 1) / kRecSlice));
  delta_recurrent_kernel<T><<<grid, 32, 0, stream>>>(out, state1, s, q, k, v, g, beta, state0);
  ZT_CUDA_LAUNCH_CHECK("delta_recurrent_kernel");
}

#define ZT_GATED_DELTA_CUDA_FWD(T)                                                             \
  template void gated_delta_chunked_forward<T>(T*, float*, float*, const DeltaShape&,         \
                                               const T*, const T*, const T*, const float*,    \
                                               const float*, const float*, cudaStream_t);     \
  template void gated_delta_recurrent_forward<T>(T*, float*, const DeltaShape&, const T*,     \
                                                 const T*, const T*, const float*,            \
                                                 const float*, const float*, cudaStream_t);
ZT_GATED_DELTA_CUDA_FWD(float)
ZT_GATED_DELTA_CUDA_FWD(bf16_t)
#undef ZT_GATED_DELTA_CUDA_FWD

}  // namespace zt::kernels::cuda
