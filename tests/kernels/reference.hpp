#pragma once
// Naive double-precision reference implementations of the model's operations (test
// helper), written independently of src/kernels: plain loops, textbook formulas
// (RoPE through complex multiplication, attention through an explicit log-sum-exp).
#include <cmath>
#include <complex>
#include <cstdint>
#include <vector>

namespace zt::testing::ref {

using Vec = std::vector<double>;

// y [N, out] = x [N, in] W[out, in]^T
inline Vec linear(const Vec& x, const double* W, int64_t N, int64_t in, int64_t out) {
  Vec y(static_cast<size_t>(N * out), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t i = 0; i < in; ++i) s += x[n * in + i] * W[o * in + i];
      y[n * out + o] = s;
    }
  return y;
}

inline Vec rmsnorm(const Vec& x, const double* w, int64_t N, int64_t C, double eps) {
  Vec y(x.size());
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x[n * C + c] * x[n * C + c];
    ms /= static_cast<double>(C);
    const double denom = std::sqrt(ms + eps);
    for (int64_t c = 0; c < C; ++c) y[n * C + c] = x[n * C + c] / denom * w[c];
  }
  return y;
}

// x [B, T, nh, D]: pairs (x[i], x[i + D/2]) as complex numbers times e^{i p theta^(-2i/D)}.
// pos [B, T] (optional): each token's position (packed examples); empty: t.
inline Vec rope(const Vec& x, int64_t B, int64_t T, int64_t nh, int64_t D, double theta,
                const std::vector<int32_t>& pos = {}) {
  Vec y(x.size());
  const int64_t half = D / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < nh; ++h)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t base = ((b * T + t) * nh + h) * D;
          const std::complex<double> z(x[base + i], x[base + i + half]);
          const double p = pos.empty() ? static_cast<double>(t) : pos[b * T + t];
          const double ang = p / std::pow(theta, 2.0 * i / static_cast<double>(D));
          const std::complex<double> r = z * std::polar(1.0, ang);
          y[base + i] = r.real();
          y[base + i + half] = r.imag();
        }
  return y;
}

// q [B, T, H, D], k, v [B, T, G, D] -> out [B, T, H, D]; causal, head h uses kv head h*G/H.
// seg [B, T] (optional): an example id per token; a query sees only keys of its own
// example (packed sequences). window > 0: a query at t sees only keys s with
// t - s < window (transformers' sliding_window_overlay: kv_idx > q_idx - window).
inline Vec attention(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t T, int64_t H,
                     int64_t G, int64_t D, const std::vector<int>& seg = {},
                     int64_t window = 0) {
  Vec out(q.size(), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h * G / H;
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> score(static_cast<size_t>(t + 1));
        double mx = -INFINITY;
        for (int64_t s = 0; s <= t; ++s) {
          if ((!seg.empty() && seg[b * T + s] != seg[b * T + t]) ||
              (window > 0 && t - s >= window)) {
            score[s] = -INFINITY;
            continue;
          }
          double d = 0;
          for (int64_t e = 0; e < D; ++e)
            d += q[((b * T + t) * H + h) * D + e] * k[((b * T + s) * G + g) * D + e];
          score[s] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, score[s]);
        }
        double z = 0;
        for (int64_t s = 0; s <= t; ++s) z += std::exp(score[s] - mx);
        const double lse = mx + std::log(z);
        for (int64_t s = 0; s <= t; ++s) {
          const double p = std::exp(score[s] - lse);
          for (int64_t e = 0; e < D; ++e)
            out[((b * T + t) * H + h) * D + e] += p * v[((b * T + s) * G + g) * D + e];
        }
      }
    }
  return out;
}

inline Vec swiglu(const Vec& g, const Vec& u) {
  Vec h(g.size());
  for (size_t i = 0; i < g.size(); ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  return h;
}

// Sum over rows with target >= 0 of -log softmax(logits[n])[target[n]].
inline double cross_entropy_sum(const Vec& logits, const std::vector<int32_t>& targets, int64_t N,
                                int64_t V) {
  double total = 0;
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0) continue;
    double mx = -INFINITY;
    for (int64_t j = 0; j < V; ++j) mx = std::max(mx, logits[n * V + j]);
    double z = 0;
    for (int64_t j = 0; j < V; ++j) z += std::exp(logits[n * V + j] - mx);
    total += -(logits[n * V + targets[n]] - mx - std::log(z));
  }
  return total;
}

}  // namespace zt::testing::ref
