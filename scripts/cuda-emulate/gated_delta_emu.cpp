// Gated DeltaNet's CUDA kernels emulated on the CPU (run.sh builds this with the kernels'
// sources rewritten by transform.py) against the CPU kernels in double, T = float: the ops
// (conv, decay and beta, gated norm; 320 rows fill every row chunk of the parameters'
// gradients) and the rule (forward, recurrent form, backward with the chunk-start states
// given and recomputed) at T = 1, 63, 64, 150. Every output starts as NaN. SEED=n picks the
// inputs; "big" adds Dk = Dv = 128. Exit status 1 when a comparison fails.
#include "emu.hpp"
#include "gated_delta_ops.cu"
#include "gated_delta.cu"
#include "gated_delta_backward.cu"
#include "zt/kernels/gated_delta.hpp"
#include <cstdio>
#include <random>
using namespace zt::kernels;
using V = std::vector<double>;
using F = std::vector<float>;
std::mt19937_64 rng(std::getenv("SEED") ? std::strtoull(std::getenv("SEED"), nullptr, 10) : 7);
V randn(size_t n, double sc = 1, double mean = 0) { std::normal_distribution<double> d(mean, sc); V v(n); for (auto& x : v) x = d(rng); return v; }
F tof(V& v) { F f(v.size()); for (size_t i = 0; i < v.size(); ++i) { f[i] = (float)v[i]; v[i] = f[i]; } return f; }
double rel(const F& got, const V& ref) { double n = 0, d = 0; for (size_t i = 0; i < got.size(); ++i) { if (!std::isfinite(got[i])) return INFINITY; n = std::max(n, std::abs(got[i] - ref[i])); d = std::max(d, std::abs(ref[i])); } return d > 0 ? n / d : n; }
int fails = 0;
void check(const F& got, const V& ref, double tol, const std::string& what) { double e = rel(got, ref); bool ok = e < tol && got.size() == ref.size(); if (!ok) ++fails; std::printf("%s %-50s %.3e\n", ok ? "ok  " : "FAIL", what.c_str(), e); }
F nanv(size_t n) { return F(n, std::nanf("")); }

void rule(cpu::DeltaShape s, bool ws) {
  const size_t nq = s.B * s.T * s.Hk * s.Dk, nv = s.B * s.T * s.Hv * s.Dv, nh = s.B * s.T * s.Hv, ns = s.B * s.Hv * s.Dk * s.Dv;
  V q = randn(nq), k = randn(nq), v = randn(nv), g = randn(nh, 0.4), b = randn(nh, 1.5), st0 = randn(ns, 0.5);
  for (auto& x : g) x = -0.02 - std::abs(x);
  for (auto& x : b) x = 1 / (1 + std::exp(-x));
  F qf = tof(q), kf = tof(k), vf = tof(v), gf = tof(g), bf = tof(b), s0f = tof(st0);
  const float* s0p = ws ? s0f.data() : nullptr; const double* s0d = ws ? st0.data() : nullptr;
  const int64_t nC = (s.T + 63) / 64;
  F out = nanv(nv), st1 = nanv(ns), starts = nanv(s.B * s.Hv * nC * s.Dk * s.Dv);
  cuda::gated_delta_chunked_forward<float>(out.data(), st1.data(), starts.data(), s, qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), s0p);
  V oref(nv), sref(ns);
  cpu::gated_delta_chunked_forward<double>(s, q.data(), k.data(), v.data(), g.data(), b.data(), s0d, oref.data(), sref.data());
  char nm[200]; std::snprintf(nm, 200, "T%ld Hk%ld Hv%ld Dk%ld Dv%ld%s", (long)s.T, (long)s.Hk, (long)s.Hv, (long)s.Dk, (long)s.Dv, ws ? " st0" : "");
  check(out, oref, 1e-5, std::string("fwd out ") + nm);
  check(st1, sref, 1e-5, std::string("fwd state1 ") + nm);
  F outr = nanv(nv), str = nanv(ns);
  cuda::gated_delta_recurrent_forward<float>(outr.data(), str.data(), s, qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), s0p);
  check(outr, oref, 1e-5, std::string("rec out ") + nm);
  check(str, sref, 1e-5, std::string("rec state1 ") + nm);
  // backward
  V dout = randn(nv), dst1 = randn(ns, 0.5); F doutf = tof(dout), dst1f = tof(dst1);
  for (int pass = 0; pass < 2; ++pass) {
    F scratch(cuda::gated_delta_backward_scratch(s, pass == 0), std::nanf(""));
    F dq = nanv(nq), dk = nanv(nq), dv = nanv(nv), dg = nanv(nh), db = nanv(nh), ds0 = nanv(ns);
    cuda::gated_delta_backward<float>(dq.data(), dk.data(), dv.data(), dg.data(), db.data(), ds0.data(), s, qf.data(), kf.data(), vf.data(), gf.data(), bf.data(), s0p, pass == 0 ? nullptr : starts.data(), doutf.data(), dst1f.data(), scratch.data());
    V dqr(nq), dkr(nq), dvr(nv), dgr(nh), dbr(nh), ds0r(ns);
    cpu::gated_delta_backward<double>(s, q.data(), k.data(), v.data(), g.data(), b.data(), s0d, dout.data(), dst1.data(), dqr.data(), dkr.data(), dvr.data(), dgr.data(), dbr.data(), ds0r.data());
    std::string p = pass == 0 ? " (recomputed starts) " : " (given starts) ";
    check(dq, dqr, 1e-4, "dq" + p + nm); check(dk, dkr, 1e-4, "dk" + p + nm); check(dv, dvr, 1e-4, "dv" + p + nm);
    check(dg, dgr, 1e-4, "dg" + p + nm); check(db, dbr, 1e-4, "dbeta" + p + nm); check(ds0, ds0r, 1e-4, "dstate0" + p + nm);
  }
}

void ops() {
  const int64_t B = 2, Tn = 160, C = 40, K = 4, P = K - 1;
  V x = randn(B * Tn * C), w = randn(C * K, 0.5), past = randn(B * C * P), dy = randn(B * Tn * C);
  F xf = tof(x), wf = tof(w), pf = tof(past), dyf = tof(dy);
  F y = nanv(x.size()); V yr(x.size());
  cuda::causal_conv1d_silu_forward<float>(y.data(), xf.data(), wf.data(), pf.data(), B, Tn, C, K);
  cpu::causal_conv1d_silu_forward<double>(B, Tn, C, K, x.data(), w.data(), past.data(), yr.data());
  check(y, yr, 1e-5, "conv y");
  F dx = nanv(x.size()), dw(C * K, 0.f), dp = nanv(past.size()), part(cuda::kDeltaPartials * C * K);
  cuda::causal_conv1d_silu_backward<float, float>(dx.data(), dw.data(), dp.data(), dyf.data(), xf.data(), wf.data(), pf.data(), B, Tn, C, K, part.data());
  V dxr(x.size()), dwr(C * K, 0.0);
  cpu::causal_conv1d_silu_backward<double>(B, Tn, C, K, x.data(), w.data(), past.data(), dy.data(), dxr.data(), dwr.data());
  check(dx, dxr, 1e-5, "conv dx"); check(dw, dwr, 1e-5, "conv dw");
  // dpast: the CPU conv over [past | x] without a past (dy 0 on the past); the past update
  const int64_t Tc = P + Tn;
  V xc(B * Tc * C), dyc(B * Tc * C, 0.0), dxc(B * Tc * C), dwc(C * K, 0.0), dpr(past.size()), pur(past.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tc; ++t)
      for (int64_t c = 0; c < C; ++c) {
        xc[(b * Tc + t) * C + c] = t < P ? past[(b * C + c) * P + t] : x[(b * Tn + t - P) * C + c];
        if (t >= P) dyc[(b * Tc + t) * C + c] = dy[(b * Tn + t - P) * C + c];
      }
  cpu::causal_conv1d_silu_backward<double>(B, Tc, C, K, xc.data(), w.data(), nullptr, dyc.data(), dxc.data(), dwc.data());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < P; ++i) {
        dpr[(b * C + c) * P + i] = dxc[(b * Tc + i) * C + c];
        pur[(b * C + c) * P + i] = xc[(b * Tc + Tn + i) * C + c];
      }
  check(dp, dpr, 1e-5, "conv dpast");
  cuda::causal_conv1d_update_past<float>(pf.data(), pf.data(), xf.data(), B, Tn, C, K);
  check(pf, pur, 1e-12, "conv past update (in place)");
  const int64_t N = 320, Hv = 6;
  V a = randn(N * Hv, 2), bb = randn(N * Hv, 2), Al = randn(Hv, .7), dt = randn(Hv, .7), dg = randn(N * Hv), dbe = randn(N * Hv);
  a[0] = 30;
  F af = tof(a), bf = tof(bb), Af = tof(Al), dtf = tof(dt), dgf = tof(dg), dbef = tof(dbe);
  F g = nanv(N * Hv), be = nanv(N * Hv); V gr(N * Hv);
  cuda::delta_gates_forward<float>(g.data(), be.data(), af.data(), bf.data(), Af.data(), dtf.data(), N, Hv);
  cpu::delta_decay_forward<double>(N, Hv, a.data(), Al.data(), dt.data(), gr.data());
  check(g, gr, 1e-5, "gates g");
  F da = nanv(N * Hv), db = nanv(N * Hv), dA(Hv, 0.f), ddt(Hv, 0.f), part2(cuda::kDeltaPartials * 2 * Hv);
  cuda::delta_gates_backward<float, float>(da.data(), db.data(), dA.data(), ddt.data(), dgf.data(), dbef.data(), be.data(), af.data(), Af.data(), dtf.data(), N, Hv, part2.data());
  V dar(N * Hv), dAr(Hv, 0.0), ddtr(Hv, 0.0), dbr(N * Hv);
  cpu::delta_decay_backward<double>(N, Hv, a.data(), Al.data(), dt.data(), dg.data(), dar.data(), dAr.data(), ddtr.data());
  for (int64_t i = 0; i < N * Hv; ++i) { double sg = 1 / (1 + std::exp(-bb[i])); dbr[i] = dbe[i] * sg * (1 - sg); }
  check(da, dar, 1e-5, "gates da"); check(db, dbr, 1e-5, "gates db"); check(dA, dAr, 1e-5, "dA_log"); check(ddt, ddtr, 1e-5, "ddt_bias");
  const int64_t R = 320, D = 48;
  V nx = randn(R * D), nz = randn(R * D, 2), nw = randn(D, .5, 1), ndy = randn(R * D);
  F nxf = tof(nx), nzf = tof(nz), nwf = tof(nw), ndyf = tof(ndy);
  F ny = nanv(R * D), rs = nanv(R); V nyr(R * D), rsr(R);
  cuda::gated_rmsnorm_forward<float>(ny.data(), rs.data(), nxf.data(), nzf.data(), nwf.data(), R, D, 1e-6);
  cpu::gated_rmsnorm_forward<double>(R, D, nx.data(), nz.data(), nw.data(), 1e-6, nyr.data(), rsr.data());
  check(ny, nyr, 1e-5, "norm y"); check(rs, rsr, 1e-5, "norm rstd");
  F ndx = nanv(R * D), ndz = nanv(R * D), ndw(D, 0.f), part3(cuda::kDeltaPartials * D);
  cuda::gated_rmsnorm_backward<float, float>(ndx.data(), ndz.data(), ndw.data(), ndyf.data(), nxf.data(), nzf.data(), nwf.data(), rs.data(), R, D, part3.data());
  V ndxr(R * D), ndzr(R * D), ndwr(D, 0.0);
  cpu::gated_rmsnorm_backward<double>(R, D, nx.data(), nz.data(), nw.data(), rsr.data(), ndy.data(), ndxr.data(), ndzr.data(), ndwr.data());
  check(ndx, ndxr, 1e-5, "norm dx"); check(ndz, ndzr, 1e-5, "norm dz"); check(ndw, ndwr, 1e-5, "norm dw");
}

int main(int argc, char** argv) {
  ops();
  const bool big = argc > 1;
  for (int64_t T : {1, 63, 64, 150}) {
    rule({.B = 2, .T = T, .Hk = 2, .Hv = 4, .Dk = 16, .Dv = 80, .chunk = 64}, T % 2 == 0);
    if (big) rule({.B = 1, .T = T, .Hk = 1, .Hv = 2, .Dk = 128, .Dv = 128, .chunk = 64}, true);
  }
  std::printf("%d failures\n", fails);
  return fails != 0;
}
