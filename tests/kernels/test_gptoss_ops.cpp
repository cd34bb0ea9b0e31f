// Finite-difference checks in double of gpt-oss's kernels: the clamped SwiGLU, and the MoE
// block with the router's bias, the softmax over the k chosen logits and the experts'
// biases (every coordinate, as test_gemma_ops.cpp), with their forwards against the
// formulas of transformers' GptOssTopKRouter and GptOssExperts written out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "gradcheck_expect.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/moe.hpp"

namespace zt::kernels::cpu {
namespace {

using testing::check_all;
using testing::dot;
using testing::ErrStats;
using testing::randn;
using Vec = std::vector<double>;

using testing::expect_ok;
using testing::kFloor;
using testing::kH;
using testing::kTol;
constexpr double kLimit = 1.5, kAlpha = 1.702;

// Values within 0.02 of a clamp bound moved off it (the stencil must not cross a kink).
void off_kinks(Vec& v) {
  for (double& x : v)
    for (double b : {kLimit, -kLimit})
      if (std::abs(x - b) < 0.02) x = b + (x < b ? -0.05 : 0.05);
}

TEST(GptOssGradcheck, SwigluClamped) {
  const int64_t n = 60;
  auto g = randn(n, 31, 2.0), u = randn(n, 32, 2.0), R = randn(n, 33);
  off_kinks(g);
  off_kinks(u);
  int clamped_g = 0, clamped_u = 0;
  for (int64_t i = 0; i < n; ++i) {
    clamped_g += g[i] > kLimit;
    clamped_u += std::abs(u[i]) > kLimit;
  }
  ASSERT_GT(clamped_g, 3);
  ASSERT_GT(clamped_u, 3);
  auto f = [&] {
    Vec h(n);
    swiglu_clamped_forward(h.data(), g.data(), u.data(), n, kLimit, kAlpha);
    return dot(h, R);
  };
  Vec h(n), dg(n, 0.5), du(n, 0.5);  // accumulate onto 0.5
  swiglu_clamped_forward(h.data(), g.data(), u.data(), n, kLimit, kAlpha);
  for (int64_t i = 0; i < n; ++i) {  // transformers: (up + 1) * gate * sigmoid(gate * alpha)
    const double gc = std::min(g[i], kLimit), uc = std::clamp(u[i], -kLimit, kLimit);
    EXPECT_NEAR(h[i], (uc + 1) * gc / (1 + std::exp(-gc * kAlpha)), 1e-14);
  }
  swiglu_clamped_backward(dg.data(), du.data(), R.data(), g.data(), u.data(), n, kLimit, kAlpha);
  for (double& x : dg) x -= 0.5;
  for (double& x : du) x -= 0.5;
  expect_ok(check_all(f, g, dg, kH, kFloor), "swiglu clamped dg");
  expect_ok(check_all(f, u, du, kH, kFloor), "swiglu clamped du");
}

// The whole routed MLP: logits = x Wr^T + b, top 2 of 4 by logit, w = softmax of the two,
// out = sum_j w_j (down_j h_j + db_j), h = clamped SwiGLU of gate_up_j x + bgu_j.
TEST(GptOssGradcheck, MoeWithBiases) {
  const int64_t N = 6, C = 5, I = 3, E = 4, k = 2;
  auto x = randn(N * C, 41), Wr = randn(E * C, 42, 0.5), br = randn(E, 43, 0.7);
  auto gu = randn(E * 2 * I * C, 44, 0.6), dn = randn(E * C * I, 45, 0.5);
  auto bgu = randn(E * 2 * I, 46, 0.5), bd = randn(E * C, 47, 0.5), R = randn(N * C, 48);
  Vec logits(N * E), probs(N * E), w(N * k), out(N * C), gus(N * k * 2 * I), hs(N * k * I),
      ys(N * k * C);
  std::vector<int32_t> idx(N * k);
  const auto forward = [&] {
    moe_router_logits(logits.data(), x.data(), Wr.data(), N, C, E, br.data());
    moe_route(probs.data(), idx.data(), w.data(), logits.data(), N, E, k, true, true);
    ExpertExtras<double> ex{.gate_up_bias = bgu.data(), .down_bias = bd.data(),
                            .swiglu_limit = kLimit, .swiglu_alpha = kAlpha};
    moe_experts_forward(out.data(), gus.data(), hs.data(), ys.data(), x.data(), gu.data(),
                        dn.data(), idx.data(), w.data(), N, C, I, E, k, ex);
    return dot(out, R);
  };
  forward();
  const std::vector<int32_t> route = idx;
  for (int64_t n = 0; n < N; ++n) {  // the weights: softmax of the two largest logits
    const double* l = logits.data() + n * E;
    const double a = l[idx[n * k]], b = l[idx[n * k + 1]];
    for (int64_t e = 0; e < E; ++e)
      if (e != idx[n * k] && e != idx[n * k + 1]) {
        EXPECT_LT(l[e], b);
      }
    EXPECT_GE(a, b);
    EXPECT_NEAR(w[n * k], 1 / (1 + std::exp(b - a)), 1e-15);
  }
  Vec dx(N * C, 0.0), dgu(gu.size(), 0.0), ddn(dn.size(), 0.0), dbgu(bgu.size(), 0.0),
      dbd(bd.size(), 0.0), dw(N * k), dl(N * E), dWr(Wr.size(), 0.0), dbr(E, 0.0);
  ExpertExtras<double> ex{.gate_up_bias = bgu.data(), .down_bias = bd.data(),
                          .dgate_up_bias = dbgu.data(), .ddown_bias = dbd.data(),
                          .swiglu_limit = kLimit, .swiglu_alpha = kAlpha};
  moe_experts_backward(dx.data(), dgu.data(), ddn.data(), dw.data(), R.data(), x.data(), gu.data(),
                       dn.data(), idx.data(), w.data(), gus.data(), hs.data(), ys.data(), N, C, I,
                       E, k, ex);
  moe_route_backward(dl.data(), dw.data(), static_cast<const double*>(nullptr), probs.data(),
                     idx.data(), w.data(), N, E, k, true, true);
  linear_backward(dx.data(), dWr.data(), dl.data(), x.data(), Wr.data(), N, C, E, true);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t e = 0; e < E; ++e) dbr[e] += dl[n * E + e];
  bool rerouted = false;
  const auto f = [&] {
    const double v = forward();
    rerouted = rerouted || idx != route;
    return v;
  };
  expect_ok(check_all(f, x, dx, kH, kFloor), "moe gpt-oss dx");
  expect_ok(check_all(f, Wr, dWr, kH, kFloor), "moe gpt-oss d router");
  expect_ok(check_all(f, br, dbr, kH, kFloor), "moe gpt-oss d router bias");
  expect_ok(check_all(f, gu, dgu, kH, kFloor), "moe gpt-oss d gate_up");
  expect_ok(check_all(f, bgu, dbgu, kH, kFloor), "moe gpt-oss d gate_up bias");
  expect_ok(check_all(f, dn, ddn, kH, kFloor), "moe gpt-oss d down");
  expect_ok(check_all(f, bd, dbd, kH, kFloor), "moe gpt-oss d down bias");
  EXPECT_FALSE(rerouted) << "a stencil changed the routing: pick other seeds";
}

}  // namespace
}  // namespace zt::kernels::cpu
