// Gated DeltaNet's CUDA kernels (zt/kernels/cuda/gated_delta.hpp) against the CPU kernels
// (zt/kernels/gated_delta.hpp) run in double on the same inputs (rounded to the GPU's types
// first): the conv1d + SiLU and its past, the decay and beta, the gated RMSNorm, the chunked
// rule's forward (outputs, final state, chunk-start states) and backward (every input's
// gradient), the recurrent form, and the recurrent step token by token against the chunked
// form's states. T = 1, 63, 64, 150 tokens; Dk = Dv = 128 (Qwen3.5) and a small shape whose
// Dv spans two value slices; Hv = 2 Hk; with and without state0. Every output starts as NaN
// (poisoned), so an unwritten element fails; the measure is testing::rel_to_max.
// Tolerances (relative to the buffer's largest value): fp32 outputs and gradients 1e-5
// (kTolF32; these kernels emulated on the CPU, every thread a thread and every barrier a
// barrier, came within 1.8e-6 over four seeds), bf16 outputs 1e-2 (kTolBF16: their
// rounding, 2^-9, plus fp32 work). Row counts of 320 fill all 64 row chunks of the
// parameters' gradients (a chunk left out fails).
#include <algorithm>
#include <cmath>
#include <string>

#include "cuda_test_util.hpp"
#include "zt/kernels/cuda/gated_delta.hpp"
#include "zt/kernels/gated_delta.hpp"

namespace zt::kernels::cuda {
namespace {

namespace cpu = zt::kernels::cpu;

using testing::expect_close;
using testing::GpuTest;
using testing::poisoned;
using testing::to_device;
using testing::to_host;
using testing::tolerance;
using testing::type_name;
using testing::Vec;

constexpr double kTolRuleGrad = testing::kTolF32;

int64_t chunks(const DeltaShape& s) { return (s.T + kDeltaChunk - 1) / kDeltaChunk; }

std::string shape_name(const DeltaShape& s, bool with_state, const char* type) {
  return std::string(type) + " T " + std::to_string(s.T) + " Hk " + std::to_string(s.Hk) +
         " Hv " + std::to_string(s.Hv) + " Dk " + std::to_string(s.Dk) + " Dv " +
         std::to_string(s.Dv) + (with_state ? " state0" : "");
}

// The first T2 tokens of [B, T, w] rows.
Vec prefix(const Vec& x, int64_t B, int64_t T, int64_t T2, int64_t w) {
  Vec out;
  for (int64_t b = 0; b < B; ++b)
    out.insert(out.end(), x.begin() + b * T * w, x.begin() + (b * T + T2) * w);
  return out;
}

// The rule's inputs, rounded to what the GPU holds (q, k, v as T; g, beta, state0 fp32).
template <class T>
struct Rule {
  DeltaShape s;
  Vec q, k, v, g, beta, state0;
  DeviceBuffer<T> dq{1}, dk{1}, dv{1};
  DeviceBuffer<float> dg{1}, dbeta{1}, dstate0{1};
  const float* st0() const { return state0.empty() ? nullptr : dstate0.data(); }
  const double* st0_host() const { return state0.empty() ? nullptr : state0.data(); }
  size_t n_out() const { return static_cast<size_t>(s.B * s.T * s.Hv * s.Dv); }
  size_t n_state() const { return static_cast<size_t>(s.B * s.Hv * s.Dk * s.Dv); }
};

class GatedDeltaCuda : public GpuTest {
 protected:
  // g <= 0 (log decays 0.02 .. about 1), beta in (0, 1), as the model's gates give.
  Vec decays(size_t n) {
    Vec g = randn(n, 0.4);
    for (double& x : g) x = -0.02 - std::abs(x);
    return g;
  }
  Vec betas(size_t n) {
    Vec b = randn(n, 1.5);
    for (double& x : b) x = 1.0 / (1.0 + std::exp(-x));
    return b;
  }
  template <class T>
  Rule<T> rule(const DeltaShape& s, bool with_state) {
    Rule<T> r;
    r.s = s;
    r.q = randn(static_cast<size_t>(s.B * s.T * s.Hk * s.Dk));
    r.k = randn(r.q.size());
    r.v = randn(static_cast<size_t>(s.B * s.T * s.Hv * s.Dv));
    r.g = decays(static_cast<size_t>(s.B * s.T * s.Hv));
    r.beta = betas(r.g.size());
    if (with_state) r.state0 = randn(r.n_state(), 0.5);
    r.dq = to_device<T>(r.q), r.dk = to_device<T>(r.k), r.dv = to_device<T>(r.v);
    r.dg = to_device<float>(r.g), r.dbeta = to_device<float>(r.beta);
    if (with_state) r.dstate0 = to_device<float>(r.state0);
    return r;
  }

  template <class T>
  void forward_case(const DeltaShape& s, bool with_state);
  template <class T>
  void steps_case(const DeltaShape& s, bool with_state);
  template <class T>
  void backward_case(const DeltaShape& s, bool with_state, bool pass_starts);
  template <class T, class G>
  void conv_case(int64_t B, int64_t Tn, int64_t C, int64_t K, bool with_past);
  template <class T, class G>
  void gates_case(int64_t N, int64_t Hv);
  template <class T, class G>
  void norm_case(int64_t rows, int64_t D);
};

// The shapes of the rule's tests: Qwen3.5's heads, and a small one with Dv over two slices
// of 64 value columns (and three of the recurrent step's 32).
std::vector<DeltaShape> rule_shapes() {
  std::vector<DeltaShape> out;
  for (int64_t T : {1, 63, 64, 150}) {
    out.push_back({.B = 1, .T = T, .Hk = 1, .Hv = 2, .Dk = 128, .Dv = 128, .chunk = 64});
    out.push_back({.B = 2, .T = T, .Hk = 2, .Hv = 4, .Dk = 16, .Dv = 80, .chunk = 64});
  }
  return out;
}

}  // namespace

// Element [bh, ci] blocks of [B Hv, nC, Dk Dv] from the per-chunk states [nC][B Hv, Dk Dv].
Vec interleave(const std::vector<Vec>& per_chunk, int64_t BH, int64_t DD) {
  const auto nC = static_cast<int64_t>(per_chunk.size());
  Vec out(static_cast<size_t>(BH * nC * DD));
  for (int64_t ci = 0; ci < nC; ++ci)
    for (int64_t bh = 0; bh < BH; ++bh)
      std::copy_n(per_chunk[ci].begin() + bh * DD, DD, out.begin() + (bh * nC + ci) * DD);
  return out;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

template <class T>
double grad_tol() {
  return std::is_same_v<T, float> ? kTolRuleGrad : testing::kTolBF16;
}

template <class T>
void GatedDeltaCuda::forward_case(const DeltaShape& s, bool with_state) {
  auto r = rule<T>(s, with_state);
  const std::string name = shape_name(s, with_state, type_name<T>());
  const int64_t nC = chunks(s), DD = s.Dk * s.Dv, BH = s.B * s.Hv;
  auto out = poisoned<T>(r.n_out());
  auto st1 = poisoned<float>(r.n_state());
  auto starts = poisoned<float>(static_cast<size_t>(BH * nC * DD));
  gated_delta_chunked_forward<T>(out.data(), st1.data(), starts.data(), s, r.dq.data(),
                                 r.dk.data(), r.dv.data(), r.dg.data(), r.dbeta.data(), r.st0());
  Vec o_ref(r.n_out()), s_ref(r.n_state());
  cpu::gated_delta_chunked_forward<double>(s, r.q.data(), r.k.data(), r.v.data(), r.g.data(),
                                           r.beta.data(), r.st0_host(), o_ref.data(),
                                           s_ref.data());
  expect_close(to_host(out), o_ref, tolerance<T>(), "chunked out " + name);
  expect_close(to_host(st1), s_ref, testing::kTolF32, "chunked state1 " + name);
  // chunk ci's start state: the CPU rule's final state over the first 64 ci tokens
  std::vector<Vec> per_chunk;
  for (int64_t ci = 0; ci < nC; ++ci) {
    DeltaShape sp = s;
    sp.T = ci * kDeltaChunk;
    const Vec q = prefix(r.q, s.B, s.T, sp.T, s.Hk * s.Dk), k = prefix(r.k, s.B, s.T, sp.T, s.Hk * s.Dk);
    const Vec v = prefix(r.v, s.B, s.T, sp.T, s.Hv * s.Dv), g = prefix(r.g, s.B, s.T, sp.T, s.Hv);
    const Vec b = prefix(r.beta, s.B, s.T, sp.T, s.Hv);
    Vec o(static_cast<size_t>(s.B * sp.T * s.Hv * s.Dv)), st(r.n_state());
    cpu::gated_delta_chunked_forward<double>(sp, q.data(), k.data(), v.data(), g.data(),
                                             b.data(), r.st0_host(), o.data(), st.data());
    per_chunk.push_back(st);
  }
  expect_close(to_host(starts), interleave(per_chunk, BH, DD), testing::kTolF32,
               "chunk-start states " + name);
  // the recurrent form on the GPU: the same numbers
  auto out_r = poisoned<T>(r.n_out());
  auto st_r = poisoned<float>(r.n_state());
  gated_delta_recurrent_forward<T>(out_r.data(), st_r.data(), s, r.dq.data(), r.dk.data(),
                                   r.dv.data(), r.dg.data(), r.dbeta.data(), r.st0());
  expect_close(to_host(out_r), o_ref, tolerance<T>(), "recurrent out " + name);
  expect_close(to_host(st_r), s_ref, testing::kTolF32, "recurrent state1 " + name);
}

template <class T>
void GatedDeltaCuda::steps_case(const DeltaShape& s, bool with_state) {
  ASSERT_EQ(s.B, 1) << "token t's rows are then contiguous";
  auto r = rule<T>(s, with_state);
  const std::string name = shape_name(s, with_state, type_name<T>());
  const int64_t nC = chunks(s), DD = s.Dk * s.Dv;
  auto st1 = poisoned<float>(r.n_state());
  auto starts = poisoned<float>(static_cast<size_t>(s.Hv * nC * DD));
  gated_delta_chunked_forward<T>(static_cast<T*>(nullptr), st1.data(), starts.data(), s,
                                 r.dq.data(), r.dk.data(), r.dv.data(), r.dg.data(),
                                 r.dbeta.data(), r.st0());
  const Vec chunk_starts = to_host(starts);
  Vec zeros(r.n_state(), 0.0);
  auto state = to_device<float>(with_state ? r.state0 : zeros);  // updated in place
  DeltaShape one = s;
  one.T = 1;
  auto o1 = poisoned<T>(static_cast<size_t>(s.Hv * s.Dv));
  for (int64_t t = 0; t < s.T; ++t) {
    if (t > 0 && t % kDeltaChunk == 0) {
      const int64_t ci = t / kDeltaChunk;
      Vec ref(r.n_state());
      for (int64_t h = 0; h < s.Hv; ++h)
        std::copy_n(chunk_starts.begin() + (h * nC + ci) * DD, DD, ref.begin() + h * DD);
      expect_close(to_host(state), ref, testing::kTolF32,
                   "step state at token " + std::to_string(t) + " " + name);
    }
    gated_delta_recurrent_forward<T>(o1.data(), state.data(), one, r.dq.data() + t * s.Hk * s.Dk,
                                     r.dk.data() + t * s.Hk * s.Dk, r.dv.data() + t * s.Hv * s.Dv,
                                     r.dg.data() + t * s.Hv, r.dbeta.data() + t * s.Hv,
                                     state.data());
  }
  expect_close(to_host(state), to_host(st1), testing::kTolF32, "step final state " + name);
}

template <class T>
void GatedDeltaCuda::backward_case(const DeltaShape& s, bool with_state, bool pass_starts) {
  auto r = rule<T>(s, with_state);
  const std::string name = shape_name(s, with_state, type_name<T>()) +
                           (pass_starts ? " (starts given)" : " (starts recomputed)");
  Vec dout = randn(r.n_out()), dst1 = randn(r.n_state(), 0.5);
  auto d_dout = to_device<T>(dout);
  auto d_dst1 = to_device<float>(dst1);
  DeviceBuffer<float> starts(static_cast<size_t>(s.B * s.Hv * chunks(s) * s.Dk * s.Dv));
  if (pass_starts)
    gated_delta_chunked_forward<T>(static_cast<T*>(nullptr), nullptr, starts.data(), s,
                                   r.dq.data(), r.dk.data(), r.dv.data(), r.dg.data(),
                                   r.dbeta.data(), r.st0());
  DeviceBuffer<float> scratch(static_cast<size_t>(gated_delta_backward_scratch(s, !pass_starts)));
  auto dq = poisoned<T>(r.q.size()), dk = poisoned<T>(r.k.size()), dv = poisoned<T>(r.v.size());
  auto dg = poisoned<float>(r.g.size()), db = poisoned<float>(r.g.size());
  auto ds0 = poisoned<float>(r.n_state());
  gated_delta_backward<T>(dq.data(), dk.data(), dv.data(), dg.data(), db.data(), ds0.data(), s,
                          r.dq.data(), r.dk.data(), r.dv.data(), r.dg.data(), r.dbeta.data(),
                          r.st0(), pass_starts ? starts.data() : nullptr, d_dout.data(),
                          d_dst1.data(), scratch.data());
  Vec dq_ref(r.q.size()), dk_ref(r.k.size()), dv_ref(r.v.size()), dg_ref(r.g.size()),
      db_ref(r.g.size()), ds0_ref(r.n_state());
  cpu::gated_delta_backward<double>(s, r.q.data(), r.k.data(), r.v.data(), r.g.data(),
                                    r.beta.data(), r.st0_host(), dout.data(), dst1.data(),
                                    dq_ref.data(), dk_ref.data(), dv_ref.data(), dg_ref.data(),
                                    db_ref.data(), ds0_ref.data());
  expect_close(to_host(dq), dq_ref, grad_tol<T>(), "dq " + name);
  expect_close(to_host(dk), dk_ref, grad_tol<T>(), "dk " + name);
  expect_close(to_host(dv), dv_ref, grad_tol<T>(), "dv " + name);
  expect_close(to_host(dg), dg_ref, kTolRuleGrad, "dg " + name);
  expect_close(to_host(db), db_ref, kTolRuleGrad, "dbeta " + name);
  expect_close(to_host(ds0), ds0_ref, kTolRuleGrad, "dstate0 " + name);
}

template <class T, class G>
void GatedDeltaCuda::conv_case(int64_t B, int64_t Tn, int64_t C, int64_t K, bool with_past) {
  const std::string name = std::string(type_name<T>()) + "/" + type_name<G>() + " T " +
                           std::to_string(Tn) + (with_past ? " past" : "");
  const int64_t P = K - 1;
  Vec x = randn(static_cast<size_t>(B * Tn * C)), w = randn(static_cast<size_t>(C * K), 0.5);
  Vec past = with_past ? randn(static_cast<size_t>(B * C * P)) : Vec(static_cast<size_t>(B * C * P), 0.0);
  auto d_x = to_device<T>(x), d_w = to_device<T>(w), d_past = to_device<T>(past);
  const T* pp = with_past ? d_past.data() : nullptr;
  const double* pr = with_past ? past.data() : nullptr;
  auto y = poisoned<T>(x.size());
  causal_conv1d_silu_forward<T>(y.data(), d_x.data(), d_w.data(), pp, B, Tn, C, K);
  Vec y_ref(x.size());
  cpu::causal_conv1d_silu_forward<double>(B, Tn, C, K, x.data(), w.data(), pr, y_ref.data());
  expect_close(to_host(y), y_ref, tolerance<T>(), "conv y " + name);
  // backward: dx, dw (added to what was there), dpast
  Vec dy = randn(x.size()), dw0 = randn(w.size(), 0.1);
  auto d_dy = to_device<T>(dy);
  auto d_dw = to_device<G>(dw0);
  auto dx = poisoned<T>(x.size()), dpast = poisoned<T>(past.size());
  DeviceBuffer<float> partial(static_cast<size_t>(kDeltaPartials * C * K));
  causal_conv1d_silu_backward<T, G>(dx.data(), d_dw.data(), dpast.data(), d_dy.data(),
                                    d_x.data(), d_w.data(), pp, B, Tn, C, K, partial.data());
  Vec dx_ref(x.size()), dw_ref(w.size(), 0.0);
  cpu::causal_conv1d_silu_backward<double>(B, Tn, C, K, x.data(), w.data(), pr, dy.data(),
                                           dx_ref.data(), dw_ref.data());
  for (size_t i = 0; i < dw_ref.size(); ++i) dw_ref[i] += dw0[i];
  expect_close(to_host(dx), dx_ref, tolerance<T>(), "conv dx " + name);
  expect_close(to_host(d_dw), dw_ref, tolerance<G>(), "conv dw " + name);
  // dpast: the CPU conv over [past | x] without a past, dy 0 on the past's tokens
  const int64_t Tc = P + Tn;
  Vec xc(static_cast<size_t>(B * Tc * C)), dyc(xc.size(), 0.0), dxc(xc.size()), dwc(w.size(), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tc; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const size_t o = static_cast<size_t>((b * Tc + t) * C + c);
        xc[o] = t < P ? past[(b * C + c) * P + t] : x[(b * Tn + t - P) * C + c];
        dyc[o] = t < P ? 0.0 : dy[(b * Tn + t - P) * C + c];
      }
  cpu::causal_conv1d_silu_backward<double>(B, Tc, C, K, xc.data(), w.data(), nullptr,
                                           dyc.data(), dxc.data(), dwc.data());
  Vec dpast_ref(past.size()), past_ref(past.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < P; ++i) {
        dpast_ref[(b * C + c) * P + i] = dxc[(b * Tc + i) * C + c];
        past_ref[(b * C + c) * P + i] = xc[(b * Tc + Tn + i) * C + c];  // the last P inputs
      }
  expect_close(to_host(dpast), dpast_ref, tolerance<T>(), "conv dpast " + name);
  // the conv's state after x, in place
  causal_conv1d_update_past<T>(d_past.data(), pp, d_x.data(), B, Tn, C, K);
  expect_close(to_host(d_past), past_ref, 1e-12, "conv past update " + name);
}

template <class T, class G>
void GatedDeltaCuda::gates_case(int64_t N, int64_t Hv) {
  const std::string name = std::string(type_name<T>()) + "/" + type_name<G>();
  Vec a = randn(static_cast<size_t>(N * Hv), 2.0), b = randn(a.size(), 2.0);
  Vec A_log = randn(static_cast<size_t>(Hv), 0.7), dt = randn(A_log.size(), 0.7);
  a[0] = 30.0;  // softplus's linear branch (above 20)
  auto d_a = to_device<T>(a), d_b = to_device<T>(b), d_A = to_device<T>(A_log), d_dt = to_device<T>(dt);
  auto g = poisoned<float>(a.size()), beta = poisoned<float>(a.size());
  delta_gates_forward<T>(g.data(), beta.data(), d_a.data(), d_b.data(), d_A.data(), d_dt.data(), N, Hv);
  Vec g_ref(a.size()), beta_ref(a.size());
  cpu::delta_decay_forward<double>(N, Hv, a.data(), A_log.data(), dt.data(), g_ref.data());
  for (size_t i = 0; i < b.size(); ++i) beta_ref[i] = sigmoid(b[i]);
  expect_close(to_host(g), g_ref, testing::kTolF32, "decay g " + name);
  expect_close(to_host(beta), beta_ref, testing::kTolF32, "beta " + name);
  Vec dg = randn(a.size()), dbeta = randn(a.size()), dA0 = randn(A_log.size(), 0.1), ddt0 = randn(dt.size(), 0.1);
  auto d_dg = to_device<float>(dg), d_dbeta = to_device<float>(dbeta);
  auto d_dA = to_device<G>(dA0), d_ddt = to_device<G>(ddt0);
  auto da = poisoned<T>(a.size()), db = poisoned<T>(a.size());
  DeviceBuffer<float> partial(static_cast<size_t>(kDeltaPartials * 2 * Hv));
  delta_gates_backward<T, G>(da.data(), db.data(), d_dA.data(), d_ddt.data(), d_dg.data(),
                             d_dbeta.data(), beta.data(), d_a.data(), d_A.data(), d_dt.data(),
                             N, Hv, partial.data());
  Vec da_ref(a.size()), dA_ref(dA0), ddt_ref(ddt0), db_ref(a.size());
  cpu::delta_decay_backward<double>(N, Hv, a.data(), A_log.data(), dt.data(), dg.data(),
                                    da_ref.data(), dA_ref.data(), ddt_ref.data());
  for (size_t i = 0; i < b.size(); ++i) db_ref[i] = dbeta[i] * beta_ref[i] * (1.0 - beta_ref[i]);
  expect_close(to_host(da), da_ref, tolerance<T>(), "da " + name);
  expect_close(to_host(db), db_ref, tolerance<T>(), "db " + name);
  expect_close(to_host(d_dA), dA_ref, tolerance<G>(), "dA_log " + name);
  expect_close(to_host(d_ddt), ddt_ref, tolerance<G>(), "ddt_bias " + name);
}

template <class T, class G>
void GatedDeltaCuda::norm_case(int64_t rows, int64_t D) {
  const std::string name = std::string(type_name<T>()) + "/" + type_name<G>() + " D " + std::to_string(D);
  const double eps = 1e-6;
  Vec x = randn(static_cast<size_t>(rows * D)), z = randn(x.size(), 2.0), w = randn(static_cast<size_t>(D), 0.5, 1.0);
  auto d_x = to_device<T>(x), d_z = to_device<T>(z), d_w = to_device<T>(w);
  auto y = poisoned<T>(x.size());
  auto rstd = poisoned<float>(static_cast<size_t>(rows));
  gated_rmsnorm_forward<T>(y.data(), rstd.data(), d_x.data(), d_z.data(), d_w.data(), rows, D, eps);
  Vec y_ref(x.size()), r_ref(static_cast<size_t>(rows));
  cpu::gated_rmsnorm_forward<double>(rows, D, x.data(), z.data(), w.data(), eps, y_ref.data(), r_ref.data());
  expect_close(to_host(y), y_ref, tolerance<T>(), "gated norm y " + name);
  expect_close(to_host(rstd), r_ref, testing::kTolF32, "gated norm rstd " + name);
  Vec dy = randn(x.size()), dw0 = randn(w.size(), 0.1);
  auto d_dy = to_device<T>(dy);
  auto d_dw = to_device<G>(dw0);
  auto dx = poisoned<T>(x.size()), dz = poisoned<T>(x.size());
  DeviceBuffer<float> partial(static_cast<size_t>(kDeltaPartials * D));
  gated_rmsnorm_backward<T, G>(dx.data(), dz.data(), d_dw.data(), d_dy.data(), d_x.data(),
                               d_z.data(), d_w.data(), rstd.data(), rows, D, partial.data());
  Vec dx_ref(x.size()), dz_ref(x.size()), dw_ref(dw0);
  cpu::gated_rmsnorm_backward<double>(rows, D, x.data(), z.data(), w.data(), r_ref.data(),
                                      dy.data(), dx_ref.data(), dz_ref.data(), dw_ref.data());
  expect_close(to_host(dx), dx_ref, tolerance<T>(), "gated norm dx " + name);
  expect_close(to_host(dz), dz_ref, tolerance<T>(), "gated norm dz " + name);
  expect_close(to_host(d_dw), dw_ref, tolerance<G>(), "gated norm dw " + name);
}

TEST_F(GatedDeltaCuda, ConvMatchesCpu) {
  for (int64_t Tn : {1, 2, 160})  // 2 x 160 rows: every row chunk of dw
    for (bool past : {false, true}) {
      conv_case<float, float>(2, Tn, 40, 4, past);
      conv_case<bf16_t, float>(2, Tn, 40, 4, past);
      conv_case<bf16_t, bf16_t>(2, Tn, 40, 4, past);
    }
}

TEST_F(GatedDeltaCuda, GatesMatchCpu) {
  gates_case<float, float>(320, 6);
  gates_case<bf16_t, float>(320, 6);
  gates_case<bf16_t, bf16_t>(320, 6);
}

TEST_F(GatedDeltaCuda, GatedNormMatchesCpu) {
  for (int64_t D : {128, 48}) {
    norm_case<float, float>(320, D);
    norm_case<bf16_t, float>(320, D);
    norm_case<bf16_t, bf16_t>(320, D);
  }
}

TEST_F(GatedDeltaCuda, RuleForwardMatchesCpu) {
  for (const DeltaShape& s : rule_shapes())
    for (bool st : {false, true}) {
      forward_case<float>(s, st);
      forward_case<bf16_t>(s, st);
    }
}

TEST_F(GatedDeltaCuda, RecurrentStepsEqualChunkedStates) {
  for (int64_t Dk : {128, 16}) {
    const DeltaShape s{.B = 1, .T = 150, .Hk = 1, .Hv = 2, .Dk = Dk, .Dv = Dk == 128 ? 128 : 80, .chunk = 64};
    steps_case<float>(s, true);
    steps_case<bf16_t>(s, false);
  }
}

TEST_F(GatedDeltaCuda, RuleBackwardMatchesCpu) {
  for (const DeltaShape& s : rule_shapes())
    for (bool st : {false, true}) {
      backward_case<float>(s, st, st);
      backward_case<bf16_t>(s, st, !st);
    }
}

// Shapes the GPU rule does not take are refused before any device work (runs everywhere).
TEST(GatedDeltaCudaShapes, RefusesWhatItCannotRun) {
  const DeltaShape ok{.B = 1, .T = 4, .Hk = 1, .Hv = 2, .Dk = 16, .Dv = 16, .chunk = 64};
  auto refused = [](DeltaShape s, const std::string& what) {
    try {
      gated_delta_chunked_forward<float>(nullptr, nullptr, nullptr, s, nullptr, nullptr, nullptr,
                                         nullptr, nullptr, nullptr);
      ADD_FAILURE() << what << ": not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("gated_delta_chunked_forward"), std::string::npos) << e.what();
    }
  };
  DeltaShape s = ok;
  s.chunk = 32;
  refused(s, "chunk 32");
  s = ok;
  s.Dk = 256;
  refused(s, "Dk 256");
  s = ok;
  s.Dv = 0;
  refused(s, "Dv 0");
  s = ok;
  s.Hk = 2, s.Hv = 3;
  refused(s, "Hv 3, Hk 2");
}

}  // namespace zt::kernels::cuda
