// The Llama decoder block on CPU: attention (RMSNorm, q/k/v projections (+ biases), the
// per-head q/k RMSNorm of Qwen3, RoPE, causal GQA attention, o_proj (+ bias), residual) and
// the SwiGLU MLP (RMSNorm, gate/up, SwiGLU, down, residual), in its forward, its KV-cached
// decode and its backward. The family's pieces are read from the config (Config::qkv_bias,
// o_bias, qk_norm); model.cpp runs the trunk.
#include "model_impl.hpp"

namespace zt::model {

namespace {
// The tensor at offset off of a unit's buffer p, or nullptr when the block has none (-1).
template <class R>
R* at(R* p, int64_t off) {
  return off >= 0 && p ? p + off : nullptr;
}

// Qwen3.5's output gate: q_proj's rows [NH, 2D] hold each head's query then its gate.
template <class R>
void split_query_gate(const R* qg, R* q, R* gate, int64_t NH, int64_t D) {
  for (int64_t r = 0; r < NH; ++r) {
    std::copy_n(qg + r * 2 * D, D, q + r * D);
    std::copy_n(qg + r * 2 * D + D, D, gate + r * D);
  }
}
template <class R>
void join_query_gate(const R* dq, const R* dgate, R* dqg, int64_t NH, int64_t D) {
  for (int64_t r = 0; r < NH; ++r) {
    std::copy_n(dq + r * D, D, dqg + r * 2 * D);
    std::copy_n(dgate + r * D, D, dqg + r * 2 * D + D);
  }
}
template <class R>
R sigmoid_of(R x) {
  return static_cast<R>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
}
// y = att * sigmoid(gate) over n elements.
template <class R>
void output_gate_forward(R* y, const R* att, const R* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = att[i] * sigmoid_of(gate[i]);
}
// d holds dL/dy on entry and dL/d att on exit; dgate written.
template <class R>
void output_gate_backward(R* d, R* dgate, const R* att, const R* gate, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const R s = sigmoid_of(gate[i]);
    dgate[i] = d[i] * att[i] * s * (R(1) - s);
    d[i] *= s;
  }
}
}  // namespace

// The q projection: into q [N, H*D] (and, with the output gate, its gate a.ogate).
template <class R>
void Model<R>::Impl::q_forward(int l, R* q, const R* p, BlockActs<R>& a, int64_t N) {
  const int64_t C = cfg.hidden, HD = cfg.q_dim();
  const BlockOffsets& o = layout.block_offsets(l);
  if (!cfg.output_gate())
    return proj_forward(l, LoraTarget::kQ, q, a.xn1.data(), p + o.q, N, C, HD, at(p, o.q_bias));
  proj_forward(l, LoraTarget::kQ, a.qg.data(), a.xn1.data(), p + o.q, N, C, 2 * HD,
               at(p, o.q_bias));
  split_query_gate(a.qg.data(), q, a.ogate.data(), N * cfg.heads, cfg.head_dim());
}

// Block l: x_in [N, C] -> x_out [N, C]; activations into a. With x_out == nullptr
// (recompute in the backward) the down projection and last residual are skipped:
// the backward needs only what comes before them.
template <class R>
void Model<R>::Impl::block_forward(int l, const R* x_in, R* x_out, BlockActs<R>& a, int64_t B,
                                   int64_t T) {
  const int64_t N = B * T, C = cfg.hidden;
  const int64_t H = cfg.heads, G = cfg.kv_heads, D = cfg.head_dim();
  const R* p = params[static_cast<size_t>(layout.block_unit(l))];
  const BlockOffsets& o = layout.block_offsets(l);
  const bool qk_norm = cfg.qk_norm();
  const double off = cfg.norm_offset(), eps = cfg.norm_eps;
  if (cfg.linear(l)) {  // Qwen3.5's Gated DeltaNet instead of the attention
    linear_mixer_forward(l, p, a, x_in, B, T);
    return mlp_forward(l, p, x_out, a, N);
  }
  // attention half
  cpu::rmsnorm_forward(a.xn1.data(), a.rstd1.data(), x_in, p + o.input_norm, N, C, eps, off);
  R* q = qk_norm ? a.qr.data() : a.q.data();  // projections before the q/k norm
  R* kk = qk_norm ? a.kr.data() : a.k.data();
  q_forward(l, q, p, a, N);
  proj_forward(l, LoraTarget::kK, kk, a.xn1.data(), p + o.k, N, C, G * D, at(p, o.k_bias));
  proj_forward(l, LoraTarget::kV, a.v.data(), a.xn1.data(), p + o.v, N, C, G * D,
               at(p, o.v_bias));
  if (qk_norm) {  // per head: rows of D
    cpu::rmsnorm_forward(a.q.data(), a.rstd_q.data(), q, p + o.q_norm, N * H, D, eps, off);
    cpu::rmsnorm_forward(a.k.data(), a.rstd_k.data(), kk, p + o.k_norm, N * G, D, eps, off);
  }
  const auto [cos, sin] = rope_of(l);  // the layer type's RoPE
  cpu::rope_forward(a.q.data(), cos, sin, B, T, H, D, pos, cfg.rotary_dim());
  cpu::rope_forward(a.k.data(), cos, sin, B, T, G, D, pos, cfg.rotary_dim());
  scale_by(a.q.data(), N * H * D, cfg.query_scale());
  cpu::attention_forward(a.att.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), B, T,
                       H, G, D, pos, cfg.window(l), at(p, o.sinks), cfg.attn_logit_softcap);
  attn_out(l, p, a, x_in, N);
  mlp_forward(l, p, x_out, a, N);
}

// The attention's output: x_mid = x_in + o_proj(att), Gemma's sandwich norming o_proj's
// output first.
template <class R>
void Model<R>::Impl::attn_out(int l, const R* p, BlockActs<R>& a, const R* x_in, int64_t N) {
  const int64_t C = cfg.hidden, HD = cfg.q_dim();
  const BlockOffsets& o = layout.block_offsets(l);
  const bool sandwich = cfg.sandwich_norms();
  const R* att = a.att.data();
  if (cfg.output_gate()) {
    output_gate_forward(a.att_g.data(), att, a.ogate.data(), N * HD);
    att = a.att_g.data();
  }
  proj_forward(l, LoraTarget::kO, sandwich ? a.o_out.data() : a.x_mid.data(), att, p + o.o, N,
               HD, C, at(p, o.o_bias));
  if (sandwich)
    cpu::rmsnorm_forward(a.x_mid.data(), a.rstd_o.data(), a.o_out.data(), p + o.attn_out_norm, N,
                         C, cfg.norm_eps, cfg.norm_offset());
  cpu::residual_forward(a.x_mid.data(), x_in, a.x_mid.data(), N * C);
}

// A block's MLP half: a.x_mid [N, C] -> x_out [N, C] (skipped when x_out == nullptr; with
// Gemma's sandwich the down projection and its norm still run, into dxn: the backward
// needs them).
template <class R>
void Model<R>::Impl::mlp_forward(int l, const R* p, R* x_out, BlockActs<R>& a, int64_t N) {
  const int64_t C = cfg.hidden, I = cfg.intermediate;
  const BlockOffsets& o = layout.block_offsets(l);
  const double off = cfg.norm_offset();
  cpu::rmsnorm_forward(a.xn2.data(), a.rstd2.data(), a.x_mid.data(), p + o.post_norm, N, C,
                     cfg.norm_eps, off);
  if (cfg.moe_layer(l)) return moe_forward(l, p, x_out, a, N);
  proj_forward(l, LoraTarget::kGate, a.gate.data(), a.xn2.data(), p + o.gate, N, C, I);
  proj_forward(l, LoraTarget::kUp, a.up.data(), a.xn2.data(), p + o.up, N, C, I);
  if (cfg.gelu_mlp())
    cpu::geglu_forward(a.h.data(), a.gate.data(), a.up.data(), N * I);
  else
    cpu::swiglu_forward(a.h.data(), a.gate.data(), a.up.data(), N * I);
  const bool sandwich = cfg.sandwich_norms();
  if (!x_out && !sandwich) return;
  proj_forward(l, LoraTarget::kDown, sandwich ? a.down_out.data() : x_out, a.h.data(), p + o.down,
               N, I, C);
  if (sandwich)
    cpu::rmsnorm_forward(x_out ? x_out : dxn.data(), a.rstd_m.data(), a.down_out.data(),
                         p + o.mlp_out_norm, N, C, cfg.norm_eps, off);
  if (x_out) cpu::residual_forward(x_out, a.x_mid.data(), x_out, N * C);
}

// Block l over n new positions of one sequence (past before them in the cache): their
// keys and values go into the cache, their queries attend the whole cache.
template <class R>
void Model<R>::Impl::block_decode(int l, const R* x_in, R* x_out, BlockActs<R>& a, int64_t n,
                                  int64_t past, KvCache<R>& cache) {
  const int64_t C = cfg.hidden, H = cfg.heads, G = cfg.kv_heads, D = cfg.head_dim();
  const int64_t GD = G * D;
  const R* p = params[static_cast<size_t>(layout.block_unit(l))];
  const BlockOffsets& o = layout.block_offsets(l);
  const int64_t slot = cache.slot[static_cast<size_t>(l)];  // among the blocks of its kind
  if (cfg.linear(l)) {  // Gated DeltaNet: the cache's conv inputs and recurrent state
    linear_mixer_decode(l, p, a, x_in, n, slot, cache);
    return mlp_forward(l, p, x_out, a, n);
  }
  R* kc = cache.k.data() + slot * cache.capacity * GD;  // [capacity, G*D]
  R* vc = cache.v.data() + slot * cache.capacity * GD;  // [capacity, G*D]
  const double off = cfg.norm_offset(), eps = cfg.norm_eps;
  cpu::rmsnorm_forward(a.xn1.data(), a.rstd1.data(), x_in, p + o.input_norm, n, C, eps, off);
  q_forward(l, a.q.data(), p, a, n);
  proj_forward(l, LoraTarget::kK, kc + past * GD, a.xn1.data(), p + o.k, n, C, GD,
               at(p, o.k_bias));
  proj_forward(l, LoraTarget::kV, vc + past * GD, a.xn1.data(), p + o.v, n, C, GD,
               at(p, o.v_bias));
  if (cfg.qk_norm()) {  // in place (row by row), per head
    cpu::rmsnorm_forward(a.q.data(), static_cast<R*>(nullptr), a.q.data(), p + o.q_norm, n * H, D,
                       eps, off);
    cpu::rmsnorm_forward(kc + past * GD, static_cast<R*>(nullptr), kc + past * GD, p + o.k_norm,
                       n * G, D, eps, off);
  }
  const auto [cos, sin] = rope_of(l, past);  // positions past .. past + n - 1
  cpu::rope_forward(a.q.data(), cos, sin, 1, n, H, D, nullptr, cfg.rotary_dim());
  cpu::rope_forward(kc + past * GD, cos, sin, 1, n, G, D, nullptr, cfg.rotary_dim());
  scale_by(a.q.data(), n * H * D, cfg.query_scale());
  cpu::attention_decode(a.att.data(), decode_scores.data(), a.q.data(), kc, vc, n, past, H, G, D,
                      cfg.window(l), at(p, o.sinks), cfg.attn_logit_softcap);
  attn_out(l, p, a, x_in, n);
  mlp_forward(l, p, x_out, a, n);
}

// Block l backward: dres [N, C] holds dL/dx_out on entry and dL/dx_in on exit.
template <class R>
void Model<R>::Impl::block_backward(int l, const R* x_in, BlockActs<R>& a, int64_t B, int64_t T) {
  const int64_t N = B * T, C = cfg.hidden;
  const int64_t H = cfg.heads, G = cfg.kv_heads, D = cfg.head_dim();
  const int u = layout.block_unit(l);
  const R* p = params[static_cast<size_t>(u)];
  const BlockOffsets& o = layout.block_offsets(l);
  const auto g = [&](int64_t off) { return base_grad_or_null(u, off); };  // nullptr: frozen or absent
  const double off = cfg.norm_offset();
  const bool sandwich = cfg.sandwich_norms();
  // MLP half: x_out = x_mid + down(h) (or the experts' sum); the residual passes dres
  // through unchanged. First contributions to the scratch gradients WRITE (accumulate =
  // false), so no buffer needs zeroing.
  if (cfg.moe_layer(l)) {
    moe_backward(u, p, a, N);
  } else {
    dense_mlp_backward(l, u, p, a, N);
  }
  cpu::rmsnorm_backward(dres.data(), g(o.post_norm), dxn.data(), a.x_mid.data(), p + o.post_norm,
                      a.rstd2.data(), N, C, true, off);  // dres += (the residual branch)
  if (cfg.linear(l)) return linear_mixer_backward(l, u, p, a, x_in, B, T);
  // attention half: x_mid = x_in + o_proj(att) (sandwich: + norm(o_proj(att)))
  if (sandwich)
    cpu::rmsnorm_backward(dxn.data(), g(o.attn_out_norm), dres.data(), a.o_out.data(),
                          p + o.attn_out_norm, a.rstd_o.data(), N, C, false, off);
  const bool gated = cfg.output_gate();
  proj_backward(l, LoraTarget::kO, datt.data(), g(o.o), sandwich ? dxn.data() : dres.data(),
                gated ? a.att_g.data() : a.att.data(), p + o.o, N, H * D, C,
                /*accumulate_dx=*/false, g(o.o_bias));
  if (gated) output_gate_backward(datt.data(), dogate.data(), a.att.data(), a.ogate.data(), N * H * D);
  R* dsink = g(o.sinks);  // the kernel writes d sink: into dsink_, then added to the gradient
  if (dsink) dsink_.resize(static_cast<size_t>(H));
  cpu::attention_backward(dq.data(), dk.data(), dv.data(), attn_scratch.data(), datt.data(),
                        a.q.data(), a.k.data(), a.v.data(), a.probs.data(), B, T, H, G, D,
                        /*accumulate=*/false, dsink ? dsink_.data() : nullptr,
                        cfg.attn_logit_softcap);
  for (int64_t h = 0; dsink && h < H; ++h) dsink[h] += dsink_[static_cast<size_t>(h)];
  scale_by(dq.data(), N * H * D, cfg.query_scale());
  const auto [cos, sin] = rope_of(l);
  cpu::rope_backward(dq.data(), cos, sin, B, T, H, D, pos, cfg.rotary_dim());
  cpu::rope_backward(dk.data(), cos, sin, B, T, G, D, pos, cfg.rotary_dim());
  // q/k norm: back through it into datt (free once attention_backward has read it), q
  // first, then k (the q projection's backward has read datt by then).
  const bool qk_norm = cfg.qk_norm();
  if (qk_norm)
    cpu::rmsnorm_backward(datt.data(), g(o.q_norm), dq.data(), a.qr.data(), p + o.q_norm,
                        a.rstd_q.data(), N * H, D, /*accumulate_dx=*/false, off);
  const R* dqp = qk_norm ? datt.data() : dq.data();  // d q_proj's query half
  if (gated) join_query_gate(dqp, dogate.data(), dqg.data(), N * H, D);
  proj_backward(l, LoraTarget::kQ, dxn.data(), g(o.q), gated ? dqg.data() : dqp, a.xn1.data(),
                p + o.q, N, C, cfg.q_proj_dim(), /*accumulate_dx=*/false, g(o.q_bias));
  if (qk_norm)
    cpu::rmsnorm_backward(datt.data(), g(o.k_norm), dk.data(), a.kr.data(), p + o.k_norm,
                        a.rstd_k.data(), N * G, D, /*accumulate_dx=*/false, off);
  proj_backward(l, LoraTarget::kK, dxn.data(), g(o.k), qk_norm ? datt.data() : dk.data(),
                a.xn1.data(), p + o.k, N, C, G * D, true, g(o.k_bias));
  proj_backward(l, LoraTarget::kV, dxn.data(), g(o.v), dv.data(), a.xn1.data(), p + o.v, N,
                C, G * D, true, g(o.v_bias));
  cpu::rmsnorm_backward(dres.data(), g(o.input_norm), dxn.data(), x_in, p + o.input_norm,
                      a.rstd1.data(), N, C, true, off);  // dres += (the residual branch)
}

// The dense MLP's backward: dres [N, C] (dL/dx_out) -> dxn [N, C] written (dL/d a.xn2).
template <class R>
void Model<R>::Impl::dense_mlp_backward(int l, int u, const R* p, BlockActs<R>& a, int64_t N) {
  const int64_t C = cfg.hidden, I = cfg.intermediate;
  const BlockOffsets& o = layout.block_offsets(l);
  const auto g = [&](int64_t off) { return base_grad_or_null(u, off); };
  const bool sandwich = cfg.sandwich_norms();
  if (sandwich)  // x_out = x_mid + norm(down(h)): dxn = d down(h)
    cpu::rmsnorm_backward(dxn.data(), g(o.mlp_out_norm), dres.data(), a.down_out.data(),
                          p + o.mlp_out_norm, a.rstd_m.data(), N, C, false, cfg.norm_offset());
  proj_backward(l, LoraTarget::kDown, dh.data(), g(o.down), sandwich ? dxn.data() : dres.data(),
                a.h.data(), p + o.down, N, I, C, /*accumulate_dx=*/false);
  if (cfg.gelu_mlp())
    cpu::geglu_backward(dgate.data(), dup.data(), dh.data(), a.gate.data(), a.up.data(), N * I,
                        /*accumulate=*/false);
  else
    cpu::swiglu_backward(dgate.data(), dup.data(), dh.data(), a.gate.data(), a.up.data(), N * I,
                         /*accumulate=*/false);
  proj_backward(l, LoraTarget::kGate, dxn.data(), g(o.gate), dgate.data(), a.xn2.data(),
                p + o.gate, N, C, I, /*accumulate_dx=*/false);
  proj_backward(l, LoraTarget::kUp, dxn.data(), g(o.up), dup.data(), a.xn2.data(), p + o.up,
                N, C, I);
}

#define ZT_BLOCK_INSTANTIATE(R)                                                              \
  template void Model<R>::Impl::block_forward(int, const R*, R*, BlockActs<R>&, int64_t,       \
                                              int64_t);                                      \
  template void Model<R>::Impl::mlp_forward(int, const R*, R*, BlockActs<R>&, int64_t);        \
  template void Model<R>::Impl::q_forward(int, R*, const R*, BlockActs<R>&, int64_t);         \
  template void Model<R>::Impl::attn_out(int, const R*, BlockActs<R>&, const R*, int64_t);     \
  template void Model<R>::Impl::block_decode(int, const R*, R*, BlockActs<R>&, int64_t,        \
                                             int64_t, KvCache<R>&);                          \
  template void Model<R>::Impl::block_backward(int, const R*, BlockActs<R>&, int64_t, int64_t); \
  template void Model<R>::Impl::dense_mlp_backward(int, int, const R*, BlockActs<R>&, int64_t);
ZT_BLOCK_INSTANTIATE(float)
ZT_BLOCK_INSTANTIATE(double)
#undef ZT_BLOCK_INSTANTIATE

}  // namespace zt::model
