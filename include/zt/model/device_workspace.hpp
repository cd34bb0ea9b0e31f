#pragma once
// The GPU model's workspace sizes (src/model/cuda/device_model_impl.hpp), without CUDA: the
// element count of every buffer DeviceModel allocates for N = B*T rows, so the device
// model sizes its buffers from here and `zt estimate` counts the same bytes (one
// formula). Flash attention keeps the log-sum-exp [B, H, T], no T x T probabilities.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "zt/model/config.hpp"
#include "zt/model/lora.hpp"

namespace zt::model {

// The width of the SwiGLU buffers (gate, up, h, and the backward's dh, dgate, dup) of
// layer l (l < 0: the largest over the layers, for the buffers every layer shares): the
// dense MLP's `intermediate` where the layer is dense, the shared expert's S in a MoE layer
// of qwen2_moe (its SwiGLU runs in the same buffers), 0 in a MoE layer without one.
inline size_t device_swiglu_width(const Config& c, int64_t l = -1) {
  const bool moe = l < 0 ? c.moe() : c.moe_layer(l);
  const bool dense = l < 0 ? !c.moe() || c.dense_layers() : !c.moe_layer(l);
  const int64_t shared = moe && c.shared_expert() ? c.shared_expert_intermediate : 0;
  return static_cast<size_t>(std::max<int64_t>(dense ? c.intermediate : 0, shared));
}

// The Gated DeltaNet rule's chunk (kernels::cuda::kDeltaChunk; device_linear.cpp
// static_asserts they are equal) and its chunk rows: B sequences of T tokens hold
// B ceil(T / 64) chunks, each with a start state [Hv, Dk, Dv] kept for the backward.
inline constexpr int64_t kDeltaChunkTokens = 64;
inline int64_t delta_chunk_rows(int64_t B, int64_t T) {
  return B * ((T + kDeltaChunkTokens - 1) / kDeltaChunkTokens);
}

// Whether layer l (l < 0: any layer) is an attention layer / a Gated DeltaNet layer.
inline bool device_attention_layer(const Config& c, int64_t l) {
  if (l >= 0) return !c.linear(l);
  for (int64_t i = 0; i < c.layers; ++i)
    if (!c.linear(i)) return true;
  return false;
}
inline bool device_linear_layer(const Config& c, int64_t l) {
  return l >= 0 ? c.linear(l) : c.linear_layers();
}

// One block's activations kept from its forward for its backward (DeviceBlockActs).
// "T": the compute dtype (bf16 or fp32); "f32": fp32 whatever the compute dtype.
// layer >= 0: that layer's own (the blocks kept without recompute); layer < 0: every kind
// of MLP and mixer the model has (the block the layers share: eval, recompute). Mixtral's
// layers and Llama's are all alike; qwen2_moe / qwen3_moe may mix dense layers among MoE
// ones, Qwen3.5 Gated DeltaNet layers among attention ones (an attention layer keeps no
// Gated DeltaNet buffers, a Gated DeltaNet layer none of the attention's). Q: the rule's
// chunk rows (delta_chunk_rows; < 0: one sequence of N tokens).
struct DeviceBlockSizes {
  size_t xn1, q, k, v, att, x_mid, xn2, gate, up, h;  // T: [N,C] [N,HD] [N,GD] x2 [N,HD] [N,C] x2 [N,W] x3
  size_t rstd1, lse, rstd2;                           // f32: [N] [N*H] [N]
  // The q/k norm (Config::qk_norm, Qwen3; 0 otherwise): the projections before the norm,
  // T [N,HD] [N,GD], and its 1/rms per head row, f32 [N*H] [N*G].
  size_t qr = 0, kr = 0, rstd_q = 0, rstd_k = 0;
  // Mixture of experts (a MoE layer; E experts of width I_e = Config::expert_width(), k per
  // token, S = N k routed rows; kernels::cuda::MoeActs and the router's choice):
  //   f32 rprobs [N,E], rw [N,k]; int32 ridx [N,k], perm [S], pos [S];
  //   T xp [S,C], mg [S,I_e], mu [S,I_e], mh [S,I_e], my [S,C]
  size_t rprobs = 0, rw = 0, ridx = 0, perm = 0, pos = 0;
  size_t xp = 0, mg = 0, mu = 0, mh = 0, my = 0;
  // qwen2_moe's shared expert (a MoE layer with Config::shared_expert(); its gate, up and h
  // [N,S] are gate, up, h above, W >= S): T sy [N,C] its output before the gate, f32 sg [N]
  // sigmoid(shared_expert_gate . xn2).
  size_t sy = 0, sg = 0;
  // Gemma's sandwich (Config::sandwich_norms): the inputs of the attention's and the MLP's
  // output norms, T o_out [N,C] (o_proj's output) and down_out [N,C], and their 1/rms, f32
  // rstd_o [N], rstd_m [N].
  size_t o_out = 0, down_out = 0, rstd_o = 0, rstd_m = 0;
  // Qwen3.5's output gate (Config::output_gate): the gate half of q_proj's output, T [N,HD]
  // (the attention's output times its sigmoid is o_proj's input, remade in the backward).
  size_t ogate = 0;
  // Qwen3.5's Gated DeltaNet mixer (device_linear.cpp; Cc = 2 Hk Dk + Hv Dv conv channels,
  // KD = Hk Dk, VD = Hv Dv, Q chunk rows):
  //   T lqkv [N,Cc] in_proj_qkv's output (the conv's input); lq, lk [N,KD], lv [N,VD] the
  //   conv's q | k | v; lz [N,VD] in_proj_z's; la [N,Hv] in_proj_a's; lout [N,VD] the
  //   rule's output; ly [N,VD] the gated norm's (out_proj's input)
  //   f32 lg, lbeta [N,Hv] the log decay and beta; lrstd [N*Hv] the gated norm's 1/rms;
  //   lstarts [Q*Hv*Dk*Dv] the state at each chunk's start
  size_t lqkv = 0, lq = 0, lk = 0, lv = 0, lz = 0, la = 0, lout = 0, ly = 0;
  size_t lg = 0, lbeta = 0, lrstd = 0, lstarts = 0;

  static DeviceBlockSizes of(const Config& c, int64_t N, int64_t layer = -1, int64_t Q = -1) {
    const size_t n = static_cast<size_t>(N), C = static_cast<size_t>(c.hidden);
    const size_t W = n * device_swiglu_width(c, layer);
    const bool attn = device_attention_layer(c, layer);
    const size_t HD = attn ? static_cast<size_t>(c.heads * c.head_dim()) : 0;
    const size_t GD = attn ? static_cast<size_t>(c.kv_dim()) : 0;
    DeviceBlockSizes z{n * C, n * HD, n * GD, n * GD, n * HD, n * C, n * C, W, W, W,
                       n,     attn ? n * static_cast<size_t>(c.heads) : 0, n};
    if (device_linear_layer(c, layer)) {
      const size_t Hv = static_cast<size_t>(c.linear_value_heads);
      const size_t KD = static_cast<size_t>(c.linear_key_heads * c.linear_key_dim);
      const size_t VD = Hv * static_cast<size_t>(c.linear_value_dim);
      const size_t chunks = static_cast<size_t>(Q < 0 ? delta_chunk_rows(1, N) : Q);
      z.lqkv = n * static_cast<size_t>(c.linear_conv_dim());
      z.lq = z.lk = n * KD;
      z.lv = z.lz = z.lout = z.ly = n * VD;
      z.la = z.lg = z.lbeta = z.lrstd = n * Hv;
      z.lstarts = chunks * Hv * static_cast<size_t>(c.linear_key_dim * c.linear_value_dim);
    }
    if (!attn) return with_mlp(z, c, n, layer);  // (Gemma's sandwich has no such layers)
    if (c.qk_norm()) {
      z.qr = n * HD;
      z.kr = n * GD;
      z.rstd_q = n * static_cast<size_t>(c.heads);
      z.rstd_k = n * static_cast<size_t>(c.kv_heads);
    }
    if (c.sandwich_norms()) {
      z.o_out = z.down_out = n * C;
      z.rstd_o = z.rstd_m = n;
    }
    if (c.output_gate()) z.ogate = n * HD;
    return with_mlp(z, c, n, layer);
  }
  // The MLP's share: the mixture of experts' (a MoE layer), the dense MLP's is W above.
  static DeviceBlockSizes with_mlp(DeviceBlockSizes z, const Config& c, size_t n, int64_t layer) {
    const size_t C = static_cast<size_t>(c.hidden);
    if (layer < 0 ? c.moe() : c.moe_layer(layer)) {
      const size_t E = static_cast<size_t>(c.experts), I = static_cast<size_t>(c.expert_width());
      const size_t S = n * static_cast<size_t>(c.experts_per_token);
      z.rprobs = n * E;
      z.rw = z.ridx = z.perm = z.pos = S;
      z.xp = z.my = S * C;
      z.mg = z.mu = z.mh = S * I;
      if (c.shared_expert()) {
        z.sy = n * C;
        z.sg = n;
      }
    }
    return z;
  }
  uint64_t bytes(size_t elem) const {
    return elem * (xn1 + q + k + v + att + x_mid + xn2 + gate + up + h + qr + kr + xp + mg + mu +
                   mh + my + sy + o_out + down_out + ogate + lqkv + lq + lk + lv + lz + la +
                   lout + ly) +
           sizeof(float) * (rstd1 + lse + rstd2 + rstd_q + rstd_k + rprobs + rw + sg + rstd_o +
                            rstd_m + lg + lbeta + lrstd + lstarts) +
           sizeof(int32_t) * (ridx + perm + pos);
  }
};

// The mixture-of-experts part of the workspace (DeviceModel::Impl::ensure; 0 without
// experts): E experts of width I_e, k per token, S = N k routed rows.
//   rlogits   T [N,E]      the router's logits, then their gradient
//   rows      T [S,C]      the experts' backward scratch: permuted dy, then dx (then the
//                          shared expert's d y [N,C], qwen2_moe)
//   dh        T [S,I_e]    the experts' backward scratch: permuted dh
//   dw        f32 [S]      d loss / d routing weight (then the shared expert's d gate
//                          logit [N], qwen2_moe)
//   dprob     f32 [E]      d (coef aux) / d p of every row (router_aux_loss)
//   sums      f64 [2E]     the pass's tokens and probability sums per expert
//   plan      int32 [(S + 255) / 256 * E + E + 1]  kernels::cuda::moe_plan's scratch
//                          (device_moe.cpp checks it against moe_plan_scratch)
// Pinned host memory beside it (not device memory, not counted): the plan's expert ranges
// int32 [E + 1], the probability sums f64 [E] and dprob f32 [E].
struct DeviceMoeSizes {
  static constexpr size_t kPlanBlock = 256;  // slots per block of the plan kernels
  size_t rlogits = 0, rows = 0, dh = 0, dw = 0, dprob = 0, sums = 0, plan = 0;

  static DeviceMoeSizes of(const Config& c, int64_t N) {
    if (!c.moe()) return {};
    const size_t n = static_cast<size_t>(N), E = static_cast<size_t>(c.experts);
    const size_t S = n * static_cast<size_t>(c.experts_per_token);
    return {n * E,
            S * static_cast<size_t>(c.hidden),
            S * static_cast<size_t>(c.expert_width()),
            S,
            E,
            2 * E,
            (S + kPlanBlock - 1) / kPlanBlock * E + E + 1};
  }
  uint64_t bytes(size_t elem) const {
    return elem * (rlogits + rows + dh) + sizeof(float) * (dw + dprob) + sizeof(double) * sums +
           sizeof(int32_t) * plan;
  }
};

// The Gated DeltaNet layers' shared scratch (device_linear.cpp; none without them), Cc, KD,
// VD as in DeviceBlockSizes, Q chunk rows:
//   rows     T [N,Cc] x2   the conv's output (then d q | d k | d v joined), the conv's d input
//   vd       T [N,VD] x3   d out_proj's input (then the rule's d v), the rule's d output, d z
//   kd       T [N,KD] x2   the rule's d q, d k
//   hv       T [N,Hv] x2   d in_proj_a's and d in_proj_b's outputs (in the forward, b's output)
//   gates    f32 [N,Hv] x2 d g, d beta
//   partial  f32 [kDeltaPartials * max(Cc K, 2 Hv, Dv)] the parameter gradients' row chunks
//   rule     f32 [2 N Hv Dk + min(Q Hv, 132) (3 Dk Dv + 384 (Dk + Dv))] the rule's backward
//            scratch with the chunk starts kept: d q and d k per value head, and a workspace
//            per block of at most 132 (one per sequence and value head; Q >= B bounds them);
//            device_linear.cpp checks it against kernels::cuda::gated_delta_backward_scratch
struct DeviceLinearSizes {
  static constexpr size_t kPartials = 64;  // kernels::cuda::kDeltaPartials (static_asserted)
  static constexpr size_t kRuleBlocks = 132;  // the rule's backward's most blocks
  size_t rows = 0, vd = 0, kd = 0, hv = 0, gates = 0, partial = 0, rule = 0;

  static DeviceLinearSizes of(const Config& c, int64_t N, int64_t Q) {
    if (!c.linear_layers()) return {};
    const size_t n = static_cast<size_t>(N), Hv = static_cast<size_t>(c.linear_value_heads);
    const size_t Cc = static_cast<size_t>(c.linear_conv_dim());
    const size_t Dk = static_cast<size_t>(c.linear_key_dim);
    const size_t Dv = static_cast<size_t>(c.linear_value_dim);
    const size_t K = static_cast<size_t>(c.linear_conv_kernel);
    const size_t KD = static_cast<size_t>(c.linear_key_heads) * Dk;
    const size_t blocks = std::min(static_cast<size_t>(Q) * Hv, kRuleBlocks);
    return {n * Cc, n * Hv * Dv, n * KD, n * Hv, n * Hv,
            kPartials * std::max({Cc * K, 2 * Hv, Dv}),
            2 * n * Hv * Dk + blocks * (3 * Dk * Dv + 6 * 64 * (Dk + Dv))};
  }
  uint64_t bytes(size_t elem) const {
    return elem * (2 * rows + 3 * vd + 2 * kd + 2 * hv) + sizeof(float) * (2 * gates + partial + rule);
  }
};

// Every other buffer of the workspace for N rows (DeviceModel::Impl::ensure), the RoPE
// tables and the cross-entropy totals.
struct DeviceWorkspaceSizes {
  // One kernels::cuda::CrossEntropyTotals (double + 2 long long); device_model.cpp
  // static_asserts the size. A preference objective (DeviceModel::set_row_objective,
  // row_logps) grows it to one per batch row, two with context targets (ORPO's
  // orpo.nll = sequence): 24 (B - 1) or 24 (2B - 1) bytes more, not counted here.
  static constexpr size_t kTotalsBytes = 24;
  // Row chunks of the q/k norm's weight gradient (kernels::cuda::kHeadNormChunks;
  // device_model.cpp static_asserts they are equal).
  static constexpr size_t kHeadNormChunks = 64;
  size_t rope;                  // f32 [context, R/2], each of cos and sin (R = rotary_dim)
  size_t xs;                    // T [L+1, N, C]
  size_t rows_c;                // T [N, C]: each of delta, xf, dres, dxn
  size_t logits;                // T [N, V]
  size_t hd, gd, ni;            // T [N, H*D]: datt, dq; [N, G*D]: dk, dv; [N, W]: dh, dgate, dup (device_swiglu_width)
  size_t rows;                  // f32 [N]: rstd_f, row_loss; int32 [N]: tokens, targets, context, positions
  size_t heads_rows;            // f32 [N*H]: attn_delta
  size_t norm_partial;          // f32 [kHeadNormChunks * D]: the q/k norm's dw partials (qk_norm)
  DeviceBlockSizes block;       // the block the layers share (every kind of MLP the model has)
  DeviceMoeSizes moe;           // the mixture of experts' buffers (none without experts)
  DeviceLinearSizes linear;     // the Gated DeltaNet layers' scratch (none without them)
  int64_t chunk_rows = 0;       // Q: the rule's chunk rows (delta_chunk_rows)
  // The model families' extras (0 where the family has none):
  size_t rope_local = 0;  // f32 [context, R/2], each of cos and sin: the sliding layers' own
                          // RoPE (Config::rope_local_theta, Gemma 3)
  size_t capped = 0;      // T [N, V]: the soft-capped logits, for the cap's backward
                          // (Config::final_logit_softcap)
  size_t sinks = 0;       // [H] f32 and [H] T: d sinks of one block (attention_sinks)
  size_t qgate = 0;       // T [N, 2 H D]: q_proj's output [query | gate], then o_proj's
                          // input att * sigmoid(gate); in the backward that input again, then
                          // q_proj's gradient (Config::output_gate, Qwen3.5)

  // Q: the Gated DeltaNet rule's chunk rows, delta_chunk_rows(B, T) of the batch (< 0: one
  // sequence of N tokens).
  static DeviceWorkspaceSizes of(const Config& c, int64_t N, int64_t Q = -1) {
    const size_t n = static_cast<size_t>(N), C = static_cast<size_t>(c.hidden);
    if (Q < 0) Q = delta_chunk_rows(1, N);
    DeviceWorkspaceSizes z{static_cast<size_t>(c.context * (c.rotary_dim() / 2)),
            static_cast<size_t>(c.layers + 1) * n * C,
            n * C,
            n * static_cast<size_t>(c.vocab),
            n * static_cast<size_t>(c.heads * c.head_dim()),
            n * static_cast<size_t>(c.kv_dim()),
            n * device_swiglu_width(c),
            n,
            n * static_cast<size_t>(c.heads),
            c.qk_norm() ? kHeadNormChunks * static_cast<size_t>(c.head_dim()) : 0,
            DeviceBlockSizes::of(c, N, -1, Q),
            DeviceMoeSizes::of(c, N),
            DeviceLinearSizes::of(c, N, Q),
            Q};
    if (c.rope_local_theta > 0) z.rope_local = z.rope;
    if (c.final_logit_softcap > 0) z.capped = z.logits;
    if (c.attention_sinks()) z.sinks = static_cast<size_t>(c.heads);
    if (c.output_gate()) z.qgate = 2 * z.hd;
    return z;
  }

  // Bytes after a training step with elem-byte compute dtype: the shared block (eval,
  // recompute) and, without recompute, each layer's kept block (DeviceBlockSizes::of(c,
  // N, l): a dense layer among MoE ones keeps no routed rows, a MoE layer no dense MLP).
  uint64_t bytes(const Config& c, size_t elem, bool recompute) const {
    uint64_t b = 2 * sizeof(float) * (rope + rope_local) + kTotalsBytes;
    b += elem * (xs + 4 * rows_c + logits + capped + 2 * hd + 2 * gd + 3 * ni + qgate);
    b += (sizeof(float) + elem) * sinks;
    b += 2 * sizeof(float) * rows + 4 * sizeof(int32_t) * rows + sizeof(float) * heads_rows;
    b += sizeof(float) * norm_partial;
    b += moe.bytes(elem);
    b += linear.bytes(elem);
    b += block.bytes(elem);
    if (!recompute)  // rows == N
      for (int64_t l = 0; l < c.layers; ++l)
        b += DeviceBlockSizes::of(c, static_cast<int64_t>(rows), l, chunk_rows).bytes(elem);
    return b;
  }
};

// The LoRA adapters' workspace (DeviceModel::bind_lora / bind_qlora) for N rows, all of
// the compute dtype T; one adapter at a time uses it (their sizes are the largest target's):
//   xd  [N, max in]          dropout(x), and du A in the backward (only when lora.dropout > 0)
//   u   [N, r]               scale * dropout(x) A^T
//   du  [N, r]               scale * dy B
//   w   [max out * in]       one dequantised NF4 base weight (QLoRA only): each targeted
//                            projection's W, just before its GEMM, forward and backward
struct DeviceLoraSizes {
  size_t xd = 0, u = 0, du = 0, w = 0;

  static DeviceLoraSizes of(const Config& c, const LoraConfig& lora, int64_t N, bool qlora) {
    int64_t max_in = 0, max_w = 0;
    for (int t = 0; t < kNumLoraTargets; ++t) {
      if (!lora.has_target(static_cast<LoraTarget>(t))) continue;
      int64_t in = 0, out = 0;
      lora_target_dims(c, static_cast<LoraTarget>(t), in, out);
      max_in = std::max(max_in, in);
      max_w = std::max(max_w, in * out);
    }
    const size_t n = static_cast<size_t>(N), r = static_cast<size_t>(lora.rank);
    return {lora.dropout > 0.0 ? n * static_cast<size_t>(max_in) : 0, n * r, n * r,
            qlora ? static_cast<size_t>(max_w) : 0};
  }
  uint64_t bytes(size_t elem) const { return elem * (xd + u + du + w); }
};

// DeviceModel::workspace_bytes() after a training micro-step of N rows in B sequences.
inline uint64_t device_workspace_bytes(const Config& c, int64_t N, size_t elem, bool recompute,
                                       int64_t B = 1) {
  return DeviceWorkspaceSizes::of(c, N, delta_chunk_rows(B, N / B)).bytes(c, elem, recompute);
}

// The libraries' device scratch beside the model's buffers (not in workspace_bytes, which
// counts zt's own): cuBLASLt's workspace of the model's one Gemm (its default size,
// kernels::cuda::Gemm::kDefaultWorkspaceBytes: device_model.cpp static_asserts they are
// equal), and, with bf16 compute on a head dim cuDNN's fused attention takes (a multiple of
// 8 up to 128), cuDNN's SDPA workspace, one per stream, the larger of its forward's (none)
// and its flash backward's: an fp32 dQ accumulator [B, H, T, D] and fp32 row sums
// [B, H, T], 4 N H (D + 1) bytes (cuDNN reports the exact size only on a device: an
// estimate from the algorithm, as TransformerEngine sizes the same buffers).
inline constexpr uint64_t kGemmWorkspaceBytes = uint64_t{32} << 20;
struct DeviceLibraryWorkspaces {
  uint64_t cublaslt = 0;
  uint64_t cudnn_sdpa = 0;
  uint64_t bytes() const { return cublaslt + cudnn_sdpa; }
  static DeviceLibraryWorkspaces of(const Config& c, int64_t N, size_t elem) {
    const int64_t D = c.head_dim();
    const bool cudnn = elem == 2 && D % 8 == 0 && D <= 128;
    return {kGemmWorkspaceBytes,
            cudnn ? 4 * static_cast<uint64_t>(N) * static_cast<uint64_t>(c.heads) *
                        static_cast<uint64_t>(D + 1)
                  : 0};
  }
};

// The same with LoRA adapters bound (lora.enabled()); qlora: an NF4 base bound too. The
// NF4 base itself (QloraBase::bytes() on the device) is storage, not workspace.
inline uint64_t device_workspace_bytes(const Config& c, int64_t N, size_t elem, bool recompute,
                                       const LoraConfig& lora, bool qlora, int64_t B = 1) {
  return device_workspace_bytes(c, N, elem, recompute, B) +
         DeviceLoraSizes::of(c, lora, N, qlora).bytes(elem);
}

}  // namespace zt::model
