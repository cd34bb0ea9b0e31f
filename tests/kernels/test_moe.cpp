// The mixture-of-experts block (kernels/moe.hpp), CPU reference:
//   - forward against a naive loop written from the formula (every expert evaluated
//     densely, no grouping, no linear or SwiGLU kernel);
//   - finite differences in double of L = sum(out * R) + coef * aux with respect to x, the
//     router weight, the experts' gate_up and down (five-point, h = 1e-4, a perturbation
//     never changes a top-k choice: checked);
//   - the load-balancing loss against its definition counted by hand.
// transformers' MixtralSparseMoeBlock and load_balancing_loss_func are the peer in
// moe_peer_test.py (label hf-torch): outputs, choices with ties, the aux loss, gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "gradcheck.hpp"
#include "zt/kernels/linear.hpp"
#include "zt/kernels/moe.hpp"

namespace zt::kernels::cpu {
namespace {

using testing::check_all;
using testing::dot;
using testing::ErrStats;
using testing::randn;
using Vec = std::vector<double>;

struct Shape {
  int64_t N = 7, C = 6, I = 5, E = 4, k = 2;
};

// The block's forward: out [N, C]; fills idx [N, k] and the aux statistics.
struct BlockRun {
  Vec out, logits, probs, w, gu, h, y;
  std::vector<int32_t> idx;
  std::vector<double> tokens, prob_sum;
};

BlockRun forward(const Shape& s, const Vec& x, const Vec& Wr, const Vec& gate_up, const Vec& down) {
  BlockRun r;
  r.logits.resize(s.N * s.E);
  r.probs.resize(s.N * s.E);
  r.w.resize(s.N * s.k);
  r.idx.resize(s.N * s.k);
  r.out.resize(s.N * s.C);
  r.gu.resize(s.N * s.k * 2 * s.I);
  r.h.resize(s.N * s.k * s.I);
  r.y.resize(s.N * s.k * s.C);
  r.tokens.assign(s.E, 0.0);
  r.prob_sum.assign(s.E, 0.0);
  linear_forward(r.logits.data(), x.data(), Wr.data(), s.N, s.C, s.E);
  moe_route(r.probs.data(), r.idx.data(), r.w.data(), r.logits.data(), s.N, s.E, s.k);
  moe_experts_forward(r.out.data(), r.gu.data(), r.h.data(), r.y.data(), x.data(), gate_up.data(),
                      down.data(), r.idx.data(), r.w.data(), s.N, s.C, s.I, s.E, s.k);
  moe_aux_accumulate(r.tokens.data(), r.prob_sum.data(), r.probs.data(), r.idx.data(), s.N, s.E,
                     s.k);
  return r;
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(Moe, ForwardEqualsTheFormula) {
  const Shape s;
  const Vec x = randn(s.N * s.C, 1), Wr = randn(s.E * s.C, 2, 2.0);
  const Vec gate_up = randn(s.E * 2 * s.I * s.C, 3), down = randn(s.E * s.C * s.I, 4);
  const BlockRun r = forward(s, x, Wr, gate_up, down);
  for (int64_t n = 0; n < s.N; ++n) {
    // Router by hand: softmax, then the k largest by a full sort.
    std::vector<double> p(s.E);
    double z = 0;
    for (int64_t e = 0; e < s.E; ++e) {
      double l = 0;
      for (int64_t c = 0; c < s.C; ++c) l += x[n * s.C + c] * Wr[e * s.C + c];
      z += (p[e] = std::exp(l));
    }
    for (double& v : p) v /= z;
    std::vector<int64_t> order(s.E);
    for (int64_t e = 0; e < s.E; ++e) order[e] = e;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double chosen = 0;
    for (int64_t j = 0; j < s.k; ++j) chosen += p[order[j]];
    for (int64_t j = 0; j < s.k; ++j) EXPECT_EQ(r.idx[n * s.k + j], order[j]) << "row " << n;
    // Every chosen expert by hand.
    for (int64_t c = 0; c < s.C; ++c) {
      double want = 0;
      for (int64_t j = 0; j < s.k; ++j) {
        const int64_t e = order[j];
        double acc = 0;
        for (int64_t i = 0; i < s.I; ++i) {
          double g = 0, u = 0;
          for (int64_t cc = 0; cc < s.C; ++cc) {
            g += gate_up[(e * 2 * s.I + i) * s.C + cc] * x[n * s.C + cc];
            u += gate_up[(e * 2 * s.I + s.I + i) * s.C + cc] * x[n * s.C + cc];
          }
          acc += down[(e * s.C + c) * s.I + i] * silu(g) * u;
        }
        want += p[e] / chosen * acc;
      }
      EXPECT_NEAR(r.out[n * s.C + c], want, 1e-12 * (1 + std::abs(want)));
    }
  }
}

TEST(Moe, AuxLossIsItsDefinition) {
  const Shape s;
  const Vec x = randn(s.N * s.C, 5), Wr = randn(s.E * s.C, 6, 2.0);
  const Vec gate_up = randn(s.E * 2 * s.I * s.C, 7), down = randn(s.E * s.C * s.I, 8);
  const BlockRun a = forward(s, x, Wr, gate_up, down);
  // Two "layers": the same rows twice, so R = 2N and T, P double.
  std::vector<double> tokens = a.tokens, prob_sum = a.prob_sum;
  moe_aux_accumulate(tokens.data(), prob_sum.data(), a.probs.data(), a.idx.data(), s.N, s.E, s.k);
  double want = 0;
  for (int64_t e = 0; e < s.E; ++e) {
    double t = 0, p = 0;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t j = 0; j < s.k; ++j) t += a.idx[n * s.k + j] == e ? 2.0 : 0.0;
      p += 2.0 * a.probs[n * s.E + e];
    }
    want += (t / (2.0 * s.N)) * (p / (2.0 * s.N));
  }
  want *= static_cast<double>(s.E);
  EXPECT_NEAR(moe_aux_loss(tokens.data(), prob_sum.data(), 2.0 * s.N, s.E), want, 1e-14);
  // Uniform routing gives exactly k: E * sum_e (k/E) (1/E) * E... = k.
  std::vector<double> t_uniform(s.E, s.k * 1.0), p_uniform(s.E, 1.0);
  EXPECT_NEAR(moe_aux_loss(t_uniform.data(), p_uniform.data(), s.E * 1.0, s.E), s.k, 1e-14);
}

TEST(Moe, GradcheckOfTheBlockWithTheAuxLoss) {
  for (const Shape s : {Shape{}, Shape{9, 4, 3, 8, 3}, Shape{5, 4, 3, 3, 1}}) {
    const double coef = 0.37;
    Vec x = randn(s.N * s.C, 11), Wr = randn(s.E * s.C, 12, 2.0);
    Vec gate_up = randn(s.E * 2 * s.I * s.C, 13), down = randn(s.E * s.C * s.I, 14);
    const Vec R = randn(s.N * s.C, 15);
    const BlockRun base = forward(s, x, Wr, gate_up, down);
    int flips = 0;
    auto f = [&] {
      const BlockRun r = forward(s, x, Wr, gate_up, down);
      if (r.idx != base.idx) ++flips;
      return dot(r.out, R) +
             coef * moe_aux_loss(r.tokens.data(), r.prob_sum.data(), static_cast<double>(s.N), s.E);
    };
    // Analytic: experts backward, then the router's (with the aux loss's d/dp), then the
    // router's linear.
    Vec dx(s.N * s.C, 0.0), dWr(s.E * s.C, 0.0), dgu(gate_up.size(), 0.0), ddown(down.size(), 0.0);
    Vec dw(s.N * s.k), dprob(s.E), dlogits(s.N * s.E);
    moe_experts_backward(dx.data(), dgu.data(), ddown.data(), dw.data(), R.data(), x.data(),
                         gate_up.data(), down.data(), base.idx.data(), base.w.data(),
                         base.gu.data(), base.h.data(), base.y.data(), s.N, s.C, s.I, s.E, s.k);
    moe_aux_dprob(dprob.data(), base.tokens.data(), static_cast<double>(s.N), s.E, coef);
    moe_route_backward(dlogits.data(), dw.data(), dprob.data(), base.probs.data(),
                       base.idx.data(), base.w.data(), s.N, s.E, s.k);
    linear_backward(dx.data(), dWr.data(), dlogits.data(), x.data(), Wr.data(), s.N, s.C, s.E);
    char tag[32];
    std::snprintf(tag, sizeof tag, "E%lld k%lld", static_cast<long long>(s.E),
                  static_cast<long long>(s.k));
    for (auto [name, v, g] : {std::tuple{"x", &x, &dx}, std::tuple{"router", &Wr, &dWr},
                              std::tuple{"gate_up", &gate_up, &dgu},
                              std::tuple{"down", &down, &ddown}}) {
      const ErrStats st = check_all(f, *v, *g, 1e-4, 1e-6);
      char what[64];
      std::snprintf(what, sizeof what, "moe %s d%s", tag, name);
      st.print(what);
      EXPECT_LT(st.max_rel, 1e-6) << tag << " d" << name;
    }
    EXPECT_EQ(flips, 0) << tag << ": a perturbation changed the top-k choice; pick other seeds";
  }
}

}  // namespace
}  // namespace zt::kernels::cpu
