// Causal grouped-query attention, forward and backward. The probabilities P are kept
// from the forward (B*H*T*T elements); the backward recomputes nothing (and so needs
// neither the positions nor the sliding window: P is zero outside the mask).
// Work is split over (batch, kv head) pairs: the query heads of one group share K and V,
// and so also share dK and dV, which therefore only one thread ever writes.
#include "zt/kernels/attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "eigen_maps.hpp"

namespace zt::kernels::cpu {

namespace {
// In place: the softmax of the scaled scores r, soft-capped as cap tanh(r / cap) when
// cap > 0, with the sink logit (when sink; not capped) as one more column that is dropped
// after the normalization.
template <class A, class T>
void softmax_row(A&& r, T scale, const T* sink, T cap) {
  r *= scale;
  if (cap > 0) r = cap * (r / cap).tanh();
  T mx = r.maxCoeff();
  if (sink) mx = std::max(mx, *sink);
  r = (r - mx).exp();
  const T extra = sink ? std::exp(*sink - mx) : T(0);
  r *= T(1) / (r.sum() + extra);
}
}  // namespace

template <class T>
void attention_forward(T* out, T* probs, const T* q, const T* k, const T* v, int64_t B,
                       int64_t Tn, int64_t H, int64_t G, int64_t D, const int32_t* pos,
                       int64_t window, const T* sink, double softcap) {
  // out [B, Tn, H, D], probs [B, H, Tn, Tn], q [B, Tn, H, D], k, v [B, Tn, G, D], pos [B, Tn]
  const int64_t per_group = H / G;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  const T cap = static_cast<T>(softcap);
#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < B * G; ++bg) {
    const int64_t b = bg / G;
    const int64_t g = bg % G;
    const auto K = detail::mat(k + b * Tn * G * D + g * D, Tn, D, G * D);  // [Tn, D]
    const auto V = detail::mat(v + b * Tn * G * D + g * D, Tn, D, G * D);  // [Tn, D]
    for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h) {
      const auto Q = detail::mat(q + b * Tn * H * D + h * D, Tn, D, H * D);  // [Tn, D]
      auto O = detail::mat(out + b * Tn * H * D + h * D, Tn, D, H * D);      // [Tn, D]
      T* p = probs + (b * H + h) * Tn * Tn;                                   // [Tn, Tn]
      auto P = detail::mat(p, Tn, Tn);
      // raw scores, lower triangle only (s <= t): the upper part is never computed
      P.template triangularView<Eigen::Lower>() = Q * K.transpose();
      for (int64_t t = 0; t < Tn; ++t) {
        T* row = p + t * Tn;                 // [Tn]
        // keys of this token's own example only: lo .. t (0 .. t without positions),
        // and with a sliding window the last `window` of them (t - window < s <= t)
        int64_t lo = pos ? t - pos[b * Tn + t] : 0;
        if (window > 0) lo = std::max(lo, t - window + 1);
        std::fill(row, row + lo, T(0));
        // the causal part, lo <= s <= t
        softmax_row(detail::arr(row + lo, t + 1 - lo), scale, sink ? sink + h : nullptr, cap);
        std::fill(row + t + 1, row + Tn, T(0));
      }
      O.noalias() = P.template triangularView<Eigen::Lower>() * V;
    }
  }
}

int64_t attention_backward_scratch(int64_t Tn, int threads) {
  return (Tn + 1) * Tn * static_cast<int64_t>(threads);  // dS [Tn, Tn] and a score row [Tn]
}

template <class T>
void attention_backward(T* dq, T* dk, T* dv, T* scratch, const T* dout, const T* q, const T* k,
                        const T* v, const T* probs, int64_t B, int64_t Tn, int64_t H, int64_t G,
                        int64_t D, bool accumulate, T* dsink, double softcap) {
  // dq [B, Tn, H, D] (+= or =), dk, dv [B, Tn, G, D] (+= or =), scratch [threads, Tn + 1, Tn],
  // dout [B, Tn, H, D], q [B, Tn, H, D], k, v [B, Tn, G, D], probs [B, H, Tn, Tn],
  // dsink [H] (+= or =)
  const int64_t per_group = H / G;
  // per (b, h): -sum_t p_sink d_t, summed over b after the parallel loop (no shared writes)
  std::vector<T> dsink_bh(dsink ? static_cast<size_t>(B * H) : 0, T(0));  // [B, H]
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  const T cap = static_cast<T>(softcap);
#pragma omp parallel for schedule(static)
  for (int64_t bg = 0; bg < B * G; ++bg) {
    const int64_t b = bg / G;
    const int64_t g = bg % G;
    T* ds = scratch + static_cast<int64_t>(omp_get_thread_num()) * (Tn + 1) * Tn;  // [Tn, Tn]
    T* zrow = ds + Tn * Tn;  // [Tn] one row of scaled scores (soft-cap only)
    auto dS = detail::mat(ds, Tn, Tn);
    const auto K = detail::mat(k + b * Tn * G * D + g * D, Tn, D, G * D);  // [Tn, D]
    const auto V = detail::mat(v + b * Tn * G * D + g * D, Tn, D, G * D);  // [Tn, D]
    auto dK = detail::mat(dk + b * Tn * G * D + g * D, Tn, D, G * D);      // [Tn, D]
    auto dV = detail::mat(dv + b * Tn * G * D + g * D, Tn, D, G * D);      // [Tn, D]
    for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h) {
      const auto Q = detail::mat(q + b * Tn * H * D + h * D, Tn, D, H * D);     // [Tn, D]
      const auto dO = detail::mat(dout + b * Tn * H * D + h * D, Tn, D, H * D); // [Tn, D]
      auto dQ = detail::mat(dq + b * Tn * H * D + h * D, Tn, D, H * D);         // [Tn, D]
      const T* p = probs + (b * H + h) * Tn * Tn;                                // [Tn, Tn]
      const auto P = detail::mat(p, Tn, Tn);
      // The first head of the group writes dK and dV when not accumulating.
      const bool add_kv = accumulate || h > g * per_group;
      // dV += P^T dO   (P is lower triangular)
      if (add_kv) {
        dV.noalias() += P.transpose().template triangularView<Eigen::Upper>() * dO;
      } else {
        dV.noalias() = P.transpose().template triangularView<Eigen::Upper>() * dO;
      }
      // dP = dO V^T (lower triangle only), then the softmax backward in place:
      // dS[t, s] = scale * P[t, s] * (dP[t, s] - sum_s' P[t, s'] dP[t, s'])
      // times, with the soft-cap, its derivative 1 - tanh^2(z / cap) at the scaled score
      // z = scale q_t . k_s (recomputed here: the forward keeps only P)
      dS.template triangularView<Eigen::Lower>() = dO * V.transpose();
      for (int64_t t = 0; t < Tn; ++t) {
        auto dp = detail::arr(ds + t * Tn, t + 1);  // [t + 1] dP, then dS
        const auto pr = detail::arr(p + t * Tn, t + 1);
        const T d = (pr * dp).sum();
        dp = scale * pr * (dp - d);
        if (cap > 0) {
          auto z = detail::mat(zrow, t + 1, 1);
          z.noalias() = K.topRows(t + 1) * Q.row(t).transpose();
          dp *= T(1) - (detail::arr(zrow, t + 1) * (scale / cap)).tanh().square();
        }
        if (dsink) dsink_bh[static_cast<size_t>(b * H + h)] -= (T(1) - pr.sum()) * d;
      }
      // dQ += dS K ; dK += dS^T Q   (dS is lower triangular; its upper part is stale)
      if (accumulate) {
        dQ.noalias() += dS.template triangularView<Eigen::Lower>() * K;
      } else {
        dQ.noalias() = dS.template triangularView<Eigen::Lower>() * K;
      }
      if (add_kv) {
        dK.noalias() += dS.transpose().template triangularView<Eigen::Upper>() * Q;
      } else {
        dK.noalias() = dS.transpose().template triangularView<Eigen::Upper>() * Q;
      }
    }
  }
  if (!dsink) return;
  for (int64_t h = 0; h < H; ++h) {
    T sum = accumulate ? dsink[h] : T(0);
    for (int64_t b = 0; b < B; ++b) sum += dsink_bh[static_cast<size_t>(b * H + h)];
    dsink[h] = sum;
  }
}

template <class T>
void attention_decode(T* out, T* scratch, const T* q, const T* k, const T* v, int64_t n,
                      int64_t past, int64_t H, int64_t G, int64_t D, int64_t window,
                      const T* sink, double softcap) {
  // out [n, H, D], scratch [H, past + n], q [n, H, D], k, v [past + n, G, D]
  const int64_t per_group = H / G, len = past + n;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
#pragma omp parallel for schedule(static) if (len * H * D >= (int64_t{1} << 15))
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / per_group;
    const auto K = detail::mat(k + g * D, len, D, G * D);  // [len, D]
    const auto V = detail::mat(v + g * D, len, D, G * D);  // [len, D]
    for (int64_t t = 0; t < n; ++t) {
      // keys lo .. past + t: all of them, or the last `window` with a sliding window
      const int64_t lo = window > 0 ? std::max<int64_t>(0, past + t + 1 - window) : 0;
      const int64_t seen = past + t + 1 - lo;
      const auto qt = detail::mat(q + (t * H + h) * D, 1, D);  // [1, D]
      auto r = detail::mat(scratch + h * len, 1, seen);        // [1, seen]
      r.noalias() = qt * K.middleRows(lo, seen).transpose();
      softmax_row(detail::arr(scratch + h * len, seen), scale, sink ? sink + h : nullptr,
                  static_cast<T>(softcap));
      auto o = detail::mat(out + (t * H + h) * D, 1, D);       // [1, D]
      o.noalias() = r * V.middleRows(lo, seen);
    }
  }
}

template void attention_decode<float>(float*, float*, const float*, const float*, const float*,
                                      int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                      const float*, double);
template void attention_decode<double>(double*, double*, const double*, const double*,
                                       const double*, int64_t, int64_t, int64_t, int64_t,
                                       int64_t, int64_t, const double*, double);
template void attention_forward<float>(float*, float*, const float*, const float*, const float*,
                                       int64_t, int64_t, int64_t, int64_t, int64_t,
                                       const int32_t*, int64_t, const float*, double);
template void attention_forward<double>(double*, double*, const double*, const double*,
                                        const double*, int64_t, int64_t, int64_t, int64_t,
                                        int64_t, const int32_t*, int64_t, const double*, double);
template void attention_backward<float>(float*, float*, float*, float*, const float*,
                                        const float*, const float*, const float*, const float*,
                                        int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                                        float*, double);
template void attention_backward<double>(double*, double*, double*, double*, const double*,
                                         const double*, const double*, const double*,
                                         const double*, int64_t, int64_t, int64_t, int64_t,
                                         int64_t, bool, double*, double);

}  // namespace zt::kernels::cpu
