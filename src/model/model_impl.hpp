#pragma once
// Private to model.cpp (embedding, trunk, head, the Model calls) and block.cpp (the decoder
// block: attention and MLP, forward, decode and backward): one block's activations and the
// model's state, Model<R>::Impl. Shapes: B batch, T sequence, N = B*T rows, C hidden,
// H heads, G kv heads, D head_dim, I intermediate, V vocab.
#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "buffer.hpp"
#include "lora_apply.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/model/model.hpp"
#include "zt/model/moe_parallel.hpp"

namespace zt::model {

namespace cpu = zt::kernels::cpu;  // (k is the keys buffer)
using detail::Buffer;

// The token mixers one block's activations serve: layer l's own (Gated DeltaNet or
// attention), or every kind the model has (the shared block: eval, recompute, decode).
struct Mixers {
  bool attention = true, linear = false;
  static Mixers of_layer(const Config& c, int64_t l) { return {!c.linear(l), c.linear(l)}; }
  static Mixers of_model(const Config& c) { return {c.attention_layers(), c.linear_layers()}; }
};

// A Gated DeltaNet mixer's activations (Config::linear(l); linear_block.cpp), and, in the
// backward scratch, their gradients. Shapes: Cc = 2 Hk Dk + Hv Dv, VD = Hv Dv.
template <class R>
struct LinearActs {
  Buffer<R> qkv_pre, qkv;  // [N, Cc]   in_proj_qkv(xn1); silu(conv1d(.))
  Buffer<R> q, k;          // [N, Hk*Dk] the conv's q and k channels
  Buffer<R> v;             // [N, VD]
  Buffer<R> z;             // [N, VD]   in_proj_z(xn1)
  Buffer<R> a, beta, g;    // [N, Hv]   in_proj_a(xn1); sigmoid(in_proj_b(xn1)); the log decay
  Buffer<R> out, y;        // [N, VD]   the rule's output; the gated norm's
  Buffer<R> rstd;          // [N*Hv]
  void ensure(const model::Config& c, int64_t N) {
    const int64_t Cc = c.linear_conv_dim(), KD = c.linear_key_heads * c.linear_key_dim;
    const int64_t Hv = c.linear_value_heads, VD = Hv * c.linear_value_dim;
    for (Buffer<R>* b : {&qkv_pre, &qkv}) b->ensure(N * Cc);
    for (Buffer<R>* b : {&q, &k}) b->ensure(N * KD);
    for (Buffer<R>* b : {&v, &z, &out, &y}) b->ensure(N * VD);
    for (Buffer<R>* b : {&a, &beta, &g, &rstd}) b->ensure(N * Hv);
  }
  size_t bytes() const {
    size_t n = 0;
    for (const Buffer<R>* b : {&qkv_pre, &qkv, &q, &k, &v, &z, &a, &beta, &g, &out, &y, &rstd})
      n += b->bytes();
    return n;
  }
};

// One block's activations, kept from its forward for its backward.
template <class R>
struct BlockActs {
  LinearActs<R> lin;  // a Gated DeltaNet layer's (Config::linear_layers())
  Buffer<R> xn1;    // [N, C]      input_layernorm(x_in)
  Buffer<R> rstd1;  // [N]
  Buffer<R> q;      // [N, H*D]    after RoPE
  Buffer<R> k;      // [N, G*D]    after RoPE
  Buffer<R> qr;     // [N, H*D]    q_proj output before the q norm (qk_norm only)
  Buffer<R> kr;     // [N, G*D]    k_proj output before the k norm (qk_norm only)
  Buffer<R> rstd_q; // [N*H]       (qk_norm only)
  Buffer<R> rstd_k; // [N*G]       (qk_norm only)
  Buffer<R> v;      // [N, G*D]
  Buffer<R> probs;  // [B, H, T, T] attention softmax
  Buffer<R> att;    // [N, H*D]    attention output, before o_proj
  // The output gate (Config::output_gate(), Qwen3.5): q_proj's output [N, H, 2D], the gate
  // half [N, H*D], and att * sigmoid(gate) [N, H*D] (o_proj's input).
  Buffer<R> qg, ogate, att_g;
  Buffer<R> x_mid;  // [N, C]      x_in + o_proj(att)
  Buffer<R> xn2;    // [N, C]      post_attention_layernorm(x_mid)
  Buffer<R> rstd2;  // [N]
  Buffer<R> gate;   // [N, I]      gate_proj(xn2)
  Buffer<R> up;     // [N, I]      up_proj(xn2)
  Buffer<R> h;      // [N, I]      silu(gate) * up (Gemma: gelu_tanh(gate) * up)
  // Gemma's sandwich (Config::sandwich_norms()): the attention's and the MLP's outputs
  // before their norms, and those norms' rstd.
  Buffer<R> o_out, down_out;  // [N, C]
  Buffer<R> rstd_o, rstd_m;   // [N]
  // Mixture of experts (Config::moe(), instead of gate, up, h): E experts, k per token.
  Buffer<R> rprobs;      // [N, E]      router softmax
  Buffer<int32_t> ridx;  // [N, k]      chosen experts
  Buffer<R> rw;          // [N, k]      their renormalised weights
  Buffer<R> mgu;         // [N*k, 2I]   each routed row's gate|up pre-activations
  Buffer<R> mh;          // [N*k, I]    silu(gate) * up
  Buffer<R> my;          // [N*k, C]    the expert's output before its weight
  // The shared expert (Config::shared_expert(), qwen2_moe; shared_expert.cpp), S wide.
  Buffer<R> sgate, sup, sh;  // [N, S]   its gate_proj(xn2), up_proj(xn2), silu(gate) * up
  Buffer<R> sy;              // [N, C]   its output before the gate
  Buffer<R> sg;              // [N]      sigmoid(shared_expert_gate(xn2))

  // routed: the routed experts' buffers (rprobs .. my); false under expert parallelism,
  // whose layers keep their own (ExpertParallelMoe). mixer: the token mixers it serves (a
  // Gated DeltaNet layer's saved block holds no attention buffers, [B, H, T, T] included;
  // the attention layers' none of `lin`).
  void ensure(const Config& c, int64_t N, int64_t BHTT, bool routed, Mixers mixer) {
    if (mixer.linear) lin.ensure(c, N);
    xn1.ensure(N * c.hidden);
    rstd1.ensure(N);
    if (mixer.attention) ensure_attention(c, N, BHTT);
    x_mid.ensure(N * c.hidden);
    xn2.ensure(N * c.hidden);
    rstd2.ensure(N);
    ensure_mlp(c, N, routed);
  }
  void ensure_attention(const Config& c, int64_t N, int64_t BHTT) {
    const int64_t HD = c.q_dim(), GD = c.kv_dim();
    q.ensure(N * HD);
    k.ensure(N * GD);
    if (c.output_gate()) {
      qg.ensure(N * 2 * HD);
      ogate.ensure(N * HD);
      att_g.ensure(N * HD);
    }
    if (c.qk_norm()) {
      qr.ensure(N * HD);
      kr.ensure(N * GD);
      rstd_q.ensure(N * c.heads);
      rstd_k.ensure(N * c.kv_heads);
    }
    v.ensure(N * GD);
    probs.ensure(BHTT);
    att.ensure(N * HD);
    if (c.sandwich_norms()) {
      o_out.ensure(N * c.hidden);
      down_out.ensure(N * c.hidden);
      rstd_o.ensure(N);
      rstd_m.ensure(N);
    }
  }
  void ensure_mlp(const Config& c, int64_t N, bool routed) {
    if (c.moe()) {
      const int64_t E = c.experts, K = c.experts_per_token, IE = c.expert_width();
      if (routed) {
        rprobs.ensure(N * E);
        ridx.ensure(N * K);
        rw.ensure(N * K);
        mgu.ensure(N * K * 2 * IE);
        mh.ensure(N * K * IE);
        my.ensure(N * K * c.hidden);
      }
      if (c.shared_expert()) {
        const int64_t S = c.shared_expert_intermediate;
        sgate.ensure(N * S);
        sup.ensure(N * S);
        sh.ensure(N * S);
        sy.ensure(N * c.hidden);
        sg.ensure(N);
      }
      if (!c.dense_layers()) return;  // else the dense layers' below too
    }
    gate.ensure(N * c.intermediate);
    up.ensure(N * c.intermediate);
    h.ensure(N * c.intermediate);
  }
  // Frees the routed experts' buffers (set_expert_group: the layers keep their own).
  void drop_routed() {
    rprobs = Buffer<R>();
    ridx = Buffer<int32_t>();
    rw = Buffer<R>();
    mgu = Buffer<R>();
    mh = Buffer<R>();
    my = Buffer<R>();
  }
  size_t bytes() const {
    return lin.bytes() + xn1.bytes() + rstd1.bytes() + q.bytes() + k.bytes() + qr.bytes() + kr.bytes() +
           rstd_q.bytes() + rstd_k.bytes() + v.bytes() + probs.bytes() + qg.bytes() +
           ogate.bytes() + att_g.bytes() +
           att.bytes() + x_mid.bytes() + xn2.bytes() + rstd2.bytes() + gate.bytes() +
           up.bytes() + h.bytes() + rprobs.bytes() + ridx.bytes() + rw.bytes() + mgu.bytes() +
           mh.bytes() + my.bytes() + sgate.bytes() + sup.bytes() + sh.bytes() + sy.bytes() +
           sg.bytes() + o_out.bytes() + down_out.bytes() + rstd_o.bytes() + rstd_m.bytes();
  }
};

template <class R>
struct Model<R>::Impl {
  Config cfg;
  ParamLayout layout;
  std::vector<const R*> params;  // per unit
  std::vector<R*> grads;         // per unit (nullptr when unbound)
  UnitHooks hooks;

  Buffer<R> rope_cos, rope_sin;     // [rope_positions, D/2] (ensure_rope)
  Buffer<R> local_cos, local_sin;   // the sliding layers' own (Config::rope_local_theta > 0)
  int64_t rope_positions = 0;
  Buffer<R> xs;                     // [L+1, N, C] residual stream: block inputs + final output
  BlockActs<R> shared;              // eval and recompute
  std::vector<BlockActs<R>> saved;  // [L], only for loss_and_grad without recompute
  Buffer<R> xf;                     // [N, C] final norm output
  Buffer<R> rstd_f;                 // [N]
  Buffer<R> logits;                 // [N, V] logits, then dlogits (in place)
  Buffer<R> capped;                 // [N, V] the soft-capped logits (final_logit_softcap)
  // backward scratch
  Buffer<R> dres;                   // [N, C] gradient of the residual stream
  Buffer<R> dxn;                    // [N, C] gradient of a norm output
  Buffer<R> datt;                   // [N, H*D]
  Buffer<R> dq;                     // [N, H*D]
  Buffer<R> dogate, dqg;            // [N, H*D], [N, H*2D]: the output gate's (output_gate())
  LinearActs<R> dlin;               // a Gated DeltaNet mixer's gradients (linear_block.cpp)
  Buffer<R> dk, dv;                 // [N, G*D]
  Buffer<R> dh, dgate, dup;         // [N, I] (or [N, S]: the shared expert's, when wider)
  Buffer<R> attn_scratch;           // attention_backward_scratch(T, threads)
  // Mixture of experts (moe_block.cpp): scratch and the router statistics of the last
  // forward_trunk (summed over its blocks; recompute and decode do not count).
  Buffer<R> router_logits;          // [N, E]
  Buffer<R> moe_out;                // [N, C] the experts' sum when recomputed (discarded)
  Buffer<R> dlogits_r;              // [N, E]
  Buffer<R> dw_r;                   // [N, k]
  Buffer<R> aux_dprob;              // [E] d (coef * aux) / d p of every row (router_aux_loss)
  Buffer<R> dshared;                // [N, C] the shared expert's d y (shared_expert.cpp)
  Buffer<R> dshared_gate;           // [N]    d loss / d its gate's logit
  RouterStats router;               // tokens per expert, rows, aux of the last forward_trunk
  std::vector<double> prob_sum;     // [E] P_e: router probabilities summed over the rows
  bool count_router = false;        // inside forward_trunk: the blocks add to `router`
  // Expert parallelism (moe_block_ep.cpp, Model::set_expert_group): the layout holds this
  // rank's experts only (ParamLayout::expert_slice) and each block's MLP runs through an
  // ExpertParallelMoe over the expert group (null: the single-rank block): layer l's own
  // when its activations are saved[l], else the one beside `shared` (eval, and recompute:
  // a layer's backward follows its recomputed forward, so one layer's rows at a time).
  comm::Comm* expert_group = nullptr;
  std::vector<std::unique_ptr<ExpertParallelMoe>> ep;  // [L + 1]: saved[l]'s, then shared's
  ExpertParallelMoe& ep_for(int l, const BlockActs<R>& a) {
    return *ep[static_cast<size_t>(&a == &shared ? cfg.layers : l)];
  }
  // Per-token positions of the call in progress ([B, T]; nullptr: 0..T-1 in each row):
  // packed examples restart RoPE positions and attention at each example's first token.
  const int32_t* pos = nullptr;
  Buffer<R> decode_scores;          // [H, past + n] attention scores of decode()
  detail::LoraApply<R> lora;        // adapters (bind_lora): the base is frozen when bound
  bool training = false;            // inside loss_and_grad (LoRA dropout applies)
  RowObjective objective;           // set_row_objective (empty: mean cross-entropy)

  explicit Impl(const ParamLayout& l)
      : cfg(l.config()), layout(l), params(static_cast<size_t>(layout.num_units()), nullptr),
        grads(static_cast<size_t>(layout.num_units()), nullptr) {
  }

  // RoPE tables for positions [0, n), grown on demand (at least doubling, at most the
  // context): a model that declares a long context holds tables for the positions it runs,
  // not for all it could (issue 36, class 6). ensure() and decode() call it.
  void ensure_rope(int64_t n) {
    if (n <= rope_positions) return;
    n = std::min(cfg.context, std::max(n, 2 * rope_positions));
    const int64_t rd = cfg.rotary_dim(), half = rd / 2;  // partial RoPE: rd < head_dim
    rope_cos.ensure(n * half);
    rope_sin.ensure(n * half);
    cpu::rope_table(rope_cos.data(), rope_sin.data(), n, rd, cfg.rope_theta, cfg.rope_scaling);
    if (cfg.rope_local_theta > 0) {
      local_cos.ensure(n * half);
      local_sin.ensure(n * half);
      cpu::rope_table(local_cos.data(), local_sin.data(), n, rd, cfg.rope_local_theta);
    }
    rope_positions = n;
  }
  // Layer l's RoPE tables (cos, sin) from position `from` on: its type's (the schedule).
  std::pair<const R*, const R*> rope_of(int l, int64_t from = 0) const {
    const bool local = cfg.local_rope(l);
    const int64_t off = from * (cfg.rotary_dim() / 2);
    return {(local ? local_cos : rope_cos).data() + off, (local ? local_sin : rope_sin).data() + off};
  }
  // x [n] *= s, skipped when s == 1 (query_pre_attn_scalar, the embedding scale).
  static void scale_by(R* x, int64_t n, double s) {
    if (s == 1.0) return;
    const R f = static_cast<R>(s);
    for (int64_t i = 0; i < n; ++i) x[i] *= f;
  }
  // The embeddings' factor: sqrt(hidden) rounded to R (Gemma; transformers multiplies by
  // a tensor of the model's dtype), else 1.
  double embed_factor() const {
    return cfg.embed_scale() ? static_cast<double>(static_cast<R>(std::sqrt(static_cast<double>(cfg.hidden))))
                             : 1.0;
  }

  void use(int u) {
    // A layout without the targeted W (QLoRA's) has them only in the NF4 base.
    if (layout.left_out() != 0 && !lora.has_qlora())
      throw std::logic_error("Model: a layout without the targeted W (QLoRA's) used before "
                             "bind_qlora: the model reads those W from the NF4 base");
    if (hooks.before_use) hooks.before_use(u);
    if (!params[static_cast<size_t>(u)]) {
      throw Error(strf("parameter unit %d (%s) is not bound", u, layout.unit(u).name.c_str()),
                  "call Model::bind_unit for every unit (or Parameters::bind) first.");
    }
  }
  void done(int u) {
    if (hooks.after_use) hooks.after_use(u);
  }
  void ready(int u) {
    if (hooks.grad_ready) hooks.grad_ready(u);
  }
  // y [N, out] = x W^T (+ b [out] when b is not null), plus the LoRA adapter of (layer, t)
  // when one is bound (with QLoRA W is read dequantised from the NF4 base: LoraApply::weight).
  void proj_forward(int layer, LoraTarget t, R* y, const R* x, const R* W, int64_t N,
                    int64_t in, int64_t out, const R* b = nullptr) {
    cpu::linear_forward(y, x, lora.weight(layer, t, W), N, in, out);
    if (b) cpu::bias_forward(y, b, N, out);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.forward(*a, y, x, N, training);
  }
  // The backward of proj_forward: dx as linear_backward; dW (and db) only when the base is
  // not frozen (pass nullptr for none); the adapter's gradients into its grads.
  void proj_backward(int layer, LoraTarget t, R* dx, R* dW, const R* dy, const R* x, const R* W,
                     int64_t N, int64_t in, int64_t out, bool accumulate_dx = true,
                     R* db = nullptr) {
    cpu::linear_backward(dx, dW, dy, x, lora.weight(layer, t, W), N, in, out, accumulate_dx);
    if (db) cpu::bias_backward(db, dy, N, out);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.backward(*a, dx, dy, x, N, training);
  }
  // The gradient of the parameters at offset `off` of unit u: nullptr when LoRA freezes
  // the base (the kernels then skip that gradient).
  R* base_grad(int u, int64_t off) { return lora.bound() ? nullptr : grad_of(u) + off; }
  // The same for a tensor the block may not have (offset -1: nullptr).
  R* base_grad_or_null(int u, int64_t off) { return off < 0 ? nullptr : base_grad(u, off); }

  R* grad_of(int u) {
    R* g = grads[static_cast<size_t>(u)];
    if (!g) {
      throw Error(strf("gradient buffer of unit %d (%s) is not bound", u,
                       layout.unit(u).name.c_str()),
                  "loss_and_grad needs bind_unit(u, params, grads) with a gradient span.");
    }
    return g;
  }

  void check_shape(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                   int64_t T, bool need_targets) const;

  // Grows the workspace for B x T (no-op once the largest shape has been seen).
  void ensure(int64_t B, int64_t T, bool backward, bool keep_all);

  R* x_at(int l, int64_t N) { return xs.data() + static_cast<int64_t>(l) * N * cfg.hidden; }
  const R* lm_head_w() const {
    return cfg.tied_embeddings ? params[0]
                               : params[static_cast<size_t>(layout.head_unit())] +
                                     layout.lm_head_offset();
  }

  // ---- the decoder block (block.cpp) ----
  // Block l: x_in [N, C] -> x_out [N, C]; activations into a. With x_out == nullptr
  // (recompute in the backward) the down projection and last residual are skipped:
  // the backward needs only what comes before them.
  void block_forward(int l, const R* x_in, R* x_out, BlockActs<R>& a, int64_t B, int64_t T);
  // A block's MLP half: a.x_mid [N, C] -> x_out [N, C] (skipped when x_out == nullptr).
  void mlp_forward(int l, const R* p, R* x_out, BlockActs<R>& a, int64_t N);
  void attn_out(int l, const R* p, BlockActs<R>& a, const R* x_in, int64_t N);
  void q_forward(int l, R* q, const R* p, BlockActs<R>& a, int64_t N);
  // A Gated DeltaNet layer's mixer (linear_block.cpp): x_in -> a.x_mid; its backward from
  // dres (dL/dx_mid) into dres (dL/dx_in added).
  void linear_mixer_forward(int l, const R* p, BlockActs<R>& a, const R* x_in, int64_t B,
                            int64_t T);
  void linear_mixer_backward(int l, int u, const R* p, BlockActs<R>& a, const R* x_in,
                             int64_t B, int64_t T);
  // Its decode over n new tokens of one sequence: from and into the cache's conv inputs
  // and state of slot s (the chunked rule for n > 1, the recurrent one for n == 1).
  void linear_mixer_decode(int l, const R* p, BlockActs<R>& a, const R* x_in, int64_t n,
                           int64_t s, KvCache<R>& cache);
  // The mixer's forward over B rows of T tokens from the conv inputs `past` [B, Cc, K - 1]
  // and the state [B, Hv, Dk, Dv] (null: zeros; the state updated in place when given).
  void linear_mixer_run(int l, const R* p, BlockActs<R>& a, const R* x_in, int64_t B,
                        int64_t T, const R* past, R* state);
  // Block l over n new positions of one sequence (past before them in the cache): their
  // keys and values go into the cache, their queries attend the whole cache.
  void block_decode(int l, const R* x_in, R* x_out, BlockActs<R>& a, int64_t n, int64_t past,
                    KvCache<R>& cache);
  // Block l backward: dres [N, C] holds dL/dx_out on entry and dL/dx_in on exit.
  void block_backward(int l, const R* x_in, BlockActs<R>& a, int64_t B, int64_t T);
  // The dense MLP's backward (unit u = block l): dres [N, C] -> dxn [N, C] written.
  void dense_mlp_backward(int l, int u, const R* p, BlockActs<R>& a, int64_t N);
  // ---- the mixture-of-experts MLP (moe_block.cpp) ----
  // a.xn2 [N, C] -> x_out = a.x_mid + sum of the routed experts (x_out == nullptr: the
  // activations only, as mlp_forward); inside forward_trunk its statistics go to `router`.
  void moe_forward(int l, const R* p, R* x_out, BlockActs<R>& a, int64_t N);
  // dres [N, C] (dL/dx_out) -> dxn [N, C] written: dL/d a.xn2; the router's and the
  // experts' gradients into unit u's (none when frozen). With router_aux_loss the aux
  // loss's gradient (aux_dprob, set by moe_aux_begin) enters every row's router.
  void moe_backward(int u, const R* p, BlockActs<R>& a, int64_t N);
  cpu::ExpertExtras<R> expert_extras(int u, const R* p, bool with_grads = false);
  std::vector<R> dsink_;  // [H] one layer's d sink (attention_backward writes it)
  // The same over the expert group (moe_block_ep.cpp; expert_group set).
  void moe_forward_ep(int l, const R* p, R* x_out, BlockActs<R>& a, int64_t N);
  void moe_backward_ep(int u, const R* p, BlockActs<R>& a, int64_t N);
  // ---- qwen2_moe's shared expert (shared_expert.cpp) ----
  // out [N, C] += sigmoid(a.xn2 g^T) * down(silu(gate a.xn2) * up a.xn2), block l's.
  void shared_expert_forward(int l, const R* p, R* out, BlockActs<R>& a, int64_t N);
  // dres [N, C] (dL/d out) -> dxn [N, C] accumulated; its weights' gradients into unit u's.
  void shared_expert_backward(int u, const R* p, BlockActs<R>& a, int64_t N);
  // A forward_trunk's statistics: begin zeroes them and counts the blocks' routing; end
  // stops counting and computes router.aux (no-ops without experts).
  void moe_stats_begin();
  void moe_stats_end();
  // coef * aux when router_aux_loss (else 0), and aux_dprob for the backward scaled by
  // grad_scale (call after forward_trunk).
  double moe_aux_term(double grad_scale);

  // ---- the trunk, the head and the calls (model.cpp) ----
  // Embedding and every block; xs[L] holds the final hidden state afterwards.
  void forward_trunk(std::span<const int32_t> tokens, int64_t B, int64_t T, bool keep_all);
  // Final norm and LM head over all N rows: logits [N, V].
  void head_forward(int64_t N);
  void use_head();
  void done_head();
  // Positions [B, T] for this call (empty: none; see check_positions).
  void set_positions(std::span<const int32_t> positions, int64_t B, int64_t T);
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       int64_t B, int64_t T, bool recompute, double grad_scale,
                       std::span<const int32_t> positions);
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T, std::span<const int32_t> positions);
  // Per-row summed log-probs of the targets over logits [B*T, V] (no gradient).
  void row_sums(const int32_t* targets, int64_t B, int64_t T, std::span<double> logp,
                std::span<int64_t> count) const;
  // The objective's value; writes each row's dlogits in place of its logits.
  double objective_backward(const int32_t* targets, int64_t B, int64_t T, double grad_scale);
  void logits_last(std::span<const int32_t> tokens, int64_t T, std::span<R> out);
  // The head over the last of the n rows of the final hidden state: logits [V] into out.
  void head_last(int64_t n, std::span<R> out);
  void decode(std::span<const int32_t> tokens, KvCache<R>& cache, std::span<R> out);
  size_t workspace_bytes() const;
};

}  // namespace zt::model
