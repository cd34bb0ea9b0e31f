#pragma once
// RMSNorm (CPU reference): y = x / sqrt(mean(x^2) + eps) * (offset + w), per row. offset 0:
// Llama's; offset 1: Gemma's (1 + w), whose zero-initialised weights are the identity.
#include <cstdint>

namespace zt::kernels::cpu {

//   out  [N, C]  (written)
//   rstd [N]     (written; 1 / sqrt(mean(x^2) + eps); may be nullptr)
//   x    [N, C]
//   w    [C]
template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps,
                     double offset = 0.0);

// With r = rstd[n], xhat = x r, g = dout * (offset + w):
//   dx[n, :] += r * (g - xhat * mean(g * xhat))
//   dw[:]    += sum_n dout[n, :] * xhat[n, :]
//   dx   [N, C]  (accumulated; may be nullptr; WRITTEN when !accumulate_dx)
//   dw   [C]     (accumulated; may be nullptr)
//   dout [N, C], x [N, C], w [C], rstd [N] (from the forward)
template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd,
                      int64_t N, int64_t C, bool accumulate_dx = true, double offset = 0.0);

}  // namespace zt::kernels::cpu
