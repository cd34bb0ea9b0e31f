// RMSNorm forward and backward. Rows are independent (parallel over rows); dw is summed
// over rows in row order (parallel over columns), so no result depends on the thread count.
#include "zt/kernels/rmsnorm.hpp"

#include <cmath>

#include "eigen_maps.hpp"

namespace zt::kernels::cpu {

template <class T>
void rmsnorm_forward(T* out, T* rstd, const T* x, const T* w, int64_t N, int64_t C, double eps,
                     double offset) {
  // out [N, C], rstd [N] (nullable), x [N, C], w [C]
  const T a = static_cast<T>(offset);
#pragma omp parallel for schedule(static) if (N * C >= detail::kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const auto xr = detail::arr(x + n * C, C);  // [C]
    const auto W = detail::arr(w, C) + a;       // [C]
    const T ms = xr.square().sum() / static_cast<T>(C);
    const T r = static_cast<T>(1.0 / std::sqrt(static_cast<double>(ms) + eps));
    detail::arr(out + n * C, C) = xr * r * W;
    if (rstd) rstd[n] = r;
  }
}

template <class T>
void rmsnorm_backward(T* dx, T* dw, const T* dout, const T* x, const T* w, const T* rstd,
                      int64_t N, int64_t C, bool accumulate_dx, double offset) {
  const T a = static_cast<T>(offset);
  // dx [N, C] (+= or =, nullable), dw [C] (+=, nullable), dout [N, C], x [N, C], w [C], rstd [N]
  if (dx) {
#pragma omp parallel for schedule(static) if (N * C >= detail::kParallelMin)
    for (int64_t n = 0; n < N; ++n) {
      const auto xr = detail::arr(x + n * C, C);     // [C]
      const auto dyr = detail::arr(dout + n * C, C); // [C]
      const auto W = detail::arr(w, C) + a;          // [C]
      const T r = rstd[n];
      // m = mean_c (dy * w * xhat), xhat = x r
      const T m = (dyr * W * xr).sum() * r / static_cast<T>(C);
      if (accumulate_dx) {
        detail::arr(dx + n * C, C) += r * (dyr * W - (xr * r) * m);
      } else {
        detail::arr(dx + n * C, C) = r * (dyr * W - (xr * r) * m);
      }
    }
  }
  if (dw) {
    // Parallel over columns: each dw[c] is summed over rows in row order.
#pragma omp parallel for schedule(static) if (N * C >= detail::kParallelMin)
    for (int64_t c0 = 0; c0 < C; c0 += 16) {
      const int64_t c1 = std::min<int64_t>(C, c0 + 16);
      for (int64_t n = 0; n < N; ++n) {
        const T r = rstd[n];
        const T* xr = x + n * C;
        const T* dyr = dout + n * C;
        for (int64_t c = c0; c < c1; ++c) dw[c] += dyr[c] * (xr[c] * r);
      }
    }
  }
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int64_t, int64_t,
                                     double, double);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int64_t,
                                      int64_t, double, double);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*,
                                      const float*, int64_t, int64_t, bool,
                                      double);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*,
                                       const double*, const double*, int64_t, int64_t, bool,
                                       double);

}  // namespace zt::kernels::cpu
