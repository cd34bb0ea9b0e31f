// The GPU kernels of Gemma 3's and gpt-oss's blocks against the CPU kernels in double on
// the values the GPU saw (fp32 within 1e-5, bf16 within 1e-2): RMSNorm with the (1 + w)
// offset (the fused residual norm and the per-head norm, forward and backward), the
// tanh-GELU GeGLU, the clamped SwiGLU (inputs spread past the limit, so both clamps act),
// the logit soft-cap, the router's softmax over the top-k logits (forward and backward),
// and the experts with gate_up / down biases and the clamped SwiGLU (output, every
// gradient, the biases' gradients).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/gemm.hpp"
#include "zt/kernels/cuda/head_rmsnorm.hpp"
#include "zt/kernels/cuda/moe.hpp"
#include "zt/kernels/cuda/rmsnorm.hpp"
#include "zt/kernels/cuda/softcap.hpp"
#include "zt/kernels/cuda/swiglu.hpp"

namespace zt::kernels::cuda::testing {
namespace {

enum class Gate { kGeglu, kClamped };

template <class T>
class FamilyKernels : public GpuTest {
 protected:
  // One gated activation (Gemma's GeGLU or gpt-oss's clamped SwiGLU) against its CPU kernel:
  // the forward, the backward accumulated, then written in place over g and u (the model's
  // use). Gates drawn with sd 6: many beyond the limit 7 on both sides.
  void check_gate(Gate which) {
    const double tol = tolerance<T>(), L = 7.0, a = 1.702;
    const int64_t n = 10007;
    Vec g = this->randn(n, 6.0), u = this->randn(n, 6.0), R = this->randn(n);
    Vec dg0 = this->randn(n), du0 = this->randn(n);
    auto dgt = to_device<T>(g), dut = to_device<T>(u), dR = to_device<T>(R);
    auto ddg = to_device<T>(dg0), ddu = to_device<T>(du0);
    auto dh = poisoned<T>(n);
    Vec h(n), rdg = dg0, rdu = du0, wdg(n), wdu(n);
    const std::string tag = std::string(which == Gate::kGeglu ? "geglu " : "clamped swiglu ") +
                            type_name<T>();
    if (which == Gate::kGeglu) {
      geglu_forward<T>(dh.data(), dgt.data(), dut.data(), n);
      geglu_backward<T>(ddg.data(), ddu.data(), dR.data(), dgt.data(), dut.data(), n, true);
      cpu::geglu_forward<double>(h.data(), g.data(), u.data(), n);
      cpu::geglu_backward<double>(rdg.data(), rdu.data(), R.data(), g.data(), u.data(), n, true);
      cpu::geglu_backward<double>(wdg.data(), wdu.data(), R.data(), g.data(), u.data(), n, false);
    } else {
      swiglu_clamped_forward<T>(dh.data(), dgt.data(), dut.data(), n, L, a);
      swiglu_clamped_backward<T>(ddg.data(), ddu.data(), dR.data(), dgt.data(), dut.data(), n, L, a,
                                 true);
      cpu::swiglu_clamped_forward<double>(h.data(), g.data(), u.data(), n, L, a);
      cpu::swiglu_clamped_backward<double>(rdg.data(), rdu.data(), R.data(), g.data(), u.data(), n,
                                           L, a, true);
      cpu::swiglu_clamped_backward<double>(wdg.data(), wdu.data(), R.data(), g.data(), u.data(), n,
                                           L, a, false);
    }
    expect_close(to_host(dh), h, tol, tag + " h");
    expect_close(to_host(ddg), rdg, tol, tag + " dg (accumulated)");
    expect_close(to_host(ddu), rdu, tol, tag + " du (accumulated)");
    if (which == Gate::kGeglu)
      geglu_backward<T>(dgt.data(), dut.data(), dR.data(), dgt.data(), dut.data(), n, false);
    else
      swiglu_clamped_backward<T>(dgt.data(), dut.data(), dR.data(), dgt.data(), dut.data(), n, L, a,
                                 false);
    expect_close(to_host(dgt), wdg, tol, tag + " dg (written, in place)");
    expect_close(to_host(dut), wdu, tol, tag + " du (written, in place)");
  }
};
using Types = ::testing::Types<float, bf16_t>;
TYPED_TEST_SUITE(FamilyKernels, Types);

// Gemma's norm: y = x r (1 + w), with w near 0 (its init); the residual sum first.
TYPED_TEST(FamilyKernels, RmsnormWithOffset) {
  using T = TypeParam;
  const double tol = tolerance<T>(), eps = 1e-6, off = 1.0;
  const int64_t N = 37, C = 320;
  Vec x = this->randn(N * C), res = this->randn(N * C), w = this->randn(C, 0.3);
  Vec R = this->randn(N * C), dx0 = this->randn(N * C);
  auto dx_in = to_device<T>(x), dres = to_device<T>(res), dw = to_device<T>(w);
  auto dR = to_device<T>(R);
  auto dy = poisoned<T>(N * C), dsum = poisoned<T>(N * C);
  auto drstd = poisoned<float>(N);
  residual_rmsnorm_forward<T>(dy.data(), drstd.data(), dsum.data(), dx_in.data(), dres.data(),
                              dw.data(), N, C, eps, nullptr, off);
  Vec s = to_host(dsum), y(N * C), rstd(N);  // the sum rounded to T, as the norm read it
  cpu::rmsnorm_forward<double>(y.data(), rstd.data(), s.data(), w.data(), N, C, eps, off);
  expect_close(to_host(dy), y, tol, std::string("rmsnorm (1 + w) y ") + type_name<T>());
  auto ddx = to_device<T>(dx0);
  DeviceBuffer<float> ddw(C);
  ddw.fill_bytes(0);
  rmsnorm_backward<T, float>(ddx.data(), ddw.data(), dR.data(), dsum.data(), dw.data(),
                             drstd.data(), N, C, /*accumulate_dx=*/true, nullptr, off);
  Vec rdx = dx0, rdw(C, 0.0);
  cpu::rmsnorm_backward<double>(rdx.data(), rdw.data(), R.data(), s.data(), w.data(),
                                rstd.data(), N, C, true, off);
  expect_close(to_host(ddx), rdx, tol, std::string("rmsnorm (1 + w) dx ") + type_name<T>());
  expect_close(to_host(ddw), rdw, tol, std::string("rmsnorm (1 + w) dw ") + type_name<T>());

  // The per-head norm (Gemma's q/k norms): rows of D = 64.
  const int64_t rows = 300, D = 64;
  Vec hx = this->randn(rows * D), hw = this->randn(D, 0.3), hR = this->randn(rows * D);
  auto dhx = to_device<T>(hx), dhw = to_device<T>(hw), dhR = to_device<T>(hR);
  auto dhy = poisoned<T>(rows * D), dhdx = poisoned<T>(rows * D);
  auto dhr = poisoned<float>(rows);
  head_rmsnorm_forward<T>(dhy.data(), dhr.data(), dhx.data(), dhw.data(), rows, D, eps, nullptr,
                          off);
  Vec hy(rows * D), hr(rows);
  cpu::rmsnorm_forward<double>(hy.data(), hr.data(), hx.data(), hw.data(), rows, D, eps, off);
  expect_close(to_host(dhy), hy, tol, std::string("head rmsnorm (1 + w) y ") + type_name<T>());
  DeviceBuffer<float> dhw_g(D), partial(kHeadNormChunks * D);
  dhw_g.fill_bytes(0);
  head_rmsnorm_backward<T, float>(dhdx.data(), dhw_g.data(), dhR.data(), dhx.data(), dhw.data(),
                                  dhr.data(), rows, D, partial.data(), nullptr, off);
  Vec rhdx(rows * D), rhdw(D, 0.0);
  cpu::rmsnorm_backward<double>(rhdx.data(), rhdw.data(), hR.data(), hx.data(), hw.data(),
                                hr.data(), rows, D, false, off);
  expect_close(to_host(dhdx), rhdx, tol, std::string("head rmsnorm (1 + w) dx ") + type_name<T>());
  expect_close(to_host(dhw_g), rhdw, tol, std::string("head rmsnorm (1 + w) dw ") + type_name<T>());
}

TYPED_TEST(FamilyKernels, GegluForwardBackward) { this->check_gate(Gate::kGeglu); }
TYPED_TEST(FamilyKernels, ClampedSwigluForwardBackward) { this->check_gate(Gate::kClamped); }

// Gemma's final logit soft-cap, cap 30 over logits of sd 50 (deep into the tanh).
TYPED_TEST(FamilyKernels, SoftcapForwardBackward) {
  using T = TypeParam;
  const double tol = tolerance<T>(), cap = 30.0;
  const int64_t n = 4099;
  Vec x = this->randn(n, 50.0), dy = this->randn(n);
  auto dx_d = to_device<T>(x), ddy = to_device<T>(dy);
  auto dyv = poisoned<T>(n);
  softcap_forward<T>(dyv.data(), dx_d.data(), n, cap);
  Vec y(n);
  cpu::softcap_forward<double>(y.data(), x.data(), n, cap);
  const Vec gy = to_host(dyv);
  expect_close(gy, y, tol, std::string("softcap y ") + type_name<T>());
  softcap_backward<T>(ddy.data(), ddy.data(), dyv.data(), n, cap);  // in place, from the GPU's y
  Vec rdx(n);
  cpu::softcap_backward<double>(rdx.data(), dy.data(), gy.data(), n, cap);
  expect_close(to_host(ddy), rdx, tol, std::string("softcap dx (in place) ") + type_name<T>());
}

// gpt-oss's router: the top k by logit, the weights a softmax over them; its backward
// with the load-balancing loss's dprob.
TYPED_TEST(FamilyKernels, TopkSoftmaxRoute) {
  using T = TypeParam;
  const int64_t N = 200, E = 12, k = 4;
  Vec lg = this->randn(N * E, 2.0);
  const Vec dw = this->randn(N * k), dprob = this->randn(E);
  auto dl = to_device<T>(lg);
  DeviceBuffer<float> dwd(N * k), dprobd(E);
  dwd.upload(std::vector<float>(dw.begin(), dw.end()));
  dprobd.upload(std::vector<float>(dprob.begin(), dprob.end()));
  auto probs = poisoned<float>(N * E);
  auto w = poisoned<float>(N * k);
  DeviceBuffer<int32_t> idx(N * k);
  moe_route(probs.data(), idx.data(), w.data(), dl.data(), N, E, k, nullptr, false, true);
  Vec rp(N * E), rw(N * k), rdl(N * E);
  std::vector<int32_t> ridx(N * k);
  cpu::moe_route(rp.data(), ridx.data(), rw.data(), lg.data(), N, E, k, false, true);
  const std::string tag = std::string("topk softmax ") + type_name<T>();
  ASSERT_EQ(ints(idx), ridx) << tag << ": the experts chosen differ";
  expect_close(to_host(probs), rp, 1e-5, tag + " probs");
  expect_close(to_host(w), rw, 1e-5, tag + " weights");
  auto dlogits = poisoned<T>(N * E);
  moe_route_backward(dlogits.data(), dwd.data(), dprobd.data(), probs.data(), idx.data(),
                     w.data(), N, E, k, nullptr, false, true);
  cpu::moe_route_backward(rdl.data(), dw.data(), dprob.data(), rp.data(), ridx.data(), rw.data(),
                          N, E, k, false, true);
  expect_close(to_host(dlogits), rdl, tolerance<T>(), tag + " dlogits");
}

// gpt-oss's experts: gate_up and down biases, the clamped SwiGLU (limit 2: the clamps act on
// pre-activations of sd ~1.5), routed by the GPU and the CPU from the same logits; out,
// dx, the weights' gradient dw, dgate_up, ddown and both biases' gradients.
TYPED_TEST(FamilyKernels, ExpertsWithBiasesAndClampedSwiglu) {
  using T = TypeParam;
  const double tol = tolerance<T>(), gtol = 3 * tol;
  const int64_t N = 150, C = 64, I = 40, E = 6, k = 2, S = N * k;
  Vec x = this->randn(N * C), lg = this->randn(N * E);
  Vec gate_up = this->randn(E * 2 * I * C, 0.2), down = this->randn(E * C * I, 0.2);
  Vec gub = this->randn(E * 2 * I, 0.5), db = this->randn(E * C, 0.5), R = this->randn(N * C);
  auto dx_ = to_device<T>(x), dlg = to_device<T>(lg), dgu = to_device<T>(gate_up);
  auto ddn = to_device<T>(down), dgub = to_device<T>(gub), ddb = to_device<T>(db);
  auto dR = to_device<T>(R);
  const MoeExpertExtras<T> extra{dgub.data(), ddb.data(), 2.0, 1.702};
  Gemm gemm;
  auto probs = poisoned<float>(N * E);
  auto w = poisoned<float>(S);
  DeviceBuffer<int32_t> idx(S), perm(S), pos(S), scratch(moe_plan_scratch(S, E));
  moe_route(probs.data(), idx.data(), w.data(), dlg.data(), N, E, k, nullptr, false, true);
  MoePlan plan;
  plan.perm = perm.data();
  plan.pos = pos.data();
  PinnedBuffer<int32_t> host(E + 1);
  moe_plan(plan, scratch.data(), host.data(), idx.data(), N, E, k);
  ZT_CUDA_CHECK(cudaDeviceSynchronize());
  moe_plan_ready(plan, host.data(), E);
  Vec rp(N * E), rw(S);
  std::vector<int32_t> ridx(S);
  cpu::moe_route(rp.data(), ridx.data(), rw.data(), lg.data(), N, E, k, false, true);
  ASSERT_EQ(ints(idx), ridx) << "the experts chosen differ";
  const Vec gw = to_host(w);  // the CPU experts weigh with the GPU's weights

  auto xp = poisoned<T>(S * C), g = poisoned<T>(S * I), u = poisoned<T>(S * I);
  auto h = poisoned<T>(S * I), y = poisoned<T>(S * C), out = poisoned<T>(N * C);
  const MoeActs<T> acts{xp.data(), g.data(), u.data(), h.data(), y.data()};
  moe_experts_forward(gemm, out.data(), acts, dx_.data(), dgu.data(), ddn.data(), plan, w.data(),
                      N, C, I, E, k, nullptr, extra);
  Vec rout(N * C), rgu(S * 2 * I), rh(S * I), ry(S * C);
  cpu::ExpertExtras<double> rex;
  rex.gate_up_bias = gub.data();
  rex.down_bias = db.data();
  rex.swiglu_limit = 2.0;
  rex.swiglu_alpha = 1.702;
  cpu::moe_experts_forward(rout.data(), rgu.data(), rh.data(), ry.data(), x.data(),
                           gate_up.data(), down.data(), ridx.data(), gw.data(), N, C, I, E, k,
                           rex);
  const std::string tag = std::string("gpt-oss experts ") + type_name<T>();
  expect_close(to_host(out), rout, tol, tag + " out");

  auto ddx = poisoned<T>(N * C);
  DeviceBuffer<float> dgate_up(E * 2 * I * C), ddown(E * C * I), dgub_g(E * 2 * I), ddb_g(E * C);
  for (auto* b : {&dgate_up, &ddown, &dgub_g, &ddb_g}) b->fill_bytes(0);
  auto dw = poisoned<float>(S);
  auto rows = poisoned<T>(S * C), hs = poisoned<T>(S * I);
  moe_experts_backward(gemm, ddx.data(), dgate_up.data(), ddown.data(), dw.data(), dR.data(), acts,
                       dgu.data(), ddn.data(), plan, w.data(), rows.data(), hs.data(), N, C, I, E,
                       k, /*accumulate_dx=*/false, nullptr, extra, dgub_g.data(), ddb_g.data());
  Vec rdx(N * C, 0.0), rdgu(gate_up.size(), 0.0), rddn(down.size(), 0.0), rdw(S);
  Vec rdgub(gub.size(), 0.0), rddb(db.size(), 0.0);
  rex.dgate_up_bias = rdgub.data();
  rex.ddown_bias = rddb.data();
  cpu::moe_experts_backward(rdx.data(), rdgu.data(), rddn.data(), rdw.data(), R.data(), x.data(),
                            gate_up.data(), down.data(), ridx.data(), gw.data(), rgu.data(),
                            rh.data(), ry.data(), N, C, I, E, k, rex);
  expect_close(to_host(ddx), rdx, gtol, tag + " dx");
  expect_close(to_host(dw), rdw, gtol, tag + " dw");
  expect_close(to_host(dgate_up), rdgu, gtol, tag + " dgate_up");
  expect_close(to_host(ddown), rddn, gtol, tag + " ddown");
  expect_close(to_host(dgub_g), rdgub, gtol, tag + " dgate_up_bias");
  expect_close(to_host(ddb_g), rddb, gtol, tag + " ddown_bias");
}

}  // namespace
}  // namespace zt::kernels::cuda::testing
