// Gated DeltaNet's small ops around the rule on the GPU, forward and backward: the causal
// depthwise conv1d + SiLU (and the conv's past for decoding), the decay g and beta, the gated
// RMSNorm. Parameter gradients: fixed row chunks to a scratch (detail::column_sum's order),
// then added in chunk order. See zt/kernels/cuda/gated_delta.hpp.
#include <string>

#include "common.cuh"
#include "zt/core/error.hpp"
#include "zt/kernels/cuda/gated_delta.hpp"

namespace zt::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
// torch's softplus (beta 1, threshold 20) and its derivative
__device__ __forceinline__ float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
__device__ __forceinline__ float softplus_gradf(float x) { return x > 20.0f ? 1.0f : sigmoidf(x); }

// ---- conv --------------------------------------------------------------------------------

// The conv's input at token t of example b, channel c (t < 0: the past, zeros without one).
template <class T>
__device__ __forceinline__ float conv_in(const T* x, const T* past, int64_t Tn, int64_t C,
                                         int64_t K, int64_t b, int64_t t, int64_t c) {
  if (t >= 0) return detail::to_f32(x[(b * Tn + t) * C + c]);
  return past ? detail::to_f32(past[(b * C + c) * (K - 1) + (K - 1 + t)]) : 0.0f;
}

// The conv before the SiLU at (b, t, c): sum_j w[c, j] in(t - (K - 1) + j).
template <class T>
__device__ __forceinline__ float conv_pre(const T* x, const T* w, const T* past, int64_t Tn,
                                          int64_t C, int64_t K, int64_t b, int64_t t,
                                          int64_t c) {
  float acc = 0.0f;
  for (int64_t j = 0; j < K; ++j)
    acc += detail::to_f32(w[c * K + j]) * conv_in(x, past, Tn, C, K, b, t - (K - 1) + j, c);
  return acc;
}

// The gradient before the SiLU at (b, t, c), 0 outside [0, Tn).
template <class T>
__device__ __forceinline__ float conv_dpre(const T* dy, const T* x, const T* w, const T* past,
                                           int64_t Tn, int64_t C, int64_t K, int64_t b,
                                           int64_t t, int64_t c) {
  if (t < 0 || t >= Tn) return 0.0f;
  const float p = conv_pre(x, w, past, Tn, C, K, b, t, c), sg = sigmoidf(p);
  return detail::to_f32(dy[(b * Tn + t) * C + c]) * sg * (1.0f + p * (1.0f - sg));
}

template <class T>
__global__ void conv_forward_kernel(T* y, const T* x, const T* w, const T* past, int64_t B,
                                    int64_t Tn, int64_t C, int64_t K) {
  const int64_t n = B * Tn * C, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    const int64_t c = i % C, bt = i / C;
    const float p = conv_pre(x, w, past, Tn, C, K, bt / Tn, bt % Tn, c);
    y[i] = detail::from_f32<T>(p * sigmoidf(p));
  }
}

// Element i of [B, Tn + K - 1, C] in the input's time (t = i's time - (K - 1): t < 0 is the
// past): d in(t) = sum_j w[c, j] dpre(t + (K - 1) - j); written to dx (t >= 0) or dpast.
template <class T>
__global__ void conv_dx_kernel(T* dx, T* dpast, const T* dy, const T* x, const T* w,
                               const T* past, int64_t B, int64_t Tn, int64_t C, int64_t K) {
  const int64_t Tp = Tn + K - 1, n = B * Tp * C;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    const int64_t c = i % C, b = i / C / Tp, t = (i / C) % Tp - (K - 1);
    if (t < 0 ? !dpast : !dx) continue;
    float acc = 0.0f;
    for (int64_t j = 0; j < K; ++j)
      acc += detail::to_f32(w[c * K + j]) *
             conv_dpre(dy, x, w, past, Tn, C, K, b, t + (K - 1) - j, c);
    if (t >= 0)
      dx[(b * Tn + t) * C + c] = detail::from_f32<T>(acc);
    else
      dpast[(b * C + c) * (K - 1) + (K - 1 + t)] = detail::from_f32<T>(acc);
  }
}

// Term (n, c * K + j) of dw: dpre(b, t, c) in(b, t - (K - 1) + j, c), n = b * Tn + t.
template <class T>
struct ConvDwTerm {
  const T *dy, *x, *w, *past;
  int64_t Tn, C, K;
  __device__ float operator()(int64_t n, int64_t cj) const {
    const int64_t b = n / Tn, t = n % Tn, c = cj / K, j = cj % K;
    return conv_dpre(dy, x, w, past, Tn, C, K, b, t, c) *
           conv_in(x, past, Tn, C, K, b, t - (K - 1) + j, c);
  }
};

// One thread per (b, c): its K - 1 entries in increasing order, each read (Tn entries ahead
// in [past | x]) before it is written, so past_out may equal past.
template <class T>
__global__ void conv_update_past_kernel(T* past_out, const T* past, const T* x, int64_t B,
                                        int64_t Tn, int64_t C, int64_t K) {
  const int64_t n = B * C, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t bc = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; bc < n;
       bc += step) {
    const int64_t b = bc / C, c = bc % C;
    for (int64_t i = 0; i < K - 1; ++i) {
      const int64_t t = Tn - (K - 1) + i;  // the entry's time in x's frame
      past_out[bc * (K - 1) + i] = detail::from_f32<T>(conv_in(x, past, Tn, C, K, b, t, c));
    }
  }
}

// ---- parameter gradients ----------------------------------------------------------------
// partial[k, c] = the sum over the rows n of chunk k (blockIdx.y) of term(n, c), c < ncols
// (detail::column_sum's fixed order).
template <class Term>
__global__ void column_partial_kernel(float* partial, Term term, int64_t ncols, int64_t rows,
                                      int64_t chunk) {
  const int64_t c = detail::column_of_block(), k = blockIdx.y;
  const int64_t end = (k + 1) * chunk < rows ? (k + 1) * chunk : rows;
  const float s = detail::column_sum(c, ncols, k * chunk, end,
                                     [&](int64_t n) { return term(n, c); });
  if (threadIdx.y == 0 && c < ncols) partial[k * ncols + c] = s;
}

// dst0[c] (c < n0), dst1[c - n0] (c >= n0; each nullptr: none) += sum_k partial[k, c], k in order.
template <class G>
__global__ void partials_final_kernel(G* dst0, G* dst1, const float* partial, int64_t n0,
                                      int64_t n) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= n) return;
  G* dst = c < n0 ? (dst0 ? dst0 + c : nullptr) : (dst1 ? dst1 + (c - n0) : nullptr);
  if (!dst) return;
  float s = 0.0f;
  for (int k = 0; k < kDeltaPartials; ++k) s += partial[k * n + c];
  *dst = detail::from_f32<G>(detail::to_f32(*dst) + s);
}

// The parameters' gradients dst0 [n0], dst1 [ncols - n0] += the sums over rows of term.
template <class G, class Term>
void param_grads(G* dst0, G* dst1, int64_t n0, const Term& term, int64_t ncols, int64_t rows,
                 float* partial, const char* kernel, const char* size, cudaStream_t stream) {
  if (!partial)
    throw Error(std::string(kernel) + ": no scratch for the parameters' gradients",
                std::string("pass partial [") + size + "] floats");
  const dim3 grid(detail::column_blocks(ncols), kDeltaPartials);
  const int64_t chunk = (rows + kDeltaPartials - 1) / kDeltaPartials;  // rows per partial
  column_partial_kernel<Term><<<grid, detail::kColumnBlock, 0, stream>>>(partial, term, ncols,
                                                                          rows, chunk);
  ZT_CUDA_LAUNCH_CHECK("column_partial_kernel");
  partials_final_kernel<G><<<detail::grid_for(ncols, kThreads), kThreads, 0, stream>>>(
      dst0, dst1, partial, n0, ncols);
  ZT_CUDA_LAUNCH_CHECK("partials_final_kernel");
}

void check_conv(int64_t B, int64_t Tn, int64_t C, int64_t K) {
  if (B < 0 || Tn < 0 || C < 1 || K < 1 || K > kDeltaMaxConvK)
    throw Error("causal_conv1d_silu: B " + std::to_string(B) + ", T " + std::to_string(Tn) +
                    ", channels " + std::to_string(C) + ", kernel " + std::to_string(K),
                "the GPU conv takes positive channels and kernel sizes 1 .. " +
                    std::to_string(kDeltaMaxConvK));
}

// ---- the decay and beta --------------------------------------------------------------------

template <class T>
__global__ void gates_forward_kernel(float* g, float* beta, const T* a, const T* b,
                                     const T* A_log, const T* dt_bias, int64_t N, int64_t Hv) {
  const int64_t n = N * Hv, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    const int64_t h = i % Hv;
    if (g)
      g[i] = -expf(detail::to_f32(A_log[h])) *
             softplusf(detail::to_f32(a[i]) + detail::to_f32(dt_bias[h]));
    if (beta) beta[i] = sigmoidf(detail::to_f32(b[i]));
  }
}

template <class T>
__global__ void gates_backward_kernel(T* da, T* db, const float* dg, const float* dbeta,
                                      const float* beta, const T* a, const T* A_log,
                                      const T* dt_bias, int64_t N, int64_t Hv) {
  const int64_t n = N * Hv, step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += step) {
    const int64_t h = i % Hv;
    if (da) {
      const float u = detail::to_f32(a[i]) + detail::to_f32(dt_bias[h]);
      da[i] = detail::from_f32<T>(-expf(detail::to_f32(A_log[h])) * softplus_gradf(u) * dg[i]);
    }
    if (db) db[i] = detail::from_f32<T>(dbeta[i] * beta[i] * (1.0f - beta[i]));
  }
}

// Term (n, c) of the parameters: c < Hv dg g (d g / d A_log = g), c >= Hv d g / d u
// (dt_bias's gradient), u = a + dt_bias.
template <class T>
struct GatesTerm {
  const float* dg;
  const T *a, *A_log, *dt_bias;
  int64_t Hv;
  __device__ float operator()(int64_t n, int64_t c) const {
    const int64_t h = c < Hv ? c : c - Hv;
    const float u = detail::to_f32(a[n * Hv + h]) + detail::to_f32(dt_bias[h]);
    const float ea = expf(detail::to_f32(A_log[h])), d = dg[n * Hv + h];
    return c < Hv ? d * (-ea * softplusf(u)) : -ea * softplus_gradf(u) * d;
  }
};

// ---- the gated RMSNorm ----------------------------------------------------------------------

// One warp per row; lane l the elements l, l + 32, ...
template <class T>
__global__ void gated_norm_forward_kernel(T* y, float* rstd, const T* x, const T* z,
                                          const T* w, int64_t rows, int64_t D, float eps) {
  const int lane = threadIdx.x % 32;
  detail::for_each_warp_row(rows, kWarps, [&](int64_t n) {
    const T* xr = x + n * D;  // [D]
    const T* zr = z + n * D;  // [D]
    const float ss = detail::warp_sum_squares(xr, D);
    const float r = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
    if (rstd && lane == 0) rstd[n] = r;
    for (int64_t c = lane; c < D; c += 32) {
      const float zv = detail::to_f32(zr[c]);
      y[n * D + c] = detail::from_f32<T>(detail::to_f32(w[c]) * detail::to_f32(xr[c]) * r *
                                         zv * sigmoidf(zv));
    }
  });
}

// dn = dy w silu(z), dx = r (dn - xh mean(dn xh)), dz = dy w xh silu'(z).
template <class T>
__global__ void gated_norm_dx_kernel(T* dx, T* dz, const T* dy, const T* x, const T* z,
                                     const T* w, const float* rstd, int64_t rows, int64_t D) {
  const int lane = threadIdx.x % 32;
  detail::for_each_warp_row(rows, kWarps, [&](int64_t n) {
    const int64_t o = n * D;
    const float r = rstd[n];
    float dot = 0.0f;
    for (int64_t c = lane; c < D; c += 32) {
      const float zv = detail::to_f32(z[o + c]), xh = detail::to_f32(x[o + c]) * r;
      dot += detail::to_f32(dy[o + c]) * detail::to_f32(w[c]) * zv * sigmoidf(zv) * xh;
    }
    dot = detail::warp_sum(dot) / static_cast<float>(D);
    for (int64_t c = lane; c < D; c += 32) {
      const float zv = detail::to_f32(z[o + c]), sg = sigmoidf(zv);
      const float xh = detail::to_f32(x[o + c]) * r;
      const float dyw = detail::to_f32(dy[o + c]) * detail::to_f32(w[c]);
      if (dx) dx[o + c] = detail::from_f32<T>(r * (dyw * zv * sg - xh * dot));
      if (dz) dz[o + c] = detail::from_f32<T>(dyw * xh * sg * (1.0f + zv * (1.0f - sg)));
    }
  });
}

// Term (n, c) of the norm's weight: dy x rstd silu(z).
template <class T>
struct NormDwTerm {
  const T *dy, *x, *z;
  const float* rstd;
  int64_t D;
  __device__ float operator()(int64_t n, int64_t c) const {
    const float zv = detail::to_f32(z[n * D + c]);
    return detail::to_f32(dy[n * D + c]) * detail::to_f32(x[n * D + c]) * rstd[n] * zv *
           sigmoidf(zv);
  }
};

void check_norm(int64_t D) {
  if (D < 1 || D > kDeltaMaxNormDim)
    throw Error("gated_rmsnorm: rows of " + std::to_string(D) + " elements",
                "the gated norm kernels take head dims 1 .. " + std::to_string(kDeltaMaxNormDim));
}

}  // namespace

template <class T>
void causal_conv1d_silu_forward(T* y, const T* x, const T* w, const T* past, int64_t B,
                                int64_t Tn, int64_t C, int64_t K, cudaStream_t stream) {
  check_conv(B, Tn, C, K);
  if (B * Tn == 0) return;
  conv_forward_kernel<T><<<detail::grid_for(B * Tn * C, kThreads), kThreads, 0, stream>>>(
      y, x, w, past, B, Tn, C, K);
  ZT_CUDA_LAUNCH_CHECK("conv_forward_kernel");
}

template <class T, class G>
void causal_conv1d_silu_backward(T* dx, G* dw, T* dpast, const T* dy, const T* x, const T* w,
                                 const T* past, int64_t B, int64_t Tn, int64_t C, int64_t K,
                                 float* partial, cudaStream_t stream) {
  check_conv(B, Tn, C, K);
  if (B == 0) return;
  if (dx || (dpast && K > 1)) {
    conv_dx_kernel<T><<<detail::grid_for(B * (Tn + K - 1) * C, kThreads), kThreads, 0,
                        stream>>>(dx, K > 1 ? dpast : nullptr, dy, x, w, past, B, Tn, C, K);
    ZT_CUDA_LAUNCH_CHECK("conv_dx_kernel");
  }
  if (!dw || Tn == 0) return;
  param_grads(dw, static_cast<G*>(nullptr), C * K, ConvDwTerm<T>{dy, x, w, past, Tn, C, K}, C * K,
              B * Tn, partial, "causal_conv1d_silu_backward", "kDeltaPartials * C * K", stream);
}

template <class T>
void causal_conv1d_update_past(T* past_out, const T* past, const T* x, int64_t B, int64_t Tn,
                               int64_t C, int64_t K, cudaStream_t stream) {
  check_conv(B, Tn, C, K);
  if (B == 0 || K == 1) return;
  conv_update_past_kernel<T><<<detail::grid_for(B * C, kThreads), kThreads, 0, stream>>>(
      past_out, past, x, B, Tn, C, K);
  ZT_CUDA_LAUNCH_CHECK("conv_update_past_kernel");
}

template <class T>
void delta_gates_forward(float* g, float* beta, const T* a, const T* b, const T* A_log,
                         const T* dt_bias, int64_t N, int64_t Hv, cudaStream_t stream) {
  if (N * Hv == 0) return;
  gates_forward_kernel<T><<<detail::grid_for(N * Hv, kThreads), kThreads, 0, stream>>>(
      g, beta, a, b, A_log, dt_bias, N, Hv);
  ZT_CUDA_LAUNCH_CHECK("gates_forward_kernel");
}

template <class T, class G>
void delta_gates_backward(T* da, T* db, G* dA_log, G* ddt_bias, const float* dg,
                          const float* dbeta, const float* beta, const T* a, const T* A_log,
                          const T* dt_bias, int64_t N, int64_t Hv, float* partial,
                          cudaStream_t stream) {
  if (N * Hv == 0) return;
  if (da || db) {
    gates_backward_kernel<T><<<detail::grid_for(N * Hv, kThreads), kThreads, 0, stream>>>(
        da, db, dg, dbeta, beta, a, A_log, dt_bias, N, Hv);
    ZT_CUDA_LAUNCH_CHECK("gates_backward_kernel");
  }
  if (!dA_log && !ddt_bias) return;
  param_grads(dA_log, ddt_bias, Hv, GatesTerm<T>{dg, a, A_log, dt_bias, Hv}, 2 * Hv, N, partial,
              "delta_gates_backward", "kDeltaPartials * 2 * Hv", stream);
}

template <class T>
void gated_rmsnorm_forward(T* y, float* rstd, const T* x, const T* z, const T* w, int64_t rows,
                           int64_t D, double eps, cudaStream_t stream) {
  check_norm(D);
  if (rows == 0) return;
  gated_norm_forward_kernel<T><<<detail::grid_for(rows, kWarps), kThreads, 0, stream>>>(
      y, rstd, x, z, w, rows, D, static_cast<float>(eps));
  ZT_CUDA_LAUNCH_CHECK("gated_norm_forward_kernel");
}

template <class T, class G>
void gated_rmsnorm_backward(T* dx, T* dz, G* dw, const T* dy, const T* x, const T* z,
                            const T* w, const float* rstd, int64_t rows, int64_t D,
                            float* partial, cudaStream_t stream) {
  check_norm(D);
  if (rows == 0) return;
  if (dx || dz) {
    gated_norm_dx_kernel<T><<<detail::grid_for(rows, kWarps), kThreads, 0, stream>>>(
        dx, dz, dy, x, z, w, rstd, rows, D);
    ZT_CUDA_LAUNCH_CHECK("gated_norm_dx_kernel");
  }
  if (!dw) return;
  param_grads(dw, static_cast<G*>(nullptr), D, NormDwTerm<T>{dy, x, z, rstd, D}, D, rows, partial,
              "gated_rmsnorm_backward", "kDeltaPartials * D", stream);
}

#define ZT_DELTA_OPS_T(T)                                                                      \
  template void causal_conv1d_silu_forward<T>(T*, const T*, const T*, const T*, int64_t,      \
                                              int64_t, int64_t, int64_t, cudaStream_t);       \
  template void causal_conv1d_update_past<T>(T*, const T*, const T*, int64_t, int64_t,        \
                                             int64_t, int64_t, cudaStream_t);                 \
  template void delta_gates_forward<T>(float*, float*, const T*, const T*, const T*,          \
                                       const T*, int64_t, int64_t, cudaStream_t);             \
  template void gated_rmsnorm_forward<T>(T*, float*, const T*, const T*, const T*, int64_t,   \
                                         int64_t, double, cudaStream_t);
#define ZT_DELTA_OPS_TG(T, G)                                                                  \
  template void causal_conv1d_silu_backward<T, G>(T*, G*, T*, const T*, const T*, const T*,   \
                                                  const T*, int64_t, int64_t, int64_t,        \
                                                  int64_t, float*, cudaStream_t);             \
  template void delta_gates_backward<T, G>(T*, T*, G*, G*, const float*, const float*,        \
                                           const float*, const T*, const T*, const T*,        \
                                           int64_t, int64_t, float*, cudaStream_t);           \
  template void gated_rmsnorm_backward<T, G>(T*, T*, G*, const T*, const T*, const T*,        \
                                             const T*, const float*, int64_t, int64_t,        \
                                             float*, cudaStream_t);
ZT_DELTA_OPS_T(float)
ZT_DELTA_OPS_T(bf16_t)
ZT_DELTA_OPS_TG(float, float)
ZT_DELTA_OPS_TG(bf16_t, float)
ZT_DELTA_OPS_TG(bf16_t, bf16_t)
#undef ZT_DELTA_OPS_T
#undef ZT_DELTA_OPS_TG

}  // namespace zt::kernels::cuda
