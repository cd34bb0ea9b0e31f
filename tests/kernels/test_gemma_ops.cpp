// Finite-difference checks in double of Gemma's kernels: the (1 + w) RMSNorm, the tanh-GELU
// GeGLU and the logit soft-cap, every coordinate (as test_ops_gradcheck.cpp), and their
// forward against the formulas written out.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(GemmaGradcheck, RmsnormOffset) {
  const int64_t N = 3, C = 8;
  auto x = randn(N * C, 3), w = randn(C, 4, 0.5), R = randn(N * C, 5);
  auto f = [&] {
    Vec y(N * C);
    rmsnorm_forward<double>(y.data(), nullptr, x.data(), w.data(), N, C, 1e-6, 1.0);
    return dot(y, R);
  };
  Vec y(N * C), rstd(N), dx(N * C, 0.0), dw(C, 0.0);
  rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6, 1.0);
  rmsnorm_backward(dx.data(), dw.data(), R.data(), x.data(), w.data(), rstd.data(), N, C, true,
                   1.0);
  expect_ok(check_all(f, x, dx, kH, kFloor), "rmsnorm (1 + w) dx");
  expect_ok(check_all(f, w, dw, kH, kFloor), "rmsnorm (1 + w) dw");
  // Zero weights with offset 1 are the identity scale: x / rms(x).
  Vec zero(C, 0.0), z(N * C);
  rmsnorm_forward<double>(z.data(), nullptr, x.data(), zero.data(), N, C, 0.0, 1.0);
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x[n * C + c] * x[n * C + c] / C;
    for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(z[n * C + c], x[n * C + c] / std::sqrt(ms), 1e-14);
  }
}

TEST(GemmaGradcheck, GegluTanh) {
  const int64_t n = 40;
  auto g = randn(n, 18, 3.0), u = randn(n, 19), R = randn(n, 20);
  auto f = [&] {
    Vec h(n);
    geglu_forward(h.data(), g.data(), u.data(), n);
    return dot(h, R);
  };
  Vec h(n), dg(n, 0.0), du(n, 0.0);
  geglu_forward(h.data(), g.data(), u.data(), n);
  for (int64_t i = 0; i < n; ++i) {  // torch's gelu(approximate="tanh")
    const double x = g[i];
    const double ref = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(h[i], ref * u[i], 1e-14 * (1 + std::abs(ref * u[i])));
  }
  geglu_backward(dg.data(), du.data(), R.data(), g.data(), u.data(), n);
  expect_ok(check_all(f, g, dg, kH, kFloor), "geglu dg");
  expect_ok(check_all(f, u, du, kH, kFloor), "geglu du");
  Vec wg(n), wu(n);  // write mode equals accumulating into zeros
  geglu_backward(wg.data(), wu.data(), R.data(), g.data(), u.data(), n, false);
  EXPECT_EQ(wg, dg);
  EXPECT_EQ(wu, du);
}

TEST(GemmaGradcheck, Softcap) {
  const int64_t n = 30;
  const double cap = 2.5;
  auto x = randn(n, 21, 4.0), R = randn(n, 22);
  auto f = [&] {
    Vec y(n);
    softcap_forward(y.data(), x.data(), n, cap);
    return dot(y, R);
  };
  Vec y(n), dx(n);
  softcap_forward(y.data(), x.data(), n, cap);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(y[i], cap * std::tanh(x[i] / cap), 1e-15 * cap);
    EXPECT_LT(std::abs(y[i]), cap);
  }
  softcap_backward(dx.data(), R.data(), y.data(), n, cap);
  expect_ok(check_all(f, x, dx, kH, kFloor), "softcap dx");
}

}  // namespace
}  // namespace zt::kernels::cpu
