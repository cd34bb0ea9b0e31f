#pragma once
// The CPU model's workspace sizes (src/model/model_impl.hpp, model.cpp): the element count
// of every activation buffer a block keeps and of the backward's scratch, for B x T, so
// Model sizes its buffers from here and `zt estimate --device cpu` counts the same (one
// formula). A block holds only what its layer's kind uses: a Gated DeltaNet layer
// (Config::linear(l)) has no attention buffers and no B x H x T x T probabilities, so its
// memory grows linearly with T.
#include <cstdint>

#include "zt/kernels/attention.hpp"
#include "zt/model/config.hpp"

namespace zt::model {

// A Gated DeltaNet mixer's activations for N rows (LinearActs; the backward's gradients of
// them have the same sizes). Cc = 2 Hk Dk + Hv Dv, KD = Hk Dk, VD = Hv Dv:
//   conv  [N, Cc]  qkv_pre, qkv      in_proj_qkv's output; silu(conv1d(.))
//   key   [N, KD]  q, k              the conv's q and k channels
//   value [N, VD]  v, z, out, y      v; in_proj_z's output; the rule's; the gated norm's
//   head  [N, Hv]  a, beta, g, rstd  in_proj_a's output; sigmoid(b); the decay; the norm's 1/rms
// The chunked rule's backward keeps nothing between the forward and the backward: it
// recomputes its chunk-start states [B, Hv, T/64, Dk, Dv] inside the call (transient).
struct LinearActSizes {
  int64_t conv = 0, key = 0, value = 0, head = 0;

  static LinearActSizes of(const Config& c, int64_t N) {
    return {N * c.linear_conv_dim(), N * c.linear_key_heads * c.linear_key_dim,
            N * c.linear_value_heads * c.linear_value_dim, N * c.linear_value_heads};
  }
  int64_t elements() const { return 2 * conv + 2 * key + 4 * value + 4 * head; }
};

// One block's activations kept from its forward for its backward (BlockActs), elements.
// layer >= 0: that layer's kind only (the blocks kept without recompute); layer < 0: every
// kind the model has (the block the layers share: eval, recompute, decode). routed: the
// routed experts' rows (false under expert parallelism, whose layers keep their own).
struct CpuBlockSizes {
  LinearActSizes lin;                          // a Gated DeltaNet layer's mixer
  int64_t xn1 = 0, rstd1 = 0, x_mid = 0, xn2 = 0, rstd2 = 0;  // every layer: [N,C] [N] [N,C] [N,C] [N]
  // An attention layer's: q, att [N,HD]; k, v [N,GD]; probs [B,H,T,T] (the softmax);
  // with the q/k norm qr [N,HD], kr [N,GD], rstd_q [N*H], rstd_k [N*G]; with the output
  // gate (Qwen3.5) qg [N,2HD], ogate, att_g [N,HD]; Gemma's sandwich o_out [N,C], rstd_o [N].
  int64_t q = 0, k = 0, v = 0, probs = 0, att = 0;
  int64_t qr = 0, kr = 0, rstd_q = 0, rstd_k = 0, qg = 0, ogate = 0, att_g = 0;
  int64_t o_out = 0, rstd_o = 0;
  // The dense MLP's: gate, up, h [N,I] (Gemma's sandwich: down_out [N,C], rstd_m [N]).
  int64_t gate = 0, up = 0, h = 0, down_out = 0, rstd_m = 0;
  // A MoE layer's (E experts of width I_e, k per token): rprobs [N,E], ridx (int32), rw
  // [N,k], mgu [N k, 2 I_e], mh [N k, I_e], my [N k, C]; the shared expert's (S wide)
  // sgate, sup, sh [N,S], sy [N,C], sg [N].
  int64_t rprobs = 0, ridx = 0, rw = 0, mgu = 0, mh = 0, my = 0;
  int64_t sgate = 0, sup = 0, sh = 0, sy = 0, sg = 0;

  static CpuBlockSizes of(const Config& c, int64_t B, int64_t T, int64_t layer = -1,
                          bool routed = true) {
    const int64_t N = B * T, C = c.hidden, HD = c.q_dim(), GD = c.kv_dim();
    const bool linear = layer < 0 ? c.linear_layers() : c.linear(layer);
    const bool attention = layer < 0 ? c.attention_layers() : !c.linear(layer);
    const bool moe = layer < 0 ? c.moe() : c.moe_layer(layer);
    const bool dense = layer < 0 ? !c.moe() || c.dense_layers() : !c.moe_layer(layer);
    CpuBlockSizes z;
    z.xn1 = z.x_mid = z.xn2 = N * C;
    z.rstd1 = z.rstd2 = N;
    if (linear) z.lin = LinearActSizes::of(c, N);
    if (attention) {
      z.q = z.att = N * HD;
      z.k = z.v = N * GD;
      z.probs = B * c.heads * T * T;
      if (c.qk_norm()) {
        z.qr = N * HD;
        z.kr = N * GD;
        z.rstd_q = N * c.heads;
        z.rstd_k = N * c.kv_heads;
      }
      if (c.output_gate()) {
        z.qg = 2 * N * HD;
        z.ogate = z.att_g = N * HD;
      }
      if (c.sandwich_norms()) {
        z.o_out = N * C;
        z.rstd_o = N;
      }
    }
    if (dense) {
      z.gate = z.up = z.h = N * c.intermediate;
      if (c.sandwich_norms()) {
        z.down_out = N * C;
        z.rstd_m = N;
      }
    }
    if (moe && routed) {
      const int64_t K = c.experts_per_token, IE = c.expert_width();
      z.rprobs = N * c.experts;
      z.ridx = z.rw = N * K;
      z.mgu = N * K * 2 * IE;
      z.mh = N * K * IE;
      z.my = N * K * C;
    }
    if (moe && c.shared_expert()) {
      z.sgate = z.sup = z.sh = N * c.shared_expert_intermediate;
      z.sy = N * C;
      z.sg = N;
    }
    return z;
  }
  // Bytes with `elem` bytes per element of the compute type (ridx: int32).
  uint64_t bytes(uint64_t elem) const {
    const int64_t n = lin.elements() + xn1 + rstd1 + x_mid + xn2 + rstd2 + q + k + v + probs +
                      att + qr + kr + rstd_q + rstd_k + qg + ogate + att_g + o_out + rstd_o +
                      gate + up + h + down_out + rstd_m + rprobs + rw + mgu + mh + my + sgate +
                      sup + sh + sy + sg;
    return elem * static_cast<uint64_t>(n) + sizeof(int32_t) * static_cast<uint64_t>(ridx);
  }
};

// The backward's scratch (Model::Impl::ensure with backward), elements: dres, dxn [N,C];
// an attention layer's datt, dq [N,HD], dk, dv [N,GD], dogate [N,HD] and dqg [N,2HD] (the
// output gate) and the attention backward's scratch (threads x T x T: none without
// attention layers); dlin (a Gated DeltaNet mixer's gradients, LinearActSizes); dh, dgate,
// dup [N,W] (W: the dense MLP's I, or the shared expert's S when wider); dshared [N,C] and
// dshared_gate [N] (the shared expert).
struct CpuScratchSizes {
  int64_t rows_c = 0, hd = 0, gd = 0, dogate = 0, dqg = 0, attn = 0, width = 0;
  int64_t dshared = 0, dshared_gate = 0;
  LinearActSizes dlin;

  static CpuScratchSizes of(const Config& c, int64_t B, int64_t T, int threads) {
    const int64_t N = B * T;
    CpuScratchSizes z;
    z.rows_c = N * c.hidden;
    if (c.attention_layers()) {
      z.hd = N * c.q_dim();
      z.gd = N * c.kv_dim();
      if (c.output_gate()) {
        z.dogate = N * c.q_dim();
        z.dqg = 2 * N * c.q_dim();
      }
      z.attn = kernels::cpu::attention_backward_scratch(T, threads);
    }
    if (c.linear_layers()) z.dlin = LinearActSizes::of(c, N);
    const int64_t I = c.dense_layers() ? c.intermediate : 0;
    z.width = N * (I > c.shared_expert_intermediate ? I : c.shared_expert_intermediate);
    if (c.shared_expert()) {
      z.dshared = N * c.hidden;
      z.dshared_gate = N;
    }
    return z;
  }
  int64_t elements() const {
    return 2 * rows_c + 2 * hd + 2 * gd + dogate + dqg + attn + 3 * width + dshared +
           dshared_gate + dlin.elements();
  }
};

}  // namespace zt::model
