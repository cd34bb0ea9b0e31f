#pragma once
// RMSNorm over many short rows on the GPU: Qwen3's per-head q/k norm, rows = N*H (N*G) rows
// of D = head_dim <= 256 with one weight [D] (the semantics of zt/kernels/rmsnorm.hpp, as
// kernels::cuda::residual_rmsnorm_forward / rmsnorm_backward without a residual). Those
// give each row a 256-thread block, and the weight's gradient D/32 blocks that each sum
// every row: right for rows of the hidden size, not for 10^5 rows of 128. Here one warp
// handles one row (a lane every 32nd element, coalesced), and the weight's gradient is
// summed in kHeadNormChunks fixed row chunks (partials to a scratch, then added in chunk
// order: deterministic, no atomics).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

inline constexpr int64_t kHeadNormMaxDim = 256;
inline constexpr int kHeadNormChunks = 64;

//   y    [rows, D] T (written; may alias x)
//   rstd [rows]    float (written: 1/sqrt(mean(x^2) + eps); nullable)
//   x    [rows, D] T, w [D] T; the scale is offset + w (1: Gemma's (1 + w))
template <class T>
void head_rmsnorm_forward(T* y, float* rstd, const T* x, const T* w, int64_t rows, int64_t D,
                          double eps, cudaStream_t stream = nullptr, double offset = 0.0);

// With r = rstd[n], xhat = x r, g = dout (offset + w):
//   dx[n, :] = r (g - xhat mean(g xhat))   WRITTEN (nullable)
//   dw[:]   += sum_n dout[n, :] xhat[n, :] (nullable; G = float or bf16_t)
//   dout [rows, D] T, x [rows, D] T (the forward's input), w [D] T, rstd [rows] float
//   partial [kHeadNormChunks * D] float, device scratch (needed when dw is given)
template <class T, class G>
void head_rmsnorm_backward(T* dx, G* dw, const T* dout, const T* x, const T* w,
                           const float* rstd, int64_t rows, int64_t D, float* partial,
                           cudaStream_t stream = nullptr, double offset = 0.0);

}  // namespace zt::kernels::cuda
