// Mixture-of-experts block (see moe.hpp): the router's softmax and top-k, the experts run
// per expert on their gathered tokens with the existing linear and SwiGLU kernels, and the
// load-balancing loss. A reference: clear before fast (the CUDA path permutes tokens by
// expert the same way and runs grouped GEMMs).
#include "zt/kernels/moe.hpp"

#include <algorithm>
#include <cmath>
#include <new>
#include <utility>
#include <vector>

#include "zt/kernels/linear.hpp"
#include "zt/kernels/swiglu.hpp"

namespace zt::kernels::cpu {

namespace {

// The per-expert scratch rows, 64-byte aligned as the model's buffers are: Eigen's small
// products split their sums by the operands' alignment, so heap memory of varying
// alignment would make the result vary from run to run in the last bits.
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U>
  explicit Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const Aligned64&) const { return true; }
};
template <class T>
using Rows = std::vector<T, Aligned64<T>>;

// The slots n*k+j routed to each expert, in token order: slots[e].
std::vector<std::vector<int64_t>> slots_by_expert(const int32_t* idx, int64_t N, int64_t E,
                                                  int64_t k) {
  std::vector<std::vector<int64_t>> slots(static_cast<size_t>(E));
  for (int64_t s = 0; s < N * k; ++s) slots[static_cast<size_t>(idx[s])].push_back(s);
  return slots;
}

// rows [M, width] (written) <- src rows at the given row numbers
template <class T>
void gather_rows(T* rows, const T* src, const std::vector<int64_t>& at, int64_t width) {
  for (size_t r = 0; r < at.size(); ++r)
    std::copy_n(src + at[r] * width, width, rows + static_cast<int64_t>(r) * width);
}

// rows [M, width] += bias[e] (nullptr: none)
template <class T>
void add_bias(T* rows, const T* bias, int64_t e, int64_t M, int64_t width) {
  if (!bias) return;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < width; ++c) rows[r * width + c] += bias[e * width + c];
}

// dbias[e] += the sum of rows [M, width] (nullptr: none)
template <class T>
void sum_rows(T* dbias, const T* rows, int64_t e, int64_t M, int64_t width) {
  if (!dbias) return;
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < width; ++c) dbias[e * width + c] += rows[r * width + c];
}

// One row's activation: gu [2I] (gate then up) -> h [I]: SwiGLU, or gpt-oss's clamped one.
template <class T>
void gate_forward(T* h, const T* gu, int64_t I, const ExpertExtras<T>& x) {
  if (x.swiglu_limit > 0)
    swiglu_clamped_forward(h, gu, gu + I, I, x.swiglu_limit, x.swiglu_alpha);
  else
    swiglu_forward(h, gu, gu + I, I);
}
template <class T>
void gate_backward(T* dgu, const T* dh, const T* gu, int64_t I, const ExpertExtras<T>& x) {
  if (x.swiglu_limit > 0)
    swiglu_clamped_backward(dgu, dgu + I, dh, gu, gu + I, I, x.swiglu_limit, x.swiglu_alpha,
                            /*accumulate=*/false);
  else
    swiglu_backward(dgu, dgu + I, dh, gu, gu + I, I, /*accumulate=*/false);
}

}  // namespace

template <class T>
void moe_router_logits(T* logits, const T* x, const T* router, int64_t N, int64_t C, int64_t E,
                       const T* bias) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const T* xn = x + n * C;
    for (int64_t e = 0; e < E; ++e) {
      const T* we = router + e * C;
      T lane[8] = {};  // eight running sums, then a fixed tree: the same code for every e
      int64_t c = 0;
      for (; c + 8 <= C; c += 8)
        for (int j = 0; j < 8; ++j) lane[j] += xn[c + j] * we[c + j];
      T tail = 0;
      for (; c < C; ++c) tail += xn[c] * we[c];
      logits[n * E + e] = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])) + tail;
      if (bias) logits[n * E + e] += bias[e];
    }
  }
}

template <class T>
void moe_route(T* probs, int32_t* idx, T* w, const T* logits, int64_t N, int64_t E, int64_t k,
               bool renormalise, bool topk_softmax) {
  using Elem = std::pair<T, int64_t>;  // (probability, expert)
  // torch.topk's order (largest first, NaN counted largest), compared by value alone.
  const auto before = [](const Elem& a, const Elem& b) {
    return (std::isnan(a.first) && !std::isnan(b.first)) || a.first > b.first;
  };
  std::vector<Elem> queue(static_cast<size_t>(E));  // [E]
  for (int64_t n = 0; n < N; ++n) {
    const T* l = logits + n * E;  // [E]
    T* p = probs + n * E;         // [E]
    const T top = *std::max_element(l, l + E);
    T sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - top));
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    for (int64_t e = 0; e < E; ++e) queue[static_cast<size_t>(e)] = {topk_softmax ? l[e] : p[e], e};
    // The same selection as torch's CPU topk (ATen TopKImpl.h): partial_sort when k is
    // small against E, else nth_element and a sort of the k-1 before the k-th.
    if (k * 64 <= E) {
      std::partial_sort(queue.begin(), queue.begin() + k, queue.end(), before);
    } else {
      std::nth_element(queue.begin(), queue.begin() + (k - 1), queue.end(), before);
      std::sort(queue.begin(), queue.begin() + (k - 1), before);
    }
    if (topk_softmax) {  // softmax over the k chosen logits (GptOssTopKRouter)
      const T m = queue[0].first;  // the largest
      T z = 0;
      for (int64_t j = 0; j < k; ++j) z += (w[n * k + j] = std::exp(queue[static_cast<size_t>(j)].first - m));
      for (int64_t j = 0; j < k; ++j) {
        idx[n * k + j] = static_cast<int32_t>(queue[static_cast<size_t>(j)].second);
        w[n * k + j] /= z;
      }
      continue;
    }
    T chosen = 0;
    for (int64_t j = 0; j < k; ++j) chosen += queue[static_cast<size_t>(j)].first;
    for (int64_t j = 0; j < k; ++j) {
      idx[n * k + j] = static_cast<int32_t>(queue[static_cast<size_t>(j)].second);
      w[n * k + j] = queue[static_cast<size_t>(j)].first / (renormalise ? chosen : T(1));
    }
  }
}

template <class T>
void moe_route_backward(T* dlogits, const T* dw, const T* dprob, const T* probs,
                        const int32_t* idx, const T* w, int64_t N, int64_t E, int64_t k,
                        bool renormalise, bool topk_softmax) {
  for (int64_t n = 0; n < N; ++n) {
    const T* p = probs + n * E;  // [E]
    T* dl = dlogits + n * E;     // [E], first d loss / d p, then d loss / d logits
    for (int64_t e = 0; e < E; ++e) dl[e] = dprob ? dprob[e] : T(0);
    if (topk_softmax) {
      // w = softmax of the chosen logits: d l_{i_j} = w_j (dw_j - sum_m w_m dw_m); the
      // full softmax p carries only dprob (the load-balancing loss).
      T pd = 0, dot = 0;
      for (int64_t e = 0; e < E; ++e) pd += p[e] * dl[e];
      for (int64_t e = 0; e < E; ++e) dl[e] = p[e] * (dl[e] - pd);
      for (int64_t j = 0; j < k; ++j) dot += dw[n * k + j] * w[n * k + j];
      for (int64_t j = 0; j < k; ++j) dl[idx[n * k + j]] += w[n * k + j] * (dw[n * k + j] - dot);
      continue;
    }
    if (!renormalise) {  // w_j = p_{i_j}
      for (int64_t j = 0; j < k; ++j) dl[idx[n * k + j]] += dw[n * k + j];
    } else {
    // w_j = p_{i_j} / S, S = sum_m p_{i_m}: d w_j / d p_{i_m} = (delta_jm - w_j) / S.
    T S = 0, dot = 0;
    for (int64_t j = 0; j < k; ++j) {
      S += p[idx[n * k + j]];
      dot += dw[n * k + j] * w[n * k + j];
    }
    for (int64_t j = 0; j < k; ++j) dl[idx[n * k + j]] += (dw[n * k + j] - dot) / S;
    }
    // Softmax: d logit_e = p_e (d p_e - sum_f p_f d p_f).
    T pd = 0;
    for (int64_t e = 0; e < E; ++e) pd += p[e] * dl[e];
    for (int64_t e = 0; e < E; ++e) dl[e] = p[e] * (dl[e] - pd);
  }
}

template <class T>
void moe_experts_forward(T* out, T* gu, T* h, T* y, const T* x, const T* gate_up, const T* down,
                         const int32_t* idx, const T* w, int64_t N, int64_t C, int64_t I,
                         int64_t E, int64_t k, const ExpertExtras<T>& extra) {
  std::fill_n(out, N * C, T(0));
  const auto slots = slots_by_expert(idx, N, E, k);
  Rows<T> X, GU, H, Y;  // one expert's rows: [M, C], [M, 2I], [M, I], [M, C]
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int64_t>& at = slots[static_cast<size_t>(e)];
    const int64_t M = static_cast<int64_t>(at.size());
    if (M == 0) continue;
    X.resize(static_cast<size_t>(M * C));
    GU.resize(static_cast<size_t>(M * 2 * I));
    H.resize(static_cast<size_t>(M * I));
    Y.resize(static_cast<size_t>(M * C));
    for (int64_t r = 0; r < M; ++r) std::copy_n(x + (at[r] / k) * C, C, X.data() + r * C);
    linear_forward(GU.data(), X.data(), gate_up + e * 2 * I * C, M, C, 2 * I);
    add_bias(GU.data(), extra.gate_up_bias, e, M, 2 * I);
    for (int64_t r = 0; r < M; ++r)
      gate_forward(H.data() + r * I, GU.data() + r * 2 * I, I, extra);
    linear_forward(Y.data(), H.data(), down + e * C * I, M, I, C);
    add_bias(Y.data(), extra.down_bias, e, M, C);
    for (int64_t r = 0; r < M; ++r) {
      const int64_t s = at[r], n = s / k;
      std::copy_n(GU.data() + r * 2 * I, 2 * I, gu + s * 2 * I);
      std::copy_n(H.data() + r * I, I, h + s * I);
      std::copy_n(Y.data() + r * C, C, y + s * C);
      for (int64_t c = 0; c < C; ++c) out[n * C + c] += w[s] * Y[static_cast<size_t>(r * C + c)];
    }
  }
}

template <class T>
void moe_experts_backward(T* dx, T* dgate_up, T* ddown, T* dw, const T* dout, const T* x,
                          const T* gate_up, const T* down, const int32_t* idx, const T* w,
                          const T* gu, const T* h, const T* y, int64_t N, int64_t C, int64_t I,
                          int64_t E, int64_t k, const ExpertExtras<T>& extra) {
  const auto slots = slots_by_expert(idx, N, E, k);
  Rows<T> X, GU, H, dY, dH, dGU, dX;  // one expert's rows
  for (int64_t e = 0; e < E; ++e) {
    const std::vector<int64_t>& at = slots[static_cast<size_t>(e)];
    const int64_t M = static_cast<int64_t>(at.size());
    if (M == 0) continue;
    X.resize(static_cast<size_t>(M * C));       // [M, C]
    dY.resize(static_cast<size_t>(M * C));      // [M, C]
    dX.resize(static_cast<size_t>(M * C));      // [M, C]
    GU.resize(static_cast<size_t>(M * 2 * I));  // [M, 2I]
    dGU.resize(static_cast<size_t>(M * 2 * I)); // [M, 2I]
    H.resize(static_cast<size_t>(M * I));       // [M, I]
    dH.resize(static_cast<size_t>(M * I));      // [M, I]
    for (int64_t r = 0; r < M; ++r) {
      const int64_t s = at[r], n = s / k;
      T dot = 0;  // d loss / d w_s = dout[n] . y[s]
      for (int64_t c = 0; c < C; ++c) {
        dot += dout[n * C + c] * y[s * C + c];
        dY[static_cast<size_t>(r * C + c)] = w[s] * dout[n * C + c];
      }
      dw[s] = dot;
      std::copy_n(x + n * C, C, X.data() + r * C);
    }
    gather_rows(GU.data(), gu, at, 2 * I);
    gather_rows(H.data(), h, at, I);
    linear_backward(dH.data(), ddown ? ddown + e * C * I : nullptr, dY.data(), H.data(),
                    down + e * C * I, M, I, C, /*accumulate_dx=*/false);
    sum_rows(extra.ddown_bias, dY.data(), e, M, C);
    for (int64_t r = 0; r < M; ++r)
      gate_backward(dGU.data() + r * 2 * I, dH.data() + r * I, GU.data() + r * 2 * I, I, extra);
    sum_rows(extra.dgate_up_bias, dGU.data(), e, M, 2 * I);
    linear_backward(dX.data(), dgate_up ? dgate_up + e * 2 * I * C : nullptr, dGU.data(),
                    X.data(), gate_up + e * 2 * I * C, M, C, 2 * I, /*accumulate_dx=*/false);
    for (int64_t r = 0; r < M; ++r) {
      const int64_t n = at[r] / k;
      for (int64_t c = 0; c < C; ++c) dx[n * C + c] += dX[static_cast<size_t>(r * C + c)];
    }
  }
}

template <class T>
void moe_aux_accumulate(double* tokens, double* prob_sum, const T* probs, const int32_t* idx,
                        int64_t N, int64_t E, int64_t k) {
  for (int64_t s = 0; s < N * k; ++s) tokens[idx[s]] += 1.0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t e = 0; e < E; ++e) prob_sum[e] += static_cast<double>(probs[n * E + e]);
}

double moe_aux_loss(const double* tokens, const double* prob_sum, double rows, int64_t E) {
  if (rows <= 0) return 0.0;
  double s = 0;
  for (int64_t e = 0; e < E; ++e) s += tokens[e] * prob_sum[e];
  return static_cast<double>(E) * s / (rows * rows);
}

template <class T>
void moe_aux_dprob(T* dprob, const double* tokens, double rows, int64_t E, double coef) {
  for (int64_t e = 0; e < E; ++e)
    dprob[e] = rows > 0 ? static_cast<T>(coef * static_cast<double>(E) * tokens[e] / (rows * rows))
                        : T(0);
}

#define ZT_MOE_INSTANTIATE(T)                                                                    \
  template void moe_route<T>(T*, int32_t*, T*, const T*, int64_t, int64_t, int64_t, bool, bool); \
  template void moe_route_backward<T>(T*, const T*, const T*, const T*, const int32_t*,         \
                                      const T*, int64_t, int64_t, int64_t, bool, bool);          \
  template void moe_experts_forward<T>(T*, T*, T*, T*, const T*, const T*, const T*,            \
                                       const int32_t*, const T*, int64_t, int64_t, int64_t,     \
                                       int64_t, int64_t, const ExpertExtras<T>&);                \
  template void moe_experts_backward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*, \
                                        const int32_t*, const T*, const T*, const T*, const T*, \
                                        int64_t, int64_t, int64_t, int64_t, int64_t,             \
                                        const ExpertExtras<T>&);                                 \
  template void moe_aux_accumulate<T>(double*, double*, const T*, const int32_t*, int64_t,      \
                                      int64_t, int64_t);                                         \
  template void moe_aux_dprob<T>(T*, const double*, double, int64_t, double);                \
  template void moe_router_logits<T>(T*, const T*, const T*, int64_t, int64_t, int64_t, const T*);
ZT_MOE_INSTANTIATE(float)
ZT_MOE_INSTANTIATE(double)
#undef ZT_MOE_INSTANTIATE

}  // namespace zt::kernels::cpu
