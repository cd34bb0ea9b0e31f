// The GPU mixture-of-experts block (kernels/cuda/moe.hpp) against the CPU reference
// (kernels/moe.hpp) run in double on the values the GPU saw: the router's probabilities,
// choices and weights (the reference routes the GPU's own logits, so a bf16 rounding of
// the logits cannot change a choice between the two), the plan (every slot at one row,
// each expert's rows contiguous and in slot order), the block's output, the load-balancing
// statistics, and the gradients of L = sum(out * R) + coef * aux with respect to x, the
// router, gate_up and down. Ties: lower expert index first. fp32 and bf16. Qwen's pieces:
// the routing without renormalisation (norm_topk_prob = false) and the shared expert's gate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/gemm.hpp"
#include "zt/kernels/cuda/moe.hpp"

namespace zt::kernels::cuda::testing {
namespace {

template <class T>
class MoeGpu : public GpuTest {};
using Types = ::testing::Types<float, bf16_t>;
TYPED_TEST_SUITE(MoeGpu, Types);

TYPED_TEST(MoeGpu, BlockForwardBackwardEqualsTheReference) {
  using T = TypeParam;
  const double tol = tolerance<T>();
  const double gtol = 3 * tol;  // gradients pass through more roundings of T
  const int64_t N = 300, C = 64, I = 40, E = 8, k = 2, S = N * k;
  const double coef = 0.05;
  Vec x = this->randn(N * C), Wr = this->randn(E * C, 0.3);
  Vec gate_up = this->randn(E * 2 * I * C, 0.2), down = this->randn(E * C * I, 0.2);
  Vec R = this->randn(N * C);
  auto dx_ = to_device<T>(x);
  auto dWr = to_device<T>(Wr);
  auto dgu = to_device<T>(gate_up);
  auto ddn = to_device<T>(down);
  auto dR = to_device<T>(R);

  Gemm gemm;
  auto logits = poisoned<T>(N * E);
  linear_forward(gemm, logits.data(), dx_.data(), dWr.data(), N, C, E);
  auto probs = poisoned<float>(N * E);
  auto w = poisoned<float>(N * k);
  DeviceBuffer<int32_t> idx(S), perm(S), pos(S), scratch(moe_plan_scratch(S, E));
  moe_route(probs.data(), idx.data(), w.data(), logits.data(), N, E, k);
  MoePlan plan;
  plan.perm = perm.data();
  plan.pos = pos.data();
  PinnedBuffer<int32_t> host(E + 1);  // moe_plan's asynchronous copy of the expert ranges
  moe_plan(plan, scratch.data(), host.data(), idx.data(), N, E, k);
  ZT_CUDA_CHECK(cudaDeviceSynchronize());
  moe_plan_ready(plan, host.data(), E);

  // Reference routing of the GPU's logits.
  const Vec lg = to_host(logits);
  Vec rp(N * E), rw(N * k);
  std::vector<int32_t> ridx(S);
  cpu::moe_route(rp.data(), ridx.data(), rw.data(), lg.data(), N, E, k);
  const std::vector<int32_t> gidx = ints(idx);
  ASSERT_EQ(gidx, ridx) << "the experts chosen differ";
  expect_close(to_host(probs), rp, 1e-5, "moe probs");
  expect_close(to_host(w), rw, 1e-5, "moe weights");

  // The plan: a permutation, expert ranges, slot order inside each range.
  const std::vector<int32_t> gp = ints(perm), gq = ints(pos);
  ASSERT_EQ(plan.offsets.size(), static_cast<size_t>(E + 1));
  EXPECT_EQ(plan.offsets.front(), 0);
  EXPECT_EQ(plan.offsets.back(), S);
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t p = plan.offsets[e]; p < plan.offsets[e + 1]; ++p) {
      EXPECT_EQ(gidx[gp[p]], e) << "row " << p;
      EXPECT_EQ(gq[gp[p]], p) << "row " << p;
      if (p > plan.offsets[e]) {
        EXPECT_LT(gp[p - 1], gp[p]) << "slot order in expert " << e;
      }
    }
  }

  // Forward.
  auto xp = poisoned<T>(S * C), g = poisoned<T>(S * I), u = poisoned<T>(S * I);
  auto h = poisoned<T>(S * I), y = poisoned<T>(S * C), out = poisoned<T>(N * C);
  const MoeActs<T> acts{xp.data(), g.data(), u.data(), h.data(), y.data()};
  moe_experts_forward(gemm, out.data(), acts, dx_.data(), dgu.data(), ddn.data(), plan, w.data(),
                      N, C, I, E, k);
  Vec rout(N * C), rgu(S * 2 * I), rh(S * I), ry(S * C);
  cpu::moe_experts_forward(rout.data(), rgu.data(), rh.data(), ry.data(), x.data(),
                           gate_up.data(), down.data(), ridx.data(), rw.data(), N, C, I, E, k);
  expect_close(to_host(out), rout, tol, std::string("moe out ") + type_name<T>());

  // Load-balancing statistics.
  DeviceBuffer<double> tokens(E), prob_sum(E);
  tokens.fill_bytes(0);
  prob_sum.fill_bytes(0);
  moe_aux_accumulate(tokens.data(), prob_sum.data(), probs.data(), plan, N, E);
  std::vector<double> rt(E, 0.0), rps(E, 0.0);
  cpu::moe_aux_accumulate(rt.data(), rps.data(), rp.data(), ridx.data(), N, E, k);
  const Vec gt = to_host(tokens), gps = to_host(prob_sum);
  for (int64_t e = 0; e < E; ++e) EXPECT_EQ(gt[e], rt[e]) << "tokens of expert " << e;
  expect_close(gps, rps, 1e-5, "moe prob_sum");

  // Backward: experts, the aux loss's d/dp, the router, the router's linear.
  std::vector<float> dprob_h(E);
  cpu::moe_aux_dprob(dprob_h.data(), rt.data(), static_cast<double>(N), E, coef);
  DeviceBuffer<float> dprob(E);
  dprob.upload(dprob_h);
  auto ddx = poisoned<T>(N * C);
  DeviceBuffer<float> dgate_up(E * 2 * I * C), ddown(E * C * I), dWrg(E * C);
  dgate_up.fill_bytes(0);
  ddown.fill_bytes(0);
  dWrg.fill_bytes(0);
  auto dw = poisoned<float>(S);
  auto rows = poisoned<T>(S * C), hs = poisoned<T>(S * I);
  moe_experts_backward(gemm, ddx.data(), dgate_up.data(), ddown.data(), dw.data(), dR.data(), acts,
                       dgu.data(), ddn.data(), plan, w.data(), rows.data(), hs.data(), N, C, I, E,
                       k, /*accumulate_dx=*/false);
  auto dlogits = poisoned<T>(N * E);
  moe_route_backward(dlogits.data(), dw.data(), dprob.data(), probs.data(), idx.data(), w.data(), N,
                     E, k);
  linear_backward(gemm, ddx.data(), dWrg.data(), dlogits.data(), dx_.data(), dWr.data(), N, C, E,
                  /*accumulate_dx=*/true);

  Vec rdx(N * C, 0.0), rdgu(gate_up.size(), 0.0), rddn(down.size(), 0.0), rdWr(E * C, 0.0);
  Vec rdw(S), rdprob(E), rdl(N * E);
  cpu::moe_experts_backward(rdx.data(), rdgu.data(), rddn.data(), rdw.data(), R.data(), x.data(),
                            gate_up.data(), down.data(), ridx.data(), rw.data(), rgu.data(),
                            rh.data(), ry.data(), N, C, I, E, k);
  cpu::moe_aux_dprob(rdprob.data(), rt.data(), static_cast<double>(N), E, coef);
  cpu::moe_route_backward(rdl.data(), rdw.data(), rdprob.data(), rp.data(), ridx.data(),
                          rw.data(), N, E, k);
  cpu::linear_backward(rdx.data(), rdWr.data(), rdl.data(), x.data(), Wr.data(), N, C, E);
  expect_close(to_host(dw), rdw, gtol, std::string("moe dw ") + type_name<T>());
  expect_close(to_host(ddown), rddn, gtol, std::string("moe ddown ") + type_name<T>());
  expect_close(to_host(dgate_up), rdgu, gtol, std::string("moe dgate_up ") + type_name<T>());
  expect_close(to_host(dWrg), rdWr, gtol, std::string("moe drouter ") + type_name<T>());
  expect_close(to_host(ddx), rdx, gtol, std::string("moe dx ") + type_name<T>());
}

TYPED_TEST(MoeGpu, TiesGoToTheLowerExpertAndEmptyExpertsAreSkipped) {
  using T = TypeParam;
  const int64_t N = 40, E = 16, k = 3;
  Vec logits(N * E, 0.0);  // every probability 1/E: a tie everywhere
  for (int64_t n = 0; n < N; ++n) logits[n * E + 9] = 1.0;  // expert 9 first, then 0, 1
  auto dl = to_device<T>(logits);
  auto probs = poisoned<float>(N * E);
  auto w = poisoned<float>(N * k);
  DeviceBuffer<int32_t> idx(N * k), perm(N * k), pos(N * k), scratch(moe_plan_scratch(N * k, E));
  moe_route(probs.data(), idx.data(), w.data(), dl.data(), N, E, k);
  MoePlan plan;
  plan.perm = perm.data();
  plan.pos = pos.data();
  PinnedBuffer<int32_t> host(E + 1);  // moe_plan's asynchronous copy of the expert ranges
  moe_plan(plan, scratch.data(), host.data(), idx.data(), N, E, k);
  ZT_CUDA_CHECK(cudaDeviceSynchronize());
  moe_plan_ready(plan, host.data(), E);
  const std::vector<int32_t> got = ints(idx);
  for (int64_t n = 0; n < N; ++n) {
    EXPECT_EQ(got[n * k + 0], 9);
    EXPECT_EQ(got[n * k + 1], 0);
    EXPECT_EQ(got[n * k + 2], 1);
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t rows = plan.offsets[e + 1] - plan.offsets[e];
    EXPECT_EQ(rows, (e == 0 || e == 1 || e == 9) ? N : 0) << "expert " << e;
  }
}

// Qwen's norm_topk_prob (renormalise false: w = the chosen probabilities) and Mixtral's
// (true), forward and backward, against the CPU kernel with the same flag on the GPU's
// logits; with renormalise false the weights of a row sum to less than 1.
TYPED_TEST(MoeGpu, RouteWithAndWithoutRenormalisationEqualsTheCpuKernel) {
  using T = TypeParam;
  const int64_t N = 200, E = 12, k = 3;
  Vec lg = this->randn(N * E, 2.0);
  const Vec dw = this->randn(N * k), dprob = this->randn(E);
  auto dl = to_device<T>(lg);  // rounds lg to T: the values the GPU saw
  DeviceBuffer<float> dwd(N * k), dprobd(E);
  dwd.upload(std::vector<float>(dw.begin(), dw.end()));
  dprobd.upload(std::vector<float>(dprob.begin(), dprob.end()));
  for (const bool renormalise : {false, true}) {
    const std::string tag = std::string(renormalise ? "renormalised " : "not renormalised ") +
                            type_name<T>();
    auto probs = poisoned<float>(N * E);
    auto w = poisoned<float>(N * k);
    DeviceBuffer<int32_t> idx(N * k);
    moe_route(probs.data(), idx.data(), w.data(), dl.data(), N, E, k, nullptr, renormalise);
    Vec rp(N * E), rw(N * k), rdl(N * E);
    std::vector<int32_t> ridx(N * k);
    cpu::moe_route(rp.data(), ridx.data(), rw.data(), lg.data(), N, E, k, renormalise);
    ASSERT_EQ(ints(idx), ridx) << tag << ": the experts chosen differ";
    expect_close(to_host(probs), rp, 1e-5, tag + " probs");
    const Vec gw = to_host(w);
    expect_close(gw, rw, 1e-5, tag + " weights");
    if (!renormalise) {
      EXPECT_LT(gw[0] + gw[1] + gw[2], 1.0 - 1e-3) << tag;
    }
    auto dlogits = poisoned<T>(N * E);
    moe_route_backward(dlogits.data(), dwd.data(), dprobd.data(), probs.data(), idx.data(),
                       w.data(), N, E, k, nullptr, renormalise);
    cpu::moe_route_backward(rdl.data(), dw.data(), dprob.data(), rp.data(), ridx.data(),
                            rw.data(), N, E, k, renormalise);
    expect_close(to_host(dlogits), rdl, tolerance<T>(), tag + " dlogits");
  }
}

// qwen2_moe's shared-expert gate against its definition in double (src/model/
// shared_expert.cpp's loops): s = sigmoid(x . g), out += s y; dy = s dout, d logit =
// s (1 - s) dout . y, dx += d logit g, dg += sum_n d logit x.
TYPED_TEST(MoeGpu, SharedExpertGateEqualsItsDefinition) {
  using T = TypeParam;
  const double tol = tolerance<T>();
  const int64_t N = 70, C = 96;
  // (to_device rounds each to T: the values the GPU saw)
  Vec xr = this->randn(N * C), yr = this->randn(N * C), gr = this->randn(C, 0.2);
  Vec o0 = this->randn(N * C), dor = this->randn(N * C), dx0r = this->randn(N * C);
  auto xd = to_device<T>(xr), yd = to_device<T>(yr), gd = to_device<T>(gr);
  auto outd = to_device<T>(o0), doutd = to_device<T>(dor), dxd = to_device<T>(dx0r);
  auto s = poisoned<float>(N);
  moe_shared_gate_forward(outd.data(), s.data(), yd.data(), xd.data(), gd.data(), N, C);
  auto dy = poisoned<T>(N * C);
  auto dlogit = poisoned<float>(N);
  DeviceBuffer<float> dg(C);
  dg.fill_bytes(0);
  moe_shared_gate_backward<T, float>(dy.data(), dlogit.data(), dxd.data(), dg.data(), doutd.data(),
                                     yd.data(), s.data(), xd.data(), gd.data(), N, C);
  Vec rs(N), rout(o0), rdy(N * C), rdl(N), rdx(dx0r), rdg(C, 0.0);
  for (int64_t n = 0; n < N; ++n) {
    double z = 0, dot = 0;
    for (int64_t c = 0; c < C; ++c) z += xr[n * C + c] * gr[c];
    rs[n] = 1 / (1 + std::exp(-z));
    for (int64_t c = 0; c < C; ++c) {
      rout[n * C + c] += rs[n] * yr[n * C + c];
      rdy[n * C + c] = rs[n] * dor[n * C + c];
      dot += dor[n * C + c] * yr[n * C + c];
    }
    rdl[n] = rs[n] * (1 - rs[n]) * dot;
    for (int64_t c = 0; c < C; ++c) {
      rdx[n * C + c] += rdl[n] * gr[c];
      rdg[c] += rdl[n] * xr[n * C + c];
    }
  }
  const std::string t = type_name<T>();
  expect_close(to_host(s), rs, 1e-5, "shared gate s " + t);
  expect_close(to_host(outd), rout, tol, "shared gate out " + t);
  expect_close(to_host(dy), rdy, tol, "shared gate dy " + t);
  expect_close(to_host(dlogit), rdl, tol, "shared gate dlogit " + t);
  expect_close(to_host(dxd), rdx, tol, "shared gate dx " + t);
  expect_close(to_host(dg), rdg, tol, "shared gate dg " + t);
}

TEST(MoeGpuShapes, TooManyExpertsIsAnInputError) {
  EXPECT_THROW(moe_route<float>(nullptr, nullptr, nullptr, nullptr, 4, kMoeMaxExperts + 1, 2),
               InputError);
  EXPECT_THROW(moe_route<float>(nullptr, nullptr, nullptr, nullptr, 4, 8, 9), InputError);
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
