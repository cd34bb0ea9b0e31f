// GeGLU gate with tanh-GELU and the logit soft-cap, forward and backward, elementwise.
#include <algorithm>
#include <cmath>

#include "zt/kernels/geglu.hpp"
#include "zt/kernels/softcap.hpp"

#include "eigen_maps.hpp"

namespace zt::kernels::cpu {

namespace {
constexpr int64_t kBlock = 1024;
constexpr double kGeluK = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluC = 0.044715;
}  // namespace

template <class T>
void geglu_forward(T* h, const T* g, const T* u, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    const auto G = detail::arr(g + i0, len);  // [len]
    const auto U = detail::arr(u + i0, len);  // [len]
    detail::arr(h + i0, len) =
        T(0.5) * G * (T(1) + (T(kGeluK) * (G + T(kGeluC) * G * G * G)).tanh()) * U;
  }
}

template <class T>
void geglu_backward(T* dg, T* du, const T* dh, const T* g, const T* u, int64_t n,
                    bool accumulate) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kBlock, len = std::min(kBlock, n - i0);
    alignas(64) T tbuf[kBlock];
    auto Tt = detail::arr(tbuf, len);          // [len] tanh(k (g + c g^3))
    const auto G = detail::arr(g + i0, len);   // [len]
    const auto U = detail::arr(u + i0, len);   // [len]
    const auto dH = detail::arr(dh + i0, len); // [len]
    Tt = (T(kGeluK) * (G + T(kGeluC) * G * G * G)).tanh();
    const auto dgelu = T(0.5) * (T(1) + Tt) +
                       T(0.5) * G * (T(1) - Tt * Tt) * T(kGeluK) * (T(1) + T(3 * kGeluC) * G * G);
    const auto gelu = T(0.5) * G * (T(1) + Tt);
    if (accumulate) {
      detail::arr(dg + i0, len) += dH * U * dgelu;
      detail::arr(du + i0, len) += dH * gelu;
    } else {
      detail::arr(dg + i0, len) = dH * U * dgelu;
      detail::arr(du + i0, len) = dH * gelu;
    }
  }
}

template <class T>
void softcap_forward(T* y, const T* x, int64_t n, double cap) {
  const T c = static_cast<T>(cap);
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) y[i] = c * std::tanh(x[i] / c);
}

template <class T>
void softcap_backward(T* dx, const T* dy, const T* y, int64_t n, double cap) {
  const T c = static_cast<T>(cap);
#pragma omp parallel for schedule(static) if (n >= detail::kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const T t = y[i] / c;
    dx[i] = dy[i] * (T(1) - t * t);
  }
}

#define ZT_GEGLU_INSTANTIATE(T)                                                              \
  template void geglu_forward<T>(T*, const T*, const T*, int64_t);                           \
  template void geglu_backward<T>(T*, T*, const T*, const T*, const T*, int64_t, bool);     \
  template void softcap_forward<T>(T*, const T*, int64_t, double);                           \
  template void softcap_backward<T>(T*, const T*, const T*, int64_t, double);
ZT_GEGLU_INSTANTIATE(float)
ZT_GEGLU_INSTANTIATE(double)
#undef ZT_GEGLU_INSTANTIATE

}  // namespace zt::kernels::cpu
