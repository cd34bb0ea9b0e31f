// Finite-difference checks, in double precision, of every kernel's backward.
// Objective: L = sum(out * R) with a fixed random R, so dL/dout = R. Every input
// coordinate is checked with a five-point central difference (h = 1e-3), error measure
// rel = |analytic - numeric| / max(|analytic|, |numeric|, 1e-6); bound 1e-6.
#include <gtest/gtest.h>

#include <omp.h>

#include <limits>

#include "gradcheck_expect.hpp"
#include "zt/kernels/cpu.hpp"

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

TEST(KernelGradcheck, Embedding) {
  const int64_t N = 6, V = 5, C = 4;
  auto W = randn(V * C, 1);
  std::vector<int32_t> tok = {1, 4, 1, 0, 1, 3};  // repeats must add up
  auto R = randn(N * C, 2);
  auto f = [&] {
    Vec out(N * C);
    embedding_forward(out.data(), tok.data(), W.data(), N, V, C);
    return dot(out, R);
  };
  Vec dW(V * C, 0.0);
  embedding_backward(dW.data(), R.data(), tok.data(), N, C);
  expect_ok(check_all(f, W, dW, kH, kFloor), "embedding dW");
}

TEST(KernelGradcheck, Rmsnorm) {
  const int64_t N = 3, C = 8;
  auto x = randn(N * C, 3), w = randn(C, 4, 0.5, 1.0), R = randn(N * C, 5);
  auto f = [&] {
    Vec y(N * C);
    rmsnorm_forward<double>(y.data(), nullptr, x.data(), w.data(), N, C, 1e-5);
    return dot(y, R);
  };
  Vec y(N * C), rstd(N), dx(N * C, 0.0), dw(C, 0.0);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5);
  rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C);
  expect_ok(check_all(f, x, dx, kH, kFloor), "rmsnorm dx");
  expect_ok(check_all(f, w, dw, kH, kFloor), "rmsnorm dw");
}

TEST(KernelGradcheck, Linear) {
  const int64_t N = 3, in = 5, out = 4;
  auto x = randn(N * in, 6), W = randn(out * in, 7), R = randn(N * out, 8);
  auto f = [&] {
    Vec y(N * out);
    linear_forward(y.data(), x.data(), W.data(), N, in, out);
    return dot(y, R);
  };
  Vec dx(N * in, 0.0), dW(out * in, 0.0);
  linear_backward(dx.data(), dW.data(), R.data(), x.data(), W.data(), N, in, out);
  expect_ok(check_all(f, x, dx, kH, kFloor), "linear dx");
  expect_ok(check_all(f, W, dW, kH, kFloor), "linear dW");
}

TEST(KernelGradcheck, LinearAccumulates) {
  const int64_t N = 2, in = 3, out = 2;
  auto x = randn(N * in, 9), W = randn(out * in, 10), R = randn(N * out, 11);
  Vec dx1(N * in, 0.0), dW1(out * in, 0.0), dx2(N * in, 0.0), dW2(out * in, 0.0);
  linear_backward(dx1.data(), dW1.data(), R.data(), x.data(), W.data(), N, in, out);
  linear_backward(dx2.data(), dW2.data(), R.data(), x.data(), W.data(), N, in, out);
  linear_backward(dx2.data(), dW2.data(), R.data(), x.data(), W.data(), N, in, out);
  for (size_t i = 0; i < dx1.size(); ++i) EXPECT_NEAR(dx2[i], 2 * dx1[i], 1e-14);
  for (size_t i = 0; i < dW1.size(); ++i) EXPECT_NEAR(dW2[i], 2 * dW1[i], 1e-14);
}

TEST(KernelGradcheck, Rope) {
  const int64_t B = 2, T = 5, nh = 3, D = 8;
  Vec cs(T * D / 2), sn(T * D / 2);
  rope_table(cs.data(), sn.data(), T, D, 10000.0);
  auto x = randn(B * T * nh * D, 12), R = randn(B * T * nh * D, 13);
  auto f = [&] {
    Vec y = x;
    rope_forward(y.data(), cs.data(), sn.data(), B, T, nh, D);
    return dot(y, R);
  };
  Vec dx = R;
  rope_backward(dx.data(), cs.data(), sn.data(), B, T, nh, D);
  expect_ok(check_all(f, x, dx, kH, kFloor), "rope dx");
}

// Positions restarting at example boundaries (packed sequences): each token rotated by
// its position within its example.
TEST(KernelGradcheck, RopeWithPositions) {
  const int64_t B = 2, T = 5, nh = 3, D = 8;
  const std::vector<int32_t> pos = {0, 1, 0, 1, 2, /**/ 0, 1, 2, 3, 0};
  Vec cs(T * D / 2), sn(T * D / 2);
  rope_table(cs.data(), sn.data(), T, D, 10000.0);
  auto x = randn(B * T * nh * D, 22), R = randn(B * T * nh * D, 23);
  auto f = [&] {
    Vec y = x;
    rope_forward(y.data(), cs.data(), sn.data(), B, T, nh, D, pos.data());
    return dot(y, R);
  };
  Vec dx = R;
  rope_backward(dx.data(), cs.data(), sn.data(), B, T, nh, D, pos.data());
  expect_ok(check_all(f, x, dx, kH, kFloor), "rope with positions dx");
}

// Attention with example boundaries: the backward (which reads the mask from probs)
// against finite differences of the masked forward.
TEST(KernelGradcheck, AttentionWithPositions) {
  const int64_t B = 2, T = 6, H = 4, G = 2, D = 4;
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 0, /**/ 0, 1, 0, 1, 2, 3};
  auto q = randn(B * T * H * D, 24), k = randn(B * T * G * D, 25), v = randn(B * T * G * D, 26);
  auto R = randn(B * T * H * D, 27);
  auto f = [&] {
    Vec out(q.size()), probs(B * H * T * T);
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                      pos.data());
    return dot(out, R);
  };
  Vec out(q.size()), probs(B * H * T * T);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                    pos.data());
  Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  Vec scratch(attention_backward_scratch(T, omp_get_max_threads()));
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), R.data(), q.data(),
                     k.data(), v.data(), probs.data(), B, T, H, G, D);
  expect_ok(check_all(f, q, dq, kH, kFloor), "attention with positions dq");
  expect_ok(check_all(f, k, dk, kH, kFloor), "attention with positions dk");
  expect_ok(check_all(f, v, dv, kH, kFloor), "attention with positions dv");
}

// Sliding window (Mistral), with and without example boundaries: the backward reads the
// banded mask from probs; finite differences of the windowed forward.
TEST(KernelGradcheck, AttentionSlidingWindow) {
  const int64_t B = 2, T = 7, H = 4, G = 2, D = 4;
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4, 0, 1, /**/ 0, 1, 0, 1, 2, 3, 4};
  auto q = randn(B * T * H * D, 34), k = randn(B * T * G * D, 35), v = randn(B * T * G * D, 36);
  auto R = randn(B * T * H * D, 37);
  for (const int32_t* p : {static_cast<const int32_t*>(nullptr), pos.data()})
    for (const int64_t w : {int64_t{1}, int64_t{3}}) {
      const std::string tag = "attention window " + std::to_string(w) +
                              (p ? " with positions" : "");
      auto f = [&] {
        Vec out(q.size()), probs(B * H * T * T);
        attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G,
                          D, p, w);
        return dot(out, R);
      };
      Vec out(q.size()), probs(B * H * T * T);
      attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D,
                        p, w);
      Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
      Vec scratch(attention_backward_scratch(T, omp_get_max_threads()));
      attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), R.data(), q.data(),
                         k.data(), v.data(), probs.data(), B, T, H, G, D);
      expect_ok(check_all(f, q, dq, kH, kFloor), tag + " dq");
      expect_ok(check_all(f, k, dk, kH, kFloor), tag + " dk");
      expect_ok(check_all(f, v, dv, kH, kFloor), tag + " dv");
    }
}

struct AttnShape {
  int64_t B, T, H, G, D;
};

class AttentionGradcheck : public ::testing::TestWithParam<AttnShape> {};

TEST_P(AttentionGradcheck, QKV) {
  const auto [B, T, H, G, D] = GetParam();
  auto q = randn(B * T * H * D, 14), k = randn(B * T * G * D, 15), v = randn(B * T * G * D, 16);
  auto R = randn(B * T * H * D, 17);
  auto f = [&] {
    Vec out(q.size()), probs(B * H * T * T);
    attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D);
    return dot(out, R);
  };
  Vec out(q.size()), probs(B * H * T * T);
  attention_forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, H, G, D);
  Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  Vec scratch(attention_backward_scratch(T, omp_get_max_threads()));
  attention_backward(dq.data(), dk.data(), dv.data(), scratch.data(), R.data(), q.data(),
                     k.data(), v.data(), probs.data(), B, T, H, G, D);
  const std::string tag = "attention H" + std::to_string(H) + " G" + std::to_string(G);
  expect_ok(check_all(f, q, dq, kH, kFloor), tag + " dq");
  expect_ok(check_all(f, k, dk, kH, kFloor), tag + " dk");
  expect_ok(check_all(f, v, dv, kH, kFloor), tag + " dv");
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionGradcheck,
                         ::testing::Values(AttnShape{2, 5, 4, 2, 4},   // GQA
                                           AttnShape{1, 6, 2, 2, 6},   // MHA
                                           AttnShape{2, 4, 3, 1, 2})); // MQA

TEST(KernelGradcheck, Swiglu) {
  const int64_t n = 24;
  auto g = randn(n, 18, 3.0), u = randn(n, 19), R = randn(n, 20);
  auto f = [&] {
    Vec h(n);
    swiglu_forward(h.data(), g.data(), u.data(), n);
    return dot(h, R);
  };
  Vec dg(n, 0.0), du(n, 0.0);
  swiglu_backward(dg.data(), du.data(), R.data(), g.data(), u.data(), n);
  expect_ok(check_all(f, g, dg, kH, kFloor), "swiglu dg");
  expect_ok(check_all(f, u, du, kH, kFloor), "swiglu du");
}

TEST(KernelGradcheck, CrossEntropy) {
  const int64_t N = 5, V = 7;
  auto logits = randn(N * V, 21, 2.0);
  std::vector<int32_t> tg = {2, -1, 6, 0, 3};
  const double scale = 0.37;
  auto f = [&] { return scale * cross_entropy<double>(nullptr, logits.data(), tg.data(), N, V, 1.0).loss_sum; };
  Vec dl(N * V);
  cross_entropy(dl.data(), logits.data(), tg.data(), N, V, scale);
  expect_ok(check_all(f, logits, dl, kH, kFloor), "cross_entropy dlogits");
  for (int64_t j = 0; j < V; ++j) EXPECT_EQ(dl[1 * V + j], 0.0);  // ignored row
}

TEST(KernelGradcheck, Residual) {
  const int64_t n = 9;
  auto a = randn(n, 22), b = randn(n, 23), R = randn(n, 24);
  auto f = [&] {
    Vec out(n);
    residual_forward(out.data(), a.data(), b.data(), n);
    return dot(out, R);
  };
  Vec da(n, 0.0), db(n, 0.0);
  residual_backward(da.data(), db.data(), R.data(), n);
  expect_ok(check_all(f, a, da, kH, kFloor), "residual da");
  expect_ok(check_all(f, b, db, kH, kFloor), "residual db");
}

}  // namespace
}  // namespace zt::kernels::cpu

namespace zt::kernels::cpu {
namespace {

// accumulate = false must give exactly what accumulate = true gives into zeroed buffers,
// whatever the output buffer held before (here: NaN garbage).
TEST(KernelOverwrite, WriteModeEqualsAccumulateIntoZero) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  {  // linear
    const int64_t N = 4, in = 6, out = 5;
    auto x = randn(N * in, 30), W = randn(out * in, 31), R = randn(N * out, 32);
    Vec a(N * in, 0.0), b(N * in, nan), dW(out * in, 0.0);
    linear_backward(a.data(), dW.data(), R.data(), x.data(), W.data(), N, in, out, true);
    linear_backward<double>(b.data(), nullptr, R.data(), x.data(), W.data(), N, in, out, false);
    // Eigen may pick a different product kernel for `=` and `+=`: equal to rounding
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-14);
  }
  {  // rmsnorm
    const int64_t N = 3, C = 8;
    auto x = randn(N * C, 33), w = randn(C, 34), R = randn(N * C, 35);
    Vec y(N * C), r(N), a(N * C, 0.0), b(N * C, nan);
    rmsnorm_forward(y.data(), r.data(), x.data(), w.data(), N, C, 1e-5);
    rmsnorm_backward<double>(a.data(), nullptr, R.data(), x.data(), w.data(), r.data(), N, C, true);
    rmsnorm_backward<double>(b.data(), nullptr, R.data(), x.data(), w.data(), r.data(), N, C, false);
    EXPECT_EQ(a, b);
  }
  {  // swiglu
    const int64_t n = 3000;  // more than one internal block
    auto g = randn(n, 36, 3.0), u = randn(n, 37), R = randn(n, 38);
    Vec ag(n, 0.0), au(n, 0.0), bg(n, nan), bu(n, nan);
    swiglu_backward(ag.data(), au.data(), R.data(), g.data(), u.data(), n, true);
    swiglu_backward(bg.data(), bu.data(), R.data(), g.data(), u.data(), n, false);
    EXPECT_EQ(ag, bg);
    EXPECT_EQ(au, bu);
  }
  {  // attention, GQA (the first head of a group writes dK/dV, the others add)
    const int64_t B = 2, T = 6, H = 4, G = 2, D = 4;
    auto q = randn(B * T * H * D, 39), k = randn(B * T * G * D, 40), v = randn(B * T * G * D, 41);
    auto R = randn(B * T * H * D, 42);
    Vec o(q.size()), p(B * H * T * T), s(attention_backward_scratch(T, omp_get_max_threads()));
    attention_forward(o.data(), p.data(), q.data(), k.data(), v.data(), B, T, H, G, D);
    Vec aq(q.size(), 0.0), ak(k.size(), 0.0), av(v.size(), 0.0);
    Vec bq(q.size(), nan), bk(k.size(), nan), bv(v.size(), nan);
    attention_backward(aq.data(), ak.data(), av.data(), s.data(), R.data(), q.data(), k.data(),
                       v.data(), p.data(), B, T, H, G, D, true);
    attention_backward(bq.data(), bk.data(), bv.data(), s.data(), R.data(), q.data(), k.data(),
                       v.data(), p.data(), B, T, H, G, D, false);
    for (size_t i = 0; i < aq.size(); ++i) EXPECT_NEAR(aq[i], bq[i], 1e-14);
    for (size_t i = 0; i < ak.size(); ++i) EXPECT_NEAR(ak[i], bk[i], 1e-14);
    for (size_t i = 0; i < av.size(); ++i) EXPECT_NEAR(av[i], bv[i], 1e-14);
  }
}

}  // namespace
}  // namespace zt::kernels::cpu
