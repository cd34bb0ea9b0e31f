// One decoder block on the GPU, attention and MLP, forward and backward: the CUDA twin of
// the block in src/model/block.cpp, op for op, with the residual adds fused into the
// RMSNorms and attention keeping the log-sum-exp instead of the probabilities. The
// projections go through DeviceModel::Impl::proj_forward / proj_backward (their LoRA
// adapters and biases included). The model families' pieces (Qwen2's q/k/v biases,
// Qwen3's q/k norms, `attention_bias`, Gemma's block, gpt-oss's sinks) are read from the
// config as the CPU block reads them. The mixture-of-experts MLP (Mixtral's, Qwen's,
// gpt-oss's: Config::moe_layer(l); the other layers of qwen2_moe / qwen3_moe have this
// dense MLP) is in device_moe.cpp.
#include "device_model_impl.hpp"

namespace zt::model {

namespace {
// The tensor at offset off of a unit's buffer p, or nullptr when the block has none (-1).
template <class X>
X* at(X* p, int64_t off) {
  return off >= 0 && p ? p + off : nullptr;
}
}  // namespace

// Block l into the activations a. Its input x_l = base + pending (pending == nullptr
// when x_l is already in xs[l]: block 0, and recompute) is formed and normalised by one
// fused kernel and stored in xs[l]. Leaves x_mid in a.x_mid and, with_down, the down
// projection in `delta` (the recompute in the backward needs nothing after h, except
// Gemma's sandwich: the down projection's norm needs its input). The family's pieces as
// the CPU block (block.cpp): q/k/v biases (Config::qkv_bias), the o bias (o_bias), the
// per-head q/k RMSNorm before RoPE (qk_norm), head_dim D of the config; Gemma's (1 + w)
// norms (norm_offset), its sandwich norms on the attention's and the MLP's outputs
// (sandwich_norms), query_pre_attn_scalar (query_scale) and GeGLU (gelu_mlp); gpt-oss's
// attention sinks; Qwen3.5's output gate (q_forward, attn_o_input) and partial RoPE
// (Config::rotary_dim); the layer's window and RoPE from the per-layer schedule.
template <class T, class G>
void DeviceModel<T, G>::Impl::block_forward(int l, const T* base, const T* pending,
                                            detail::DeviceBlockActs<T>& a, int64_t B, int64_t Tn,
                                            bool with_down) {
  const int64_t N = B * Tn, C = cfg.hidden, I = cfg.intermediate;
  const T* p = params[static_cast<size_t>(layout.block_unit(l))];
  const BlockOffsets& o = layout.block_offsets(l);  // (dense layers among MoE ones differ)
  const bool sandwich = cfg.sandwich_norms();
  const double eps = cfg.norm_eps, off = cfg.norm_offset();
  T* x_in = x_at(l, N);
  kc::residual_rmsnorm_forward<T>(a.xn1.data(), a.rstd1.data(), x_in, base, pending,
                                  p + o.input_norm, N, C, eps, stream, off);
  if (cfg.linear(l))  // Qwen3.5's Gated DeltaNet instead of the attention (device_linear.cpp)
    linear_forward(l, p, a, B, Tn);
  else
    attn_forward(l, p, a, B, Tn);
  kc::residual_rmsnorm_forward<T>(a.xn2.data(), a.rstd2.data(), a.x_mid.data(), x_in, delta.data(),
                                  p + o.post_norm, N, C, eps, stream, off);
  if (cfg.moe_layer(l)) return moe_forward(l, p, a, N);  // (the recompute needs its y: all of it)
  proj_forward(l, LoraTarget::kGate, a.gate.data(), a.xn2.data(), p + o.gate, N, C, I);
  proj_forward(l, LoraTarget::kUp, a.up.data(), a.xn2.data(), p + o.up, N, C, I);
  if (cfg.gelu_mlp())
    kc::geglu_forward<T>(a.h.data(), a.gate.data(), a.up.data(), N * I, stream);
  else
    kc::swiglu_forward<T>(a.h.data(), a.gate.data(), a.up.data(), N * I, stream);
  if (!with_down && !sandwich) return;
  proj_forward(l, LoraTarget::kDown, sandwich ? a.down_out.data() : delta.data(), a.h.data(),
               p + o.down, N, I, C);
  if (sandwich)  // delta = norm(down(h)), the pending add
    kc::residual_rmsnorm_forward<T>(delta.data(), a.rstd_m.data(), nullptr, a.down_out.data(),
                                    nullptr, p + o.mlp_out_norm, N, C, eps, stream, off);
}

// The attention half: a.xn1 -> delta = o_proj(att) (sandwich: its norm).
template <class T, class G>
void DeviceModel<T, G>::Impl::attn_forward(int l, const T* p, detail::DeviceBlockActs<T>& a,
                                           int64_t B, int64_t Tn) {
  const int64_t N = B * Tn, C = cfg.hidden;
  const int64_t H = cfg.heads, Gk = cfg.kv_heads, D = cfg.head_dim();
  const BlockOffsets& o = layout.block_offsets(l);
  const bool qk_norm = cfg.qk_norm(), sandwich = cfg.sandwich_norms();
  const double eps = cfg.norm_eps, off = cfg.norm_offset();
  T* q = qk_norm ? a.qr.data() : a.q.data();  // [N, H*D] the projection before the q norm
  T* k = qk_norm ? a.kr.data() : a.k.data();  // [N, G*D]
  q_forward(l, q, p, a, N);
  proj_forward(l, LoraTarget::kK, k, a.xn1.data(), p + o.k, N, C, Gk * D, at(p, o.k_bias));
  proj_forward(l, LoraTarget::kV, a.v.data(), a.xn1.data(), p + o.v, N, C, Gk * D,
               at(p, o.v_bias));
  if (qk_norm) {  // per head: N*H (N*G) rows of D, weights [D]; a warp per row
    kc::head_rmsnorm_forward<T>(a.q.data(), a.rstd_q.data(), q, p + o.q_norm, N * H, D, eps,
                                stream, off);
    kc::head_rmsnorm_forward<T>(a.k.data(), a.rstd_k.data(), k, p + o.k_norm, N * Gk, D, eps,
                                stream, off);
  }
  const auto [cos, sin] = rope_of(l);  // the layer type's RoPE
  const int64_t R = cfg.rotary_dim();  // partial RoPE (Qwen3.5): the first R dims rotate
  kc::rope_forward<T>(a.q.data(), cos, sin, B, Tn, H, D, stream, pos_d, R);
  kc::rope_forward<T>(a.k.data(), cos, sin, B, Tn, Gk, D, stream, pos_d, R);
  scale_by(a.q.data(), N * H * D, cfg.query_scale());
  kc::attention_forward<T>(a.att.data(), a.lse.data(), a.q.data(), a.k.data(), a.v.data(), B, Tn, H,
                           Gk, D, stream, pos_d, cfg.window(l), at(p, o.sinks),
                           cfg.attn_logit_softcap);
  // delta = o_proj(att), x_mid = x_in + delta (sandwich: delta = norm(o_proj(att)), o_proj's
  // output kept; Qwen3.5: o_proj(att * sigmoid(gate)))
  proj_forward(l, LoraTarget::kO, sandwich ? a.o_out.data() : delta.data(), attn_o_input(a, N),
               p + o.o, N, H * D, C, at(p, o.o_bias));
  if (sandwich)
    kc::residual_rmsnorm_forward<T>(delta.data(), a.rstd_o.data(), nullptr, a.o_out.data(),
                                    nullptr, p + o.attn_out_norm, N, C, eps, stream, off);
}

// Block l backward: dres [N, C] holds dL/dx_{l+1} on entry and dL/dx_l on exit.
template <class T, class G>
void DeviceModel<T, G>::Impl::block_backward(int l, detail::DeviceBlockActs<T>& a, int64_t B,
                                             int64_t Tn) {
  const int64_t N = B * Tn, C = cfg.hidden, I = cfg.intermediate;
  const int u = layout.block_unit(l);
  const T* p = params[static_cast<size_t>(u)];
  // nullptr: frozen (LoRA) or absent (a bias or norm the family does not have)
  const auto g = [&](int64_t off) { return off < 0 ? nullptr : base_grad(u, off); };
  const BlockOffsets& o = layout.block_offsets(l);  // (dense layers among MoE ones differ)
  const T* x_in = x_at(l, N);
  const double off = cfg.norm_offset();
  const bool sandwich = cfg.sandwich_norms();
  // MLP half: x_{l+1} = x_mid + down(h) (or the experts' sum; sandwich: + norm(down(h)));
  // dres passes through the residual unchanged; dxn [N, C] written: dL/d xn2.
  if (cfg.moe_layer(l)) {
    moe_backward(l, u, p, a, N);
  } else {
    if (sandwich)  // dxn = d down(h) (free until the gate's backward writes it)
      kc::rmsnorm_backward<T, G>(dxn.data(), g(o.mlp_out_norm), dres.data(), a.down_out.data(),
                                 p + o.mlp_out_norm, a.rstd_m.data(), N, C,
                                 /*accumulate_dx=*/false, stream, off);
    proj_backward(l, LoraTarget::kDown, dh.data(), g(o.down), sandwich ? dxn.data() : dres.data(),
                  a.h.data(), p + o.down, N, I, C, /*accumulate_dx=*/false);
    if (cfg.gelu_mlp())
      kc::geglu_backward<T>(dgate.data(), dup.data(), dh.data(), a.gate.data(), a.up.data(), N * I,
                            /*accumulate=*/false, stream);
    else
      kc::swiglu_backward<T>(dgate.data(), dup.data(), dh.data(), a.gate.data(), a.up.data(),
                             N * I, /*accumulate=*/false, stream);
    proj_backward(l, LoraTarget::kGate, dxn.data(), g(o.gate), dgate.data(), a.xn2.data(),
                  p + o.gate, N, C, I, /*accumulate_dx=*/false);
    proj_backward(l, LoraTarget::kUp, dxn.data(), g(o.up), dup.data(), a.xn2.data(), p + o.up, N,
                  C, I, /*accumulate_dx=*/true);
  }
  kc::rmsnorm_backward<T, G>(dres.data(), g(o.post_norm), dxn.data(), a.x_mid.data(),
                             p + o.post_norm, a.rstd2.data(), N, C, /*accumulate_dx=*/true, stream,
                             off);
  if (cfg.linear(l))  // dres -> dxn: dL/d a.xn1
    linear_backward(l, u, p, a, B, Tn);
  else
    attn_backward(l, u, p, a, B, Tn);
  kc::rmsnorm_backward<T, G>(dres.data(), g(o.input_norm), dxn.data(), x_in, p + o.input_norm,
                             a.rstd1.data(), N, C, /*accumulate_dx=*/true, stream, off);
}

// The attention half's backward: dres (dL/d x_mid) -> dxn written (dL/d a.xn1).
template <class T, class G>
void DeviceModel<T, G>::Impl::attn_backward(int l, int u, const T* p,
                                            detail::DeviceBlockActs<T>& a, int64_t B,
                                            int64_t Tn) {
  const int64_t N = B * Tn, C = cfg.hidden;
  const int64_t H = cfg.heads, Gk = cfg.kv_heads, D = cfg.head_dim();
  const auto g = [&](int64_t off) { return off < 0 ? nullptr : base_grad(u, off); };
  const BlockOffsets& o = layout.block_offsets(l);
  const double off = cfg.norm_offset();
  const bool sandwich = cfg.sandwich_norms();
  // attention half: x_mid = x_in + o_proj(att) (+ o bias; sandwich: its norm in between)
  if (sandwich)  // dxn = d o_proj(att) (its reader, the norm above, has run: stream order)
    kc::rmsnorm_backward<T, G>(dxn.data(), g(o.attn_out_norm), dres.data(), a.o_out.data(),
                               p + o.attn_out_norm, a.rstd_o.data(), N, C,
                               /*accumulate_dx=*/false, stream, off);
  const bool gated = cfg.output_gate();  // o_proj's input remade into qgate
  proj_backward(l, LoraTarget::kO, datt.data(), g(o.o), sandwich ? dxn.data() : dres.data(),
                attn_o_input(a, N), p + o.o, N, H * D, C, /*accumulate_dx=*/false, g(o.o_bias));
  if (gated)  // datt: d att; the gate's gradient into the gate halves of qgate [N*H, 2D]
    kc::output_gate_backward<T>(datt.data(), qgate.data() + D, a.att.data(), a.ogate.data(), N * H,
                                D, 2 * D, stream);
  // gpt-oss's sinks: d sinks [H] written to dsink_f, then added to the gradient (as T)
  G* gsink = g(o.sinks);
  kc::attention_backward<T>(dq.data(), dk.data(), dv.data(), attn_delta.data(), datt.data(),
                            a.att.data(), a.q.data(), a.k.data(), a.v.data(), a.lse.data(), B, Tn,
                            H, Gk, D, /*accumulate=*/false, stream, pos_d, cfg.window(l),
                            at(p, o.sinks), gsink ? dsink_f.data() : nullptr,
                            cfg.attn_logit_softcap);
  if (gsink) {
    kc::convert<float, T>(dsink_t.data(), dsink_f.data(), H, stream);
    kc::bias_backward<T, G>(gsink, dsink_t.data(), 1, H, stream);  // gsink += the one row
  }
  scale_by(dq.data(), N * H * D, cfg.query_scale());
  const auto [cos, sin] = rope_of(l);
  const int64_t R = cfg.rotary_dim();
  kc::rope_backward<T>(dq.data(), cos, sin, B, Tn, H, D, stream, pos_d, R);
  kc::rope_backward<T>(dk.data(), cos, sin, B, Tn, Gk, D, stream, pos_d, R);
  // q/k norm: back through it into datt [N, H*D] (free once attention_backward has read
  // it, stream-ordered), q first, then k (q_proj's backward has read datt by then); as
  // the CPU block.
  const bool qk_norm = cfg.qk_norm();
  if (qk_norm)  // dx written; dw in kHeadNormChunks row chunks (norm_partial)
    kc::head_rmsnorm_backward<T, G>(datt.data(), g(o.q_norm), dq.data(), a.qr.data(),
                                    p + o.q_norm, a.rstd_q.data(), N * H, D,
                                    norm_partial.data(), stream, off);
  const T* dqp = qk_norm ? datt.data() : dq.data();  // d q_proj's query half
  if (gated) copy_rows(qgate.data(), 2 * D, dqp, D, D, N * H);  // [d query | d gate]
  proj_backward(l, LoraTarget::kQ, dxn.data(), g(o.q), gated ? qgate.data() : dqp, a.xn1.data(),
                p + o.q, N, C, cfg.q_proj_dim(), /*accumulate_dx=*/false, g(o.q_bias));
  if (qk_norm)
    kc::head_rmsnorm_backward<T, G>(datt.data(), g(o.k_norm), dk.data(), a.kr.data(),
                                    p + o.k_norm, a.rstd_k.data(), N * Gk, D,
                                    norm_partial.data(), stream, off);
  proj_backward(l, LoraTarget::kK, dxn.data(), g(o.k), qk_norm ? datt.data() : dk.data(),
                a.xn1.data(), p + o.k, N, C, Gk * D, /*accumulate_dx=*/true, g(o.k_bias));
  proj_backward(l, LoraTarget::kV, dxn.data(), g(o.v), dv.data(), a.xn1.data(), p + o.v, N, C,
                Gk * D, /*accumulate_dx=*/true, g(o.v_bias));
}

template <class T, class G>
void DeviceModel<T, G>::Impl::q_forward(int l, T* q, const T* p, detail::DeviceBlockActs<T>& a,
                                        int64_t N) {
  const int64_t C = cfg.hidden, H = cfg.heads, D = cfg.head_dim();
  const BlockOffsets& o = layout.block_offsets(l);
  if (!cfg.output_gate())
    return proj_forward(l, LoraTarget::kQ, q, a.xn1.data(), p + o.q, N, C, H * D,
                        at(p, o.q_bias));
  proj_forward(l, LoraTarget::kQ, qgate.data(), a.xn1.data(), p + o.q, N, C, 2 * H * D,
               at(p, o.q_bias));
  copy_rows(q, D, qgate.data(), 2 * D, D, N * H);
  copy_rows(a.ogate.data(), D, qgate.data() + D, 2 * D, D, N * H);
}

template <class T, class G>
const T* DeviceModel<T, G>::Impl::attn_o_input(detail::DeviceBlockActs<T>& a, int64_t N) {
  if (!cfg.output_gate()) return a.att.data();
  kc::output_gate_forward<T>(qgate.data(), a.att.data(), a.ogate.data(), N * cfg.heads,
                             cfg.head_dim(), stream);
  return qgate.data();
}

#define ZT_DEVICE_BLOCK_INSTANTIATE(T, G)                                                          \
  template void DeviceModel<T, G>::Impl::block_forward(                                            \
      int, const T*, const T*, detail::DeviceBlockActs<T>&, int64_t, int64_t, bool);               \
  template void DeviceModel<T, G>::Impl::attn_forward(int, const T*, detail::DeviceBlockActs<T>&,  \
                                                      int64_t, int64_t);                           \
  template void DeviceModel<T, G>::Impl::attn_backward(                                            \
      int, int, const T*, detail::DeviceBlockActs<T>&, int64_t, int64_t);                          \
  template void DeviceModel<T, G>::Impl::q_forward(int, T*, const T*, detail::DeviceBlockActs<T>&, \
                                                   int64_t);                                       \
  template const T* DeviceModel<T, G>::Impl::attn_o_input(detail::DeviceBlockActs<T>&, int64_t);   \
  template void DeviceModel<T, G>::Impl::block_backward(int, detail::DeviceBlockActs<T>&, int64_t, \
                                                        int64_t);
ZT_DEVICE_BLOCK_INSTANTIATE(float, float)
ZT_DEVICE_BLOCK_INSTANTIATE(kc::bf16_t, float)
ZT_DEVICE_BLOCK_INSTANTIATE(kc::bf16_t, kc::bf16_t)
#undef ZT_DEVICE_BLOCK_INSTANTIATE

}  // namespace zt::model
