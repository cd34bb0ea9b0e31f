#pragma once
// RMSNorm fused with the residual add, on the GPU (the norm's semantics are those of
// zt/kernels/rmsnorm.hpp; rstd is kept in fp32 whatever T is).
#include <cstdint>

#include "zt/kernels/cuda/types.hpp"

namespace zt::kernels::cuda {

// One block per row. With a residual:  s = x + residual (stored to sum_out, rounded to T),
//                                      y = s / sqrt(mean(s^2) + eps) * (offset + w)
// without (residual == nullptr):       y = x / sqrt(mean(x^2) + eps) * (offset + w)
// offset 0: Llama's norm; 1: Gemma's (1 + w) (Config::norm_offset).
// The norm reads the rounded sum, so the backward (which reads sum_out) sees what the
// forward normalised.
//   y        [N, C] T (written)
//   rstd     [N]    float (written; 1/sqrt(mean(s^2) + eps); nullable)
//   sum_out  [N, C] T (written when residual != nullptr; may alias x or residual)
//   x        [N, C] T
//   residual [N, C] T (nullable)
//   w        [C]    T
template <class T>
void residual_rmsnorm_forward(T* y, float* rstd, T* sum_out, const T* x, const T* residual,
                              const T* w, int64_t N, int64_t C, double eps,
                              cudaStream_t stream = nullptr, double offset = 0.0);

// With r = rstd[n], xhat = x r, g = dout * (offset + w):
//   dx[n, :] (+)= r * (g - xhat * mean(g * xhat))   one block per row
//   dw[:]    +=  sum_n dout[n, :] * xhat[n, :]      one block per 32 columns, rows summed
//                                                   in a fixed order (deterministic)
// The residual's backward is the identity, so the fused form is dx accumulated onto the
// gradient already flowing down the residual stream (accumulate_dx = true).
//   dx   [N, C] T (accumulated; WRITTEN when !accumulate_dx; nullable)
//   dw   [C]    G = float or bf16_t (accumulated; nullable)
//   dout [N, C] T, x [N, C] T (the normalised input: sum_out of the forward), w [C] T,
//   rstd [N] float (from the forward)
template <class T, class G>
void rmsnorm_backward(T* dx, G* dw, const T* dout, const T* x, const T* w, const float* rstd,
                      int64_t N, int64_t C, bool accumulate_dx = true,
                      cudaStream_t stream = nullptr, double offset = 0.0);

}  // namespace zt::kernels::cuda
