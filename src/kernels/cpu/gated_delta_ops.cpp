// Gated DeltaNet's small ops around the rule, forward and backward: the causal depthwise
// conv1d + SiLU, the log decay g = -exp(A_log) softplus(a + dt_bias), the gated RMSNorm.
// Every sum that several rows feed (dw, dA_log, ddt_bias) runs in row order on one thread,
// so no result depends on the thread count.
#include <cmath>
#include <vector>

#include "eigen_maps.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/gated_delta.hpp"

namespace zt::kernels::cpu {

namespace {

template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// torch's softplus (beta 1, threshold 20: x itself above 20) and its derivative.
template <class T>
T softplus(T x) {
  return x > T(20) ? x : std::log1p(std::exp(x));
}
template <class T>
T softplus_grad(T x) {
  return x > T(20) ? T(1) : sigmoid(x);
}

// The conv's input at token t (t < 0: the past, zeros without one) of example b, channel c.
template <class T>
T conv_in(int64_t Tn, int64_t C, int64_t K, const T* x, const T* past, int64_t b, int64_t t,
          int64_t c) {
  if (t >= 0) return x[(b * Tn + t) * C + c];
  return past ? past[(b * C + c) * (K - 1) + (K - 1 + t)] : T(0);
}

// o[b, t] = sum over j of w[:, j] * row(b, t, j), for every (b, t): o [B, Tn, C], w [C, K],
// row(b, t, j) a [C] row, or null (zeros).
template <class T, class Row>
void conv_taps(int64_t B, int64_t Tn, int64_t C, int64_t K, const T* w, const Row& row, T* o) {
#pragma omp parallel for schedule(static) if (B * Tn * C * K >= detail::kParallelMin)
  for (int64_t bt = 0; bt < B * Tn; ++bt) {
    const int64_t b = bt / Tn, t = bt % Tn;
    T* out = o + bt * C;  // [C]
    for (int64_t c = 0; c < C; ++c) out[c] = 0;
    for (int64_t j = 0; j < K; ++j) {
      const T* r = row(b, t, j);  // [C]
      if (r)
        for (int64_t c = 0; c < C; ++c) out[c] += w[c * K + j] * r[c];
    }
  }
}

// The conv's shape preconditions (ZT_CHECK: a caller's bug, not the user's input).
void check_conv_shape(int64_t B, int64_t Tn, int64_t C, int64_t K) {
  ZT_CHECK(B >= 0 && Tn >= 0 && C > 0 && K > 0,
           strf("causal_conv1d_silu: B %lld, T %lld, channels %lld, kernel %lld",
                static_cast<long long>(B), static_cast<long long>(Tn),
                static_cast<long long>(C), static_cast<long long>(K)),
           "channels and the kernel size must be positive");
}

// pre [B, T, C] = the conv before the SiLU: sum over j of w[c, j] x[t - (K - 1) + j, c].
template <class T>
void conv_pre(int64_t B, int64_t Tn, int64_t C, int64_t K, const T* x, const T* w,
              const T* past, T* pre) {
  check_conv_shape(B, Tn, C, K);
  std::vector<T> rows(past ? static_cast<size_t>(B * (K - 1) * C) : 0);  // [B, K - 1, C] past
  for (int64_t b = 0; b < B && past; ++b)
    for (int64_t i = 0; i < K - 1; ++i)
      for (int64_t c = 0; c < C; ++c)
        rows[(b * (K - 1) + i) * C + c] = past[(b * C + c) * (K - 1) + i];
  const auto row = [&](int64_t b, int64_t t, int64_t j) -> const T* {
    const int64_t src = t - (K - 1) + j;
    if (src >= 0) return x + (b * Tn + src) * C;
    return past ? rows.data() + (b * (K - 1) + K - 1 + src) * C : nullptr;
  };
  conv_taps(B, Tn, C, K, w, row, pre);
}

}  // namespace

template <class T>
void causal_conv1d_silu_forward(int64_t B, int64_t Tn, int64_t C, int64_t K, const T* x,
                                const T* w, const T* past, T* y) {
  // x, y [B, T, C], w [C, K], past [B, C, K - 1] or null
  conv_pre(B, Tn, C, K, x, w, past, y);
  auto Y = detail::arr(y, B * Tn * C);
  Y = Y / (T(1) + (-Y).exp());
}

template <class T>
void causal_conv1d_silu_backward(int64_t B, int64_t Tn, int64_t C, int64_t K, const T* x,
                                 const T* w, const T* past, const T* dy, T* dx, T* dw) {
  // dy, dx [B, T, C]; dw [C, K] accumulated
  check_conv_shape(B, Tn, C, K);
  std::vector<T> dpre(static_cast<size_t>(B * Tn * C));  // [B, T, C] the gradient before SiLU
  conv_pre(B, Tn, C, K, x, w, past, dpre.data());
  for (int64_t i = 0; i < B * Tn * C; ++i) {
    const T p = dpre[i], sg = sigmoid(p);
    dpre[i] = dy[i] * sg * (T(1) + p * (T(1) - sg));
  }
  // dx[t] = sum over j of w[c, j] dpre[t + (K - 1) - j]
  const auto row = [&](int64_t b, int64_t t, int64_t j) -> const T* {
    const int64_t dst = t + (K - 1) - j;
    return dst < Tn ? dpre.data() + (b * Tn + dst) * C : nullptr;
  };
  conv_taps(B, Tn, C, K, w, row, dx);
  if (!dw) return;  // a frozen weight (LoRA)
  // dw[c, j] += sum over b, t of dpre[b, t, c] x[b, t - (K - 1) + j, c]
#pragma omp parallel for schedule(static) if (B * Tn * C * K >= detail::kParallelMin)
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < K; ++j) {
      T acc = 0;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < Tn; ++t)
          acc += dpre[(b * Tn + t) * C + c] * conv_in(Tn, C, K, x, past, b, t - (K - 1) + j, c);
      dw[c * K + j] += acc;
    }
  }
}

template <class T>
void delta_decay_forward(int64_t N, int64_t Hv, const T* a, const T* A_log, const T* dt_bias,
                         T* g) {
  // a, g [N, Hv]; A_log, dt_bias [Hv]
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < Hv; ++h)
      g[n * Hv + h] = -std::exp(A_log[h]) * softplus(a[n * Hv + h] + dt_bias[h]);
}

template <class T>
void delta_decay_backward(int64_t N, int64_t Hv, const T* a, const T* A_log, const T* dt_bias,
                          const T* dg, T* da, T* dA_log, T* ddt_bias) {
  // dg, da [N, Hv]; dA_log, ddt_bias [Hv] accumulated
  for (int64_t h = 0; h < Hv; ++h) {
    const T ea = std::exp(A_log[h]);
    T sA = 0, sdt = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T u = a[n * Hv + h] + dt_bias[h], d = dg[n * Hv + h];
      const T du = -ea * softplus_grad(u) * d;
      da[n * Hv + h] = du;
      sdt += du;
      sA += d * (-ea * softplus(u));  // d g / d A_log = g
    }
    if (dA_log) dA_log[h] += sA;  // (null: frozen, LoRA)
    if (ddt_bias) ddt_bias[h] += sdt;
  }
}

template <class T>
void gated_rmsnorm_forward(int64_t N, int64_t D, const T* x, const T* z, const T* w,
                           double eps, T* y, T* rstd) {
  // x, z, y [N, D], w [D], rstd [N]
#pragma omp parallel for schedule(static) if (N * D >= detail::kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const auto xr = detail::arr(x + n * D, D), zr = detail::arr(z + n * D, D);  // [D]
    const double ms = static_cast<double>(xr.square().sum()) / static_cast<double>(D);
    const T r = static_cast<T>(1.0 / std::sqrt(ms + eps));
    rstd[n] = r;
    detail::arr(y + n * D, D) = detail::arr(w, D) * (xr * r) * (zr / (T(1) + (-zr).exp()));
  }
}

template <class T>
void gated_rmsnorm_backward(int64_t N, int64_t D, const T* x, const T* z, const T* w,
                            const T* rstd, const T* dy, T* dx, T* dz, T* dw) {
  // dy, dx, dz [N, D]; dw [D] accumulated
  const auto W = detail::arr(w, D);  // [D]
#pragma omp parallel for schedule(static) if (N * D >= detail::kParallelMin)
  for (int64_t n = 0; n < N; ++n) {
    const auto xr = detail::arr(x + n * D, D), zr = detail::arr(z + n * D, D);  // [D]
    const auto dyr = detail::arr(dy + n * D, D);                                // [D]
    const T r = rstd[n];
    const detail::Arr<T> sg = T(1) / (T(1) + (-zr).exp());  // [D] sigmoid(z)
    const detail::Arr<T> xh = xr * r;                       // [D] the normalised x
    const detail::Arr<T> dn = dyr * W * zr * sg;            // [D] d y / d xh
    detail::arr(dx + n * D, D) = r * (dn - xh * ((dn * xh).sum() / static_cast<T>(D)));
    detail::arr(dz + n * D, D) = dyr * W * xh * sg * (T(1) + zr * (T(1) - sg));
  }
  if (!dw) return;  // a frozen weight (LoRA)
  for (int64_t n = 0; n < N; ++n) {
    const auto zr = detail::arr(z + n * D, D);
    detail::arr(dw, D) += detail::arr(dy + n * D, D) * detail::arr(x + n * D, D) * rstd[n] *
                          (zr / (T(1) + (-zr).exp()));
  }
}

#define ZTnGATED_DELTA_OPS(T)                                                                   \
  template void causal_conv1d_silu_forward<T>(int64_t, int64_t, int64_t, int64_t, const T*,     \
                                              const T*, const T*, T*);                          \
  template void causal_conv1d_silu_backward<T>(int64_t, int64_t, int64_t, int64_t, const T*,    \
                                               const T*, const T*, const T*, T*, T*);           \
  template void delta_decay_forward<T>(int64_t, int64_t, const T*, const T*, const T*, T*);     \
  template void delta_decay_backward<T>(int64_t, int64_t, const T*, const T*, const T*,         \
                                        const T*, T*, T*, T*);                                  \
  template void gated_rmsnorm_forward<T>(int64_t, int64_t, const T*, const T*, const T*, double, \
                                         T*, T*);                                               \
  template void gated_rmsnorm_backward<T>(int64_t, int64_t, const T*, const T*, const T*,       \
                                          const T*, const T*, T*, T*, T*);
ZTnGATED_DELTA_OPS(float)
ZTnGATED_DELTA_OPS(double)
#undef ZTnGATED_DELTA_OPS

}  // namespace zt::kernels::cpu
