// SwiGLU gate: h = silu(g) * u, forward and backward, elementwise (Eigen-vectorised exp),
// in blocks of kBlock elements so the sigmoid can be kept on the stack.
#include "zt/kernels/swiglu.hpp"

#include <algorithm>
#include <cmath>

#include "eigen_maps.hpp"

namespace zt::kernels::cpu {

namespace {
constexpr int64_t kBlock = 1024;
}

template <class T>
void swiglu_forward(T* h, const T* g, const T* u, int64_t n) {
  // h, g, u [n]
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    const auto G = detail::arr(g + i0, len);  // [len]
    const auto U = detail::arr(u + i0, len);  // [len]
    detail::arr(h + i0, len) = G * U / (T(1) + (-G).exp());
  }
}

template <class T>
void swiglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                     bool accumulate) {
  // dg, du [n] (+= or =), dh, g, u [n]
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    alignas(64) T sbuf[kBlock];
    auto S = detail::arr(sbuf, len);           // [len] sigmoid(g)
    const auto G = detail::arr(g + i0, len);   // [len]
    const auto U = detail::arr(u + i0, len);   // [len]
    const auto dH = detail::arr(dh + i0, len); // [len]
    S = (T(1) + (-G).exp()).inverse();
    if (accumulate) {
      detail::arr(dg + i0, len) += dH * U * S * (T(1) + G * (T(1) - S));
      detail::arr(du + i0, len) += dH * G * S;
    } else {
      detail::arr(dg + i0, len) = dH * U * S * (T(1) + G * (T(1) - S));
      detail::arr(du + i0, len) = dH * G * S;
    }
  }
}

template void swiglu_forward<float>(float*, const float*, const float*, int64_t);
template void swiglu_forward<double>(double*, const double*, const double*, int64_t);
template void swiglu_backward<float>(float*, float*, const float*, const float*, const float*,
                                     int64_t, bool);
template void swiglu_backward<double>(double*, double*, const double*, const double*,
                                      const double*, int64_t, bool);

template <class T>
void swiglu_clamped_forward(T* h, const T* g, const T* u, int64_t n, double limit, double alpha) {
  const T L = static_cast<T>(limit), a = static_cast<T>(alpha);
  for (int64_t i = 0; i < n; ++i) {
    const T gc = std::min(g[i], L), uc = std::clamp(u[i], -L, L);
    const T glu = gc * (T(1) / (T(1) + std::exp(-(gc * a))));
    h[i] = (uc + T(1)) * glu;
  }
}

template <class T>
void swiglu_clamped_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                             double limit, double alpha, bool accumulate) {
  const T L = static_cast<T>(limit), a = static_cast<T>(alpha);
  for (int64_t i = 0; i < n; ++i) {
    const T gc = std::min(g[i], L), uc = std::clamp(u[i], -L, L);
    const T sg = T(1) / (T(1) + std::exp(-(gc * a)));
    const T dgi = g[i] <= L ? dh[i] * (uc + T(1)) * sg * (T(1) + a * gc * (T(1) - sg)) : T(0);
    const T dui = (u[i] >= -L && u[i] <= L) ? dh[i] * gc * sg : T(0);
    dg[i] = accumulate ? dg[i] + dgi : dgi;
    du[i] = accumulate ? du[i] + dui : dui;
  }
}

template void swiglu_clamped_forward<float>(float*, const float*, const float*, int64_t, double,
                                            double);
template void swiglu_clamped_forward<double>(double*, const double*, const double*, int64_t,
                                             double, double);
template void swiglu_clamped_backward<float>(float*, float*, const float*, const float*,
                                             const float*, int64_t, double, double, bool);
template void swiglu_clamped_backward<double>(double*, double*, const double*, const double*,
                                              const double*, int64_t, double, double, bool);

}  // namespace zt::kernels::cpu
