// Qwen3.5's Gated DeltaNet mixer on CPU (a linear_attention layer of the schedule), as
// transformers' Qwen3_5GatedDeltaNet: input_layernorm, in_proj_qkv -> causal depthwise
// conv1d + SiLU -> q | k | v; in_proj_z, in_proj_b (beta = sigmoid), in_proj_a (the decay
// g from A_log and dt_bias); the gated delta rule (chunked, zt/kernels/gated_delta.hpp);
// the gated RMSNorm with z; out_proj; residual. Its backward goes through the kernels'
// backward (the rule's recomputes its chunk states). block.cpp calls these for the layers
// Config::linear(l) names; the MLP half is the block's. Packed rows run the conv and the
// rule one example at a time; decode keeps the conv's last inputs and the state in the
// KvCache (the chunked rule over a prefill, the recurrent one over one token).
#include "model_impl.hpp"
#include "zt/kernels/gated_delta.hpp"
#include "zt/kernels/linear.hpp"

namespace zt::model {

namespace {

// The conv's rows [N, Cc] <-> q, k [N, KD] and v [N, VD] (Cc = 2 KD + VD).
template <class R>
void split_qkv(const R* qkv, R* q, R* k, R* v, int64_t N, int64_t KD, int64_t VD) {
  const int64_t Cc = 2 * KD + VD;
  for (int64_t n = 0; n < N; ++n) {
    std::copy_n(qkv + n * Cc, KD, q + n * KD);
    std::copy_n(qkv + n * Cc + KD, KD, k + n * KD);
    std::copy_n(qkv + n * Cc + 2 * KD, VD, v + n * VD);
  }
}
template <class R>
void join_qkv(const R* q, const R* k, const R* v, R* qkv, int64_t N, int64_t KD, int64_t VD) {
  const int64_t Cc = 2 * KD + VD;
  for (int64_t n = 0; n < N; ++n) {
    std::copy_n(q + n * KD, KD, qkv + n * Cc);
    std::copy_n(k + n * KD, KD, qkv + n * Cc + KD);
    std::copy_n(v + n * VD, VD, qkv + n * Cc + 2 * KD);
  }
}

kernels::cpu::DeltaShape delta_shape(const Config& c, int64_t B, int64_t T) {
  return {.B = B, .T = T, .Hk = c.linear_key_heads, .Hv = c.linear_value_heads,
          .Dk = c.linear_key_dim, .Dv = c.linear_value_dim, .chunk = 64};
}

// The examples of B rows of T tokens, f(n0, n, rows): without positions all rows at once
// (f(0, T, B)); with them (packed rows) each example alone, from a position 0 to the next
// (f(its first token's row in [N, .], its tokens, 1)). The conv and the rule run per call,
// so neither sees across an example boundary.
template <class F>
void for_each_example(const int32_t* pos, int64_t B, int64_t T, F&& f) {
  if (!pos) return f(int64_t{0}, T, B);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t0 = 0, t1 = 1; t0 < T; t0 = t1++) {
      while (t1 < T && pos[b * T + t1] != 0) ++t1;
      f(b * T + t0, t1 - t0, int64_t{1});
    }
}

}  // namespace

template <class R>
void Model<R>::Impl::linear_mixer_forward(int l, const R* p, BlockActs<R>& a, const R* x_in,
                                          int64_t B, int64_t T) {
  linear_mixer_run(l, p, a, x_in, B, T, nullptr, nullptr);
}

template <class R>
void Model<R>::Impl::linear_mixer_decode(int l, const R* p, BlockActs<R>& a, const R* x_in,
                                         int64_t n, int64_t s, KvCache<R>& cache) {
  const int64_t Cc = cfg.linear_conv_dim(), K1 = cfg.linear_conv_kernel - 1;
  R* past = cache.conv.data() + s * Cc * K1;  // [Cc, K - 1]
  R* state = cache.state.data() +
             s * cfg.linear_value_heads * cfg.linear_key_dim * cfg.linear_value_dim;
  linear_mixer_run(l, p, a, x_in, 1, n, past, state);
  // The conv's last K - 1 inputs: of (past, the n new rows), in place (reads run ahead).
  const R* x = a.lin.qkv_pre.data();  // [n, Cc]
  for (int64_t c = 0; c < Cc; ++c)
    for (int64_t i = 0; i < K1; ++i)
      past[c * K1 + i] = n + i < K1 ? past[c * K1 + n + i] : x[(n + i - K1) * Cc + c];
}

template <class R>
void Model<R>::Impl::linear_mixer_run(int l, const R* p, BlockActs<R>& a, const R* x_in,
                                      int64_t B, int64_t T, const R* past, R* state) {
  const int64_t N = B * T, C = cfg.hidden, Cc = cfg.linear_conv_dim();
  const int64_t Hv = cfg.linear_value_heads, Dv = cfg.linear_value_dim;
  const int64_t KD = cfg.linear_key_heads * cfg.linear_key_dim, VD = Hv * Dv;
  const BlockOffsets& o = layout.block_offsets(l);
  LinearActs<R>& L = a.lin;
  cpu::rmsnorm_forward(a.xn1.data(), a.rstd1.data(), x_in, p + o.input_norm, N, C, cfg.norm_eps,
                       cfg.norm_offset());
  using LT = LoraTarget;  // proj_forward adds the layer's adapters (LoRA / QLoRA)
  proj_forward(l, LT::kInQkv, L.qkv_pre.data(), a.xn1.data(), p + o.lin_qkv, N, C, Cc);
  const int32_t* rows = state ? nullptr : pos;  // decode: one sequence; else packed examples
  for_each_example(rows, B, T, [&](int64_t n0, int64_t n, int64_t rows_of) {
    cpu::causal_conv1d_silu_forward(rows_of, n, Cc, cfg.linear_conv_kernel,
                                    L.qkv_pre.data() + n0 * Cc, p + o.lin_conv, past,
                                    L.qkv.data() + n0 * Cc);
  });
  split_qkv(L.qkv.data(), L.q.data(), L.k.data(), L.v.data(), N, KD, VD);
  proj_forward(l, LT::kInZ, L.z.data(), a.xn1.data(), p + o.lin_z, N, C, VD);
  proj_forward(l, LT::kInB, L.beta.data(), a.xn1.data(), p + o.lin_b, N, C, Hv);
  for (int64_t i = 0; i < N * Hv; ++i)
    L.beta.data()[i] = static_cast<R>(1.0 / (1.0 + std::exp(-static_cast<double>(L.beta.data()[i]))));
  proj_forward(l, LT::kInA, L.a.data(), a.xn1.data(), p + o.lin_a, N, C, Hv);
  cpu::delta_decay_forward(N, Hv, L.a.data(), p + o.lin_A_log, p + o.lin_dt_bias, L.g.data());
  const auto rule = T == 1 && state ? cpu::gated_delta_recurrent_forward<R>
                                     : cpu::gated_delta_chunked_forward<R>;  // decode: prefill
  for_each_example(rows, B, T, [&](int64_t n0, int64_t n, int64_t rows_of) {
    rule(delta_shape(cfg, rows_of, n), L.q.data() + n0 * KD, L.k.data() + n0 * KD,
         L.v.data() + n0 * VD, L.g.data() + n0 * Hv, L.beta.data() + n0 * Hv, state,
         L.out.data() + n0 * VD, state);
  });
  cpu::gated_rmsnorm_forward(N * Hv, Dv, L.out.data(), L.z.data(), p + o.lin_norm, cfg.norm_eps,
                             L.y.data(), L.rstd.data());
  proj_forward(l, LT::kOutProj, a.x_mid.data(), L.y.data(), p + o.lin_out, N, VD, C);
  cpu::residual_forward(a.x_mid.data(), x_in, a.x_mid.data(), N * C);
}

template <class R>
void Model<R>::Impl::linear_mixer_backward(int l, int u, const R* p, BlockActs<R>& a,
                                           const R* x_in, int64_t B, int64_t T) {
  const int64_t N = B * T, C = cfg.hidden, Cc = cfg.linear_conv_dim();
  const int64_t Hv = cfg.linear_value_heads, Dv = cfg.linear_value_dim;
  const int64_t KD = cfg.linear_key_heads * cfg.linear_key_dim, VD = Hv * Dv;
  const BlockOffsets& o = layout.block_offsets(l);
  const auto g = [&](int64_t off) { return base_grad_or_null(u, off); };
  LinearActs<R>& L = a.lin;
  LinearActs<R>& D = dlin;  // the same buffers' gradients
  // x_mid = x_in + y Wout^T: dres is dL/dx_mid
  using LT = LoraTarget;  // proj_backward: the adapters' gradients too; a frozen base gets none
  proj_backward(l, LT::kOutProj, D.y.data(), g(o.lin_out), dres.data(), L.y.data(), p + o.lin_out,
                N, VD, C, /*accumulate_dx=*/false);
  cpu::gated_rmsnorm_backward(N * Hv, Dv, L.out.data(), L.z.data(), p + o.lin_norm, L.rstd.data(),
                              D.y.data(), D.out.data(), D.z.data(), g(o.lin_norm));
  for_each_example(pos, B, T, [&](int64_t n0, int64_t n, int64_t rows_of) {
    cpu::gated_delta_backward(delta_shape(cfg, rows_of, n), L.q.data() + n0 * KD,
                              L.k.data() + n0 * KD, L.v.data() + n0 * VD, L.g.data() + n0 * Hv,
                              L.beta.data() + n0 * Hv, static_cast<const R*>(nullptr),
                              D.out.data() + n0 * VD, static_cast<const R*>(nullptr),
                              D.q.data() + n0 * KD, D.k.data() + n0 * KD, D.v.data() + n0 * VD,
                              D.g.data() + n0 * Hv, D.beta.data() + n0 * Hv,
                              static_cast<R*>(nullptr));
  });
  for (int64_t i = 0; i < N * Hv; ++i) {  // beta = sigmoid(b): d b
    const R s = L.beta.data()[i];
    D.beta.data()[i] *= s * (R(1) - s);
  }
  cpu::delta_decay_backward(N, Hv, L.a.data(), p + o.lin_A_log, p + o.lin_dt_bias, D.g.data(),
                            D.a.data(), g(o.lin_A_log), g(o.lin_dt_bias));
  join_qkv(D.q.data(), D.k.data(), D.v.data(), D.qkv.data(), N, KD, VD);
  for_each_example(pos, B, T, [&](int64_t n0, int64_t n, int64_t rows_of) {  // dw accumulates
    cpu::causal_conv1d_silu_backward(rows_of, n, Cc, cfg.linear_conv_kernel,
                                     L.qkv_pre.data() + n0 * Cc, p + o.lin_conv,
                                     static_cast<const R*>(nullptr), D.qkv.data() + n0 * Cc,
                                     D.qkv_pre.data() + n0 * Cc, g(o.lin_conv));
  });
  proj_backward(l, LT::kInQkv, dxn.data(), g(o.lin_qkv), D.qkv_pre.data(), a.xn1.data(),
                p + o.lin_qkv, N, C, Cc, /*accumulate_dx=*/false);
  proj_backward(l, LT::kInZ, dxn.data(), g(o.lin_z), D.z.data(), a.xn1.data(), p + o.lin_z, N, C, VD);
  proj_backward(l, LT::kInB, dxn.data(), g(o.lin_b), D.beta.data(), a.xn1.data(), p + o.lin_b, N, C, Hv);
  proj_backward(l, LT::kInA, dxn.data(), g(o.lin_a), D.a.data(), a.xn1.data(), p + o.lin_a, N, C, Hv);
  cpu::rmsnorm_backward(dres.data(), g(o.input_norm), dxn.data(), x_in, p + o.input_norm,
                        a.rstd1.data(), N, C, true, cfg.norm_offset());  // dres += (the branch)
}

#define ZT_LINEAR_INSTANTIATE(R)                                                                \
  template void Model<R>::Impl::linear_mixer_forward(int, const R*, BlockActs<R>&, const R*,    \
                                                     int64_t, int64_t);                         \
  template void Model<R>::Impl::linear_mixer_backward(int, int, const R*, BlockActs<R>&,        \
                                                      const R*, int64_t, int64_t);           \
  template void Model<R>::Impl::linear_mixer_decode(int, const R*, BlockActs<R>&, const R*,     \
                                                    int64_t, int64_t, KvCache<R>&);
ZT_LINEAR_INSTANTIATE(float)
ZT_LINEAR_INSTANTIATE(double)
#undef ZT_LINEAR_INSTANTIATE

}  // namespace zt::model
