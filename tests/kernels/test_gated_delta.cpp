// Gated DeltaNet's CPU kernels (zt/kernels/gated_delta.hpp) in double: the chunked form of
// the rule against the recurrent form (one token at a time, the rule as written) over chunk
// boundaries; finite differences of every coordinate of the chunked form's backward, the
// conv1d + SiLU, the decay and the gated RMSNorm; float against double.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gradcheck_expect.hpp"
#include "zt/kernels/gated_delta.hpp"

namespace zt::kernels::cpu {
namespace {

using testing::check_all;
using testing::dot;
using testing::expect_ok;
using testing::kFloor;
using testing::kH;
using testing::randn;
using testing::rel_to_max;
using Vec = std::vector<double>;

// Random inputs of the rule: g <= 0 (log decays of 0.05 .. about 1.5), beta in (0, 1).
struct RuleInputs {
  DeltaShape s;
  Vec q, k, v, g, beta, state0;
  RuleInputs(const DeltaShape& shape, uint64_t seed) : s(shape) {
    const auto nq = static_cast<size_t>(s.B * s.T * s.Hk * s.Dk);
    const auto nh = static_cast<size_t>(s.B * s.T * s.Hv);
    q = randn(nq, seed + 1);
    k = randn(nq, seed + 2);
    v = randn(static_cast<size_t>(s.B * s.T * s.Hv * s.Dv), seed + 3);
    g = randn(nh, seed + 4, 0.5);
    for (double& x : g) x = -0.05 - std::abs(x);
    beta = randn(nh, seed + 5, 1.5);
    for (double& x : beta) x = 1 / (1 + std::exp(-x));
    state0 = randn(static_cast<size_t>(s.B * s.Hv * s.Dk * s.Dv), seed + 6, 0.5);
  }
  size_t n_out() const { return static_cast<size_t>(s.B * s.T * s.Hv * s.Dv); }
  size_t n_state() const { return static_cast<size_t>(s.B * s.Hv * s.Dk * s.Dv); }
};

std::string name(const DeltaShape& s, bool with_state) {
  return "B " + std::to_string(s.B) + " T " + std::to_string(s.T) + " Hk " + std::to_string(s.Hk) +
         " Hv " + std::to_string(s.Hv) + " chunk " + std::to_string(s.chunk) +
         (with_state ? " state0" : "");
}

TEST(GatedDelta, ChunkedEqualsRecurrent) {
  const int64_t chunk = 64;
  for (int64_t T : {int64_t{1}, chunk - 1, chunk, 2 * chunk + 5}) {
    for (int64_t Hk : {int64_t{2}, int64_t{1}}) {  // Hv = Hk, Hv = 2 Hk
      for (bool with_state : {false, true}) {
        const DeltaShape s{.B = 2, .T = T, .Hk = Hk, .Hv = 2, .Dk = 16, .Dv = 12, .chunk = chunk};
        RuleInputs in(s, 100 + static_cast<uint64_t>(T * 4 + Hk * 2 + with_state));
        const double* st0 = with_state ? in.state0.data() : nullptr;
        Vec oc(in.n_out()), orr(in.n_out()), sc(in.n_state()), sr(in.n_state());
        gated_delta_chunked_forward(s, in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                    in.beta.data(), st0, oc.data(), sc.data());
        gated_delta_recurrent_forward(s, in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                      in.beta.data(), st0, orr.data(), sr.data());
        const double eo = rel_to_max(oc, orr), es = rel_to_max(sc, sr);
        std::printf("[gated delta] %-36s out %.2e  state1 %.2e\n", name(s, with_state).c_str(),
                    eo, es);
        EXPECT_LT(eo, 1e-12) << name(s, with_state);
        EXPECT_LT(es, 1e-12) << name(s, with_state);
      }
    }
  }
}

// Every coordinate of q, k, v, g, beta, state0 of the loss <R, out> + <R1, state1>, with a
// chunk of 4 over 11 tokens (two whole chunks and a short one), two value heads per key head.
TEST(GatedDelta, BackwardGradcheck) {
  for (bool with_state : {true, false}) {
    const DeltaShape s{.B = 2, .T = 11, .Hk = 1, .Hv = 2, .Dk = 3, .Dv = 2, .chunk = 4};
    RuleInputs in(s, with_state ? 7 : 9);
    const Vec R = randn(in.n_out(), 21), R1 = randn(in.n_state(), 22);
    const double* st0 = with_state ? in.state0.data() : nullptr;
    const double* dst1 = with_state ? R1.data() : nullptr;
    auto f = [&] {
      Vec o(in.n_out()), s1(in.n_state());
      gated_delta_chunked_forward(s, in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                                  in.beta.data(), st0, o.data(), s1.data());
      return dot(o, R) + (with_state ? dot(s1, R1) : 0.0);
    };
    Vec dq(in.q.size(), 9), dk(in.k.size(), 9), dv(in.v.size(), 9), dg(in.g.size(), 9),
        db(in.beta.size(), 9), ds0(in.state0.size(), 9);  // 9: every output must be written
    gated_delta_backward(s, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                         st0, R.data(), dst1, dq.data(), dk.data(), dv.data(), dg.data(),
                         db.data(), with_state ? ds0.data() : nullptr);
    const std::string w = with_state ? " (state0, dstate1)" : "";
    expect_ok(check_all(f, in.q, dq, kH, kFloor), "gated delta dq" + w);
    expect_ok(check_all(f, in.k, dk, kH, kFloor), "gated delta dk" + w);
    expect_ok(check_all(f, in.v, dv, kH, kFloor), "gated delta dv" + w);
    expect_ok(check_all(f, in.g, dg, kH, kFloor), "gated delta dg" + w);
    expect_ok(check_all(f, in.beta, db, kH, kFloor), "gated delta dbeta" + w);
    if (with_state) expect_ok(check_all(f, in.state0, ds0, kH, kFloor), "gated delta dstate0");
  }
}

// x, w of the conv with a past (K - 1 inputs before x) and without one.
TEST(GatedDelta, ConvGradcheck) {
  const int64_t B = 2, T = 5, C = 3, K = 4;
  for (bool with_past : {true, false}) {
    Vec x = randn(B * T * C, 31), w = randn(C * K, 32, 0.7), past = randn(B * C * (K - 1), 33);
    const Vec R = randn(B * T * C, 34);
    const double* p = with_past ? past.data() : nullptr;
    auto f = [&] {
      Vec y(B * T * C);
      causal_conv1d_silu_forward(B, T, C, K, x.data(), w.data(), p, y.data());
      return dot(y, R);
    };
    Vec dx(x.size(), 9), dw(w.size(), 0.5);  // dw accumulates onto 0.5
    causal_conv1d_silu_backward(B, T, C, K, x.data(), w.data(), p, R.data(), dx.data(),
                                dw.data());
    for (double& d : dw) d -= 0.5;
    const std::string what = with_past ? " (past)" : "";
    expect_ok(check_all(f, x, dx, kH, kFloor), "conv1d silu dx" + what);
    expect_ok(check_all(f, w, dw, kH, kFloor), "conv1d silu dw" + what);
  }
}

TEST(GatedDelta, DecayGradcheck) {
  const int64_t N = 7, Hv = 3;
  Vec a = randn(N * Hv, 41, 2.0), A_log = randn(Hv, 42), dt = randn(Hv, 43);
  const Vec R = randn(N * Hv, 44);
  auto f = [&] {
    Vec g(N * Hv);
    delta_decay_forward(N, Hv, a.data(), A_log.data(), dt.data(), g.data());
    return dot(g, R);
  };
  Vec da(a.size(), 9), dA(Hv, 0.5), ddt(Hv, 0.5);
  delta_decay_backward(N, Hv, a.data(), A_log.data(), dt.data(), R.data(), da.data(), dA.data(),
                       ddt.data());
  for (double& d : dA) d -= 0.5;
  for (double& d : ddt) d -= 0.5;
  expect_ok(check_all(f, a, da, kH, kFloor), "decay da");
  expect_ok(check_all(f, A_log, dA, kH, kFloor), "decay dA_log");
  expect_ok(check_all(f, dt, ddt, kH, kFloor), "decay ddt_bias");
}

TEST(GatedDelta, GatedNormGradcheck) {
  const int64_t N = 5, D = 6;
  const double eps = 1e-6;
  Vec x = randn(N * D, 51), z = randn(N * D, 52, 1.5), w = randn(D, 53, 0.5, 1.0);
  const Vec R = randn(N * D, 54);
  auto f = [&] {
    Vec y(N * D), r(N);
    gated_rmsnorm_forward(N, D, x.data(), z.data(), w.data(), eps, y.data(), r.data());
    return dot(y, R);
  };
  Vec y(N * D), r(N), dx(x.size(), 9), dz(z.size(), 9), dw(D, 0.5);
  gated_rmsnorm_forward(N, D, x.data(), z.data(), w.data(), eps, y.data(), r.data());
  gated_rmsnorm_backward(N, D, x.data(), z.data(), w.data(), r.data(), R.data(), dx.data(),
                         dz.data(), dw.data());
  for (double& d : dw) d -= 0.5;
  expect_ok(check_all(f, x, dx, kH, kFloor), "gated rmsnorm dx");
  expect_ok(check_all(f, z, dz, kH, kFloor), "gated rmsnorm dz");
  expect_ok(check_all(f, w, dw, kH, kFloor), "gated rmsnorm dw");
}

// float against double: the chunked forward and the backward at chunk 64 over 150 tokens.
TEST(GatedDelta, FloatTracksDouble) {
  const DeltaShape s{.B = 1, .T = 150, .Hk = 2, .Hv = 4, .Dk = 32, .Dv = 16, .chunk = 64};
  RuleInputs in(s, 61);
  const Vec R = randn(in.n_out(), 62);
  using F = std::vector<float>;
  const auto f = [](const Vec& v) { return F(v.begin(), v.end()); };
  Vec o(in.n_out()), dq(in.q.size()), dk(in.k.size()), dv(in.v.size()), dg(in.g.size()),
      db(in.beta.size());
  gated_delta_chunked_forward<double>(s, in.q.data(), in.k.data(), in.v.data(), in.g.data(),
                              in.beta.data(), in.state0.data(), o.data(), nullptr);
  gated_delta_backward<double>(s, in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                       in.state0.data(), R.data(), nullptr, dq.data(), dk.data(), dv.data(),
                       dg.data(), db.data(), nullptr);
  const F q = f(in.q), k = f(in.k), v = f(in.v), g = f(in.g), b = f(in.beta), s0 = f(in.state0),
          Rf = f(R);
  F of(o.size()), dqf(dq.size()), dkf(dk.size()), dvf(dv.size()), dgf(dg.size()), dbf(db.size());
  gated_delta_chunked_forward<float>(s, q.data(), k.data(), v.data(), g.data(), b.data(), s0.data(),
                              of.data(), nullptr);
  gated_delta_backward<float>(s, q.data(), k.data(), v.data(), g.data(), b.data(), s0.data(), Rf.data(),
                       nullptr, dqf.data(), dkf.data(), dvf.data(),
                       dgf.data(), dbf.data(), nullptr);
  EXPECT_LT(rel_to_max(of, o), 1e-5);
  EXPECT_LT(rel_to_max(dqf, dq), 1e-4);
  EXPECT_LT(rel_to_max(dkf, dk), 1e-4);
  EXPECT_LT(rel_to_max(dvf, dv), 1e-4);
  EXPECT_LT(rel_to_max(dgf, dg), 1e-4);
  EXPECT_LT(rel_to_max(dbf, db), 1e-4);
}

}  // namespace
}  // namespace zt::kernels::cpu
