#pragma once
// DeviceModel's state (private to zt_model_cuda): the workspace of one GPU decoder (the
// per-block activations DeviceBlockActs, the scratch of the backward, the logits and the
// loss totals), the bound unit spans and hooks, and the small helpers every pass uses
// (unit use/done, the projections with their biases and LoRA adapters). The passes are
// defined in: device_block.cpp (one decoder block, attention and MLP, forward and
// backward), device_linear.cpp (Qwen3.5's Gated DeltaNet mixer instead of the attention),
// device_moe.cpp (the mixture-of-experts MLP) and device_moe_ep.cpp (its
// expert-parallel exchanges), device_model.cpp (embedding, the stack of blocks, head and
// loss, and the public DeviceModel), device_objective.cpp (the preference objectives'
// per-row log-probs and their backward at the head), device_trainable.cpp (the
// TrainableModel the engine sees).
// Shapes: B batch, T sequence, N = B*T rows, C hidden, H heads, G kv heads, D head_dim,
// I intermediate, V vocab, L layers.
#include <cmath>
#include <span>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "device_lora.hpp"
#include "zt/comm/comm.hpp"
#include "zt/comm/host_stage.hpp"
#include "zt/core/dtype.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/cuda.hpp"
#include "zt/model/device_model.hpp"
#include "zt/model/device_workspace.hpp"

namespace zt::model {

namespace kc = zt::kernels::cuda;

namespace detail {

static_assert(sizeof(kc::CrossEntropyTotals) == DeviceWorkspaceSizes::kTotalsBytes,
              "DeviceWorkspaceSizes counts one CrossEntropyTotals");

// One block's activations, kept from its forward for its backward.
template <class T>
struct DeviceBlockActs {
  kc::DeviceBuffer<T> xn1;        // [N, C]     input_layernorm(x_in)
  kc::DeviceBuffer<float> rstd1;  // [N]
  kc::DeviceBuffer<T> q;          // [N, H*D]   after RoPE
  kc::DeviceBuffer<T> k;          // [N, G*D]   after RoPE
  kc::DeviceBuffer<T> v;          // [N, G*D]
  kc::DeviceBuffer<T> att;        // [N, H*D]   attention output, before o_proj
  kc::DeviceBuffer<float> lse;    // [B, H, T]  attention log-sum-exp
  kc::DeviceBuffer<T> x_mid;      // [N, C]     x_in + o_proj(att)
  kc::DeviceBuffer<T> xn2;        // [N, C]     post_attention_layernorm(x_mid)
  kc::DeviceBuffer<float> rstd2;  // [N]
  // The SwiGLU's [N, W] (W = device_swiglu_width: the dense MLP's I, or in a qwen2_moe MoE
  // layer the shared expert's S; empty in a MoE layer without a shared expert)
  kc::DeviceBuffer<T> gate;       // [N, W]
  kc::DeviceBuffer<T> up;         // [N, W]
  kc::DeviceBuffer<T> h;          // [N, W]     silu(gate) * up
  // Config::qk_norm only (Qwen3; empty otherwise): q and k are then the norm's outputs.
  kc::DeviceBuffer<T> qr;         // [N, H*D]   q_proj output (+ bias), before the q norm
  kc::DeviceBuffer<T> kr;         // [N, G*D]   k_proj output (+ bias), before the k norm
  kc::DeviceBuffer<float> rstd_q; // [N*H]      the q norm's 1/rms per head row
  kc::DeviceBuffer<float> rstd_k; // [N*G]
  // Mixture of experts (a Config::moe_layer; empty in a dense layer): E experts of width
  // I_e, k per token, S = N k routed rows in the expert-sorted order of this block's plan.
  kc::DeviceBuffer<float> rprobs;  // [N, E]   router softmax
  kc::DeviceBuffer<int32_t> ridx;  // [N, k]   chosen experts, largest probability first
  kc::DeviceBuffer<float> rw;      // [N, k]   their weights (renormalised: norm_topk_prob)
  kc::DeviceBuffer<int32_t> perm;  // [S]      permuted row p holds slot perm[p]
  kc::DeviceBuffer<int32_t> pos;   // [S]      slot s sits at row pos[s]
  kc::DeviceBuffer<T> xp;          // [S, C]   the input rows (xn2), permuted
  kc::DeviceBuffer<T> mg;          // [S, I_e] gate pre-activations (then their gradient)
  kc::DeviceBuffer<T> mu;          // [S, I_e] up pre-activations (likewise)
  kc::DeviceBuffer<T> mh;          // [S, I_e] silu(g) * u
  kc::DeviceBuffer<T> my;          // [S, C]   each expert's output before its weight
  // qwen2_moe's shared expert (its SwiGLU in gate, up, h above)
  kc::DeviceBuffer<T> sy;          // [N, C]   its output before the gate
  kc::DeviceBuffer<float> sg;      // [N]      sigmoid(shared_expert_gate . xn2)
  // Gemma's sandwich norms (Config::sandwich_norms; empty otherwise): their inputs and 1/rms
  kc::DeviceBuffer<T> o_out;       // [N, C]   o_proj's output
  kc::DeviceBuffer<T> down_out;    // [N, C]   down_proj's output
  kc::DeviceBuffer<float> rstd_o;  // [N]
  kc::DeviceBuffer<float> rstd_m;  // [N]
  // Qwen3.5's output gate (Config::output_gate; empty otherwise)
  kc::DeviceBuffer<T> ogate;       // [N, H*D]  the gate half of q_proj's output
  // Qwen3.5's Gated DeltaNet mixer (a Config::linear layer; empty otherwise): Cc conv
  // channels [q | k | v], KD = Hk Dk, VD = Hv Dv, Q chunk rows (DeviceBlockSizes).
  kc::DeviceBuffer<T> lqkv;         // [N, Cc]  in_proj_qkv's output, the conv's input
  kc::DeviceBuffer<T> lq, lk, lv;   // [N, KD] [N, KD] [N, VD] the conv's output, split
  kc::DeviceBuffer<T> lz;           // [N, VD]  in_proj_z's output
  kc::DeviceBuffer<T> la;           // [N, Hv]  in_proj_a's output
  kc::DeviceBuffer<T> lout, ly;     // [N, VD]  the rule's output; the gated norm's
  kc::DeviceBuffer<float> lg, lbeta;  // [N, Hv] the log decay; sigmoid(in_proj_b's output)
  kc::DeviceBuffer<float> lrstd;      // [N*Hv]  the gated norm's 1/rms
  kc::DeviceBuffer<float> lstarts;    // [Q, Hv, Dk, Dv] the rule's state at each chunk start
  std::vector<int64_t> offsets;    // host [E + 1]: the plan's expert ranges (rows of expert e)
  // Expert parallelism (device_moe_ep.cpp; empty without an expert group of P ranks, L = E/P
  // local experts): this rank's experts ran on the R rows the group sent it, so xp, mg, mu,
  // mh, my hold R rows (grown on demand: R varies per step, up to P S) in the local plan's
  // order (model/moe_parallel.hpp local_expert_plan).
  kc::DeviceBuffer<int32_t> eperm;  // [R]      local plan: sorted row q is received row eperm[q]
  kc::DeviceBuffer<int32_t> epos;   // [R]      received row r sits at epos[r]
  kc::DeviceBuffer<T> eys;          // [S, C]   the experts' outputs back, in dispatch order
  std::vector<int64_t> eoffsets;    // host [L + 1] the local plan's expert ranges
  std::vector<int64_t> ecounts;     // host [P, L] rows received from rank p for local expert e

  // Sizes from the shared formula (zt/model/device_workspace.hpp), which zt estimate uses:
  // layer l's own, or (layer < 0) the block every layer shares.
  DeviceBlockActs(const Config& c, int64_t N, int64_t layer = -1, int64_t Q = -1) {
    const DeviceBlockSizes z = DeviceBlockSizes::of(c, N, layer, Q);
    xn1 = kc::DeviceBuffer<T>(z.xn1);
    rstd1 = kc::DeviceBuffer<float>(z.rstd1);
    q = kc::DeviceBuffer<T>(z.q);
    k = kc::DeviceBuffer<T>(z.k);
    v = kc::DeviceBuffer<T>(z.v);
    att = kc::DeviceBuffer<T>(z.att);
    lse = kc::DeviceBuffer<float>(z.lse);
    x_mid = kc::DeviceBuffer<T>(z.x_mid);
    xn2 = kc::DeviceBuffer<T>(z.xn2);
    rstd2 = kc::DeviceBuffer<float>(z.rstd2);
    gate = kc::DeviceBuffer<T>(z.gate);
    up = kc::DeviceBuffer<T>(z.up);
    h = kc::DeviceBuffer<T>(z.h);
    qr = kc::DeviceBuffer<T>(z.qr);
    kr = kc::DeviceBuffer<T>(z.kr);
    rstd_q = kc::DeviceBuffer<float>(z.rstd_q);
    rstd_k = kc::DeviceBuffer<float>(z.rstd_k);
    rprobs = kc::DeviceBuffer<float>(z.rprobs);
    ridx = kc::DeviceBuffer<int32_t>(z.ridx);
    rw = kc::DeviceBuffer<float>(z.rw);
    perm = kc::DeviceBuffer<int32_t>(z.perm);
    pos = kc::DeviceBuffer<int32_t>(z.pos);
    xp = kc::DeviceBuffer<T>(z.xp);
    mg = kc::DeviceBuffer<T>(z.mg);
    mu = kc::DeviceBuffer<T>(z.mu);
    mh = kc::DeviceBuffer<T>(z.mh);
    my = kc::DeviceBuffer<T>(z.my);
    sy = kc::DeviceBuffer<T>(z.sy);
    sg = kc::DeviceBuffer<float>(z.sg);
    o_out = kc::DeviceBuffer<T>(z.o_out);
    down_out = kc::DeviceBuffer<T>(z.down_out);
    rstd_o = kc::DeviceBuffer<float>(z.rstd_o);
    rstd_m = kc::DeviceBuffer<float>(z.rstd_m);
    ogate = kc::DeviceBuffer<T>(z.ogate);
    lqkv = kc::DeviceBuffer<T>(z.lqkv);
    lq = kc::DeviceBuffer<T>(z.lq);
    lk = kc::DeviceBuffer<T>(z.lk);
    lv = kc::DeviceBuffer<T>(z.lv);
    lz = kc::DeviceBuffer<T>(z.lz);
    la = kc::DeviceBuffer<T>(z.la);
    lout = kc::DeviceBuffer<T>(z.lout);
    ly = kc::DeviceBuffer<T>(z.ly);
    lg = kc::DeviceBuffer<float>(z.lg);
    lbeta = kc::DeviceBuffer<float>(z.lbeta);
    lrstd = kc::DeviceBuffer<float>(z.lrstd);
    lstarts = kc::DeviceBuffer<float>(z.lstarts);
  }
  size_t bytes() const {
    return xn1.bytes() + rstd1.bytes() + q.bytes() + k.bytes() + v.bytes() + att.bytes() +
           lse.bytes() + x_mid.bytes() + xn2.bytes() + rstd2.bytes() + gate.bytes() + up.bytes() +
           h.bytes() + qr.bytes() + kr.bytes() + rstd_q.bytes() + rstd_k.bytes() + rprobs.bytes() +
           ridx.bytes() + rw.bytes() + perm.bytes() + pos.bytes() + xp.bytes() + mg.bytes() +
           mu.bytes() + mh.bytes() + my.bytes() + sy.bytes() + sg.bytes() + eperm.bytes() +
           epos.bytes() + eys.bytes() + o_out.bytes() + down_out.bytes() + rstd_o.bytes() +
           rstd_m.bytes() + ogate.bytes() + lqkv.bytes() + lq.bytes() + lk.bytes() + lv.bytes() +
           lz.bytes() + la.bytes() + lout.bytes() + ly.bytes() + lg.bytes() + lbeta.bytes() +
           lrstd.bytes() + lstarts.bytes();
  }
  // The experts' saved activations (moe_experts_forward's MoeActs).
  kc::MoeActs<T> experts() { return {xp.data(), mg.data(), mu.data(), mh.data(), my.data()}; }
  // The plan over E experts, and expert parallelism's local plan over L: perm and pos on
  // the device, the ranges on the host (dev_offsets only inside the forward, which sets it).
  kc::MoePlan plan() { return plan_of(perm, pos, offsets); }
  kc::MoePlan local_plan() { return plan_of(eperm, epos, eoffsets); }
  static kc::MoePlan plan_of(kc::DeviceBuffer<int32_t>& pm, kc::DeviceBuffer<int32_t>& ps,
                             const std::vector<int64_t>& ranges) {
    kc::MoePlan p;
    p.perm = pm.data();
    p.pos = ps.data();
    p.offsets = ranges;
    return p;
  }
};

// Pinned host memory of the MoE blocks (the host ends of asynchronous copies):
struct MoeHost {
  kc::PinnedBuffer<int32_t> offsets;  // [E + 1] moe_plan's expert ranges (the GEMM sizes)
  kc::PinnedBuffer<double> prob_sum;  // [E] the pass's probability sums (router_sums' 2nd half)
  kc::PinnedBuffer<float> dprob;      // [E] d (coef aux) / d p, uploaded to aux_dprob
};

}  // namespace detail

template <class T, class G>
struct DeviceModel<T, G>::Impl {
  Config cfg;
  ParamLayout layout;
  cudaStream_t stream;
  comm::HostStage stage;  // the host side of every copy: the batch, the loss, the row sums
  kc::Gemm gemm;
  std::vector<const T*> params;  // per unit, device
  std::vector<G*> grads;         // per unit, device (nullptr when unbound)
  UnitHooks hooks;

  int64_t capacity = 0;                            // rows N the workspace holds
  int64_t chunk_capacity = 0;                      // the Gated DeltaNet rule's chunk rows Q
  kc::DeviceBuffer<float> rope_cos, rope_sin;      // [context, R/2] (R = Config::rotary_dim)
  kc::DeviceBuffer<float> local_cos, local_sin;    // [context, R/2] rope_local_theta's (Gemma 3)
  kc::DeviceBuffer<T> xs;                          // [L+1, N, C] block inputs + final hidden state
  std::vector<detail::DeviceBlockActs<T>> shared;  // [1]: forward-only use and recompute
  std::vector<detail::DeviceBlockActs<T>>
      acts;                          // [L]: a step without recompute keeps every block's
  int64_t acts_rows = 0;             // rows the per-block activations hold
  int64_t acts_chunks = 0;           // chunk rows they hold (Gated DeltaNet layers)
  kc::DeviceBuffer<T> delta;         // [N, C] o_proj or down_proj output, pending add
  kc::DeviceBuffer<T> xf;            // [N, C] final norm output
  kc::DeviceBuffer<float> rstd_f;    // [N]
  kc::DeviceBuffer<T> logits;        // [N, V] logits, then dlogits (in place)
  kc::DeviceBuffer<T> capped;        // [N, V] the soft-capped logits (final_logit_softcap)
  kc::DeviceBuffer<float> dsink_f;   // [H] one block's d sinks (attention_sinks) ...
  kc::DeviceBuffer<T> dsink_t;       // [H] ... as T, added to the gradient (bias_backward)
  kc::DeviceBuffer<float> row_loss;  // [N]
  kc::DeviceBuffer<kc::CrossEntropyTotals> totals;  // [1]; [B] for a row objective (row_sums)
  kc::DeviceBuffer<int32_t> tokens_d, targets_d;    // [N]
  // Context targets (model.hpp RowObjective: t <= -2 is the token -2 - t): context_d [N]
  // holds them decoded (-1 elsewhere), context_h its host copy; has_context: this batch
  // has one (upload_batch).
  kc::DeviceBuffer<int32_t> context_d;
  std::vector<int32_t> context_h;
  bool has_context = false;
  kc::DeviceBuffer<int32_t> positions_d;            // [N] packed examples (when given)
  const int32_t* pos_d = nullptr;                   // positions_d of this call, or nullptr
  // backward scratch
  kc::DeviceBuffer<T> dres, dxn;       // [N, C]
  kc::DeviceBuffer<T> datt, dq;        // [N, H*D]
  kc::DeviceBuffer<T> dk, dv;          // [N, G*D]
  kc::DeviceBuffer<T> dh, dgate, dup;  // [N, W] (device_swiglu_width: dense MLP, shared expert)
  kc::DeviceBuffer<float> attn_delta;  // [B, H, T]
  kc::DeviceBuffer<float> norm_partial;  // [kHeadNormChunks * D] the q/k norm's dw partials
  // The Gated DeltaNet layers' scratch (device_linear.cpp; DeviceLinearSizes)
  kc::DeviceBuffer<T> lin_rows, lin_drows;      // [N, Cc] conv output / d q|k|v; d conv input
  kc::DeviceBuffer<T> lin_dy, lin_dout, lin_dz;  // [N, VD] d out_proj input (then d v), d out, d z
  kc::DeviceBuffer<T> lin_dq, lin_dk;            // [N, KD]
  kc::DeviceBuffer<T> lin_da, lin_db;            // [N, Hv] (lin_db: b's output in the forward)
  kc::DeviceBuffer<float> lin_dg, lin_dbeta;     // [N, Hv]
  kc::DeviceBuffer<float> lin_partial;           // the parameter gradients' row chunks
  kc::DeviceBuffer<float> lin_scratch;           // the rule's backward scratch
  kc::DeviceBuffer<T> qgate;  // [N, 2 H D] output gate: q_proj's [query | gate] (and gradient),
                              // o_proj's input att * sigmoid(gate) (DeviceWorkspaceSizes)
  // Mixture of experts (device_moe.cpp; empty without experts), sizes DeviceMoeSizes:
  kc::DeviceBuffer<T> rlogits;          // [N, E]  router logits, then their gradient
  kc::DeviceBuffer<T> moe_rows;         // [S, C]  experts' backward scratch (permuted dy, dx),
                                        //         then the shared expert's d y [N, C]
  kc::DeviceBuffer<T> moe_dh;           // [S, I_e] experts' backward scratch (permuted dh)
  kc::DeviceBuffer<float> moe_dw;       // [S]     d loss / d routing weights, then the
                                        //         shared expert's d gate logit [N]
  kc::DeviceBuffer<float> aux_dprob;    // [E]     d (coef aux) / d p of every row
  kc::DeviceBuffer<double> router_sums; // [2E]    the pass's tokens | probability sums
  kc::DeviceBuffer<int32_t> plan_scratch;  // [moe_plan_scratch(S, E)]
  detail::MoeHost moe_host;             // pinned: expert ranges, probability sums, dprob
  // Expert parallelism (device_moe_ep.cpp; DeviceModel::set_expert_group): the group of P
  // ranks (null: none), scratch grown on demand (R rows received, up to P S).
  comm::Comm* expert_group = nullptr;
  kc::DeviceBuffer<T> ep_send, ep_recv;      // [max(S, R), C] the rows of one exchange
  kc::DeviceBuffer<float> ep_dw;             // [R] d loss / d (weight 1) of received rows, unused
  kc::DeviceBuffer<int64_t> ep_counts;       // [2 P L] counts sent | received (device group)
  kc::PinnedBuffer<int64_t> ep_counts_h;     // [2 P L] their host ends
  kc::PinnedBuffer<int32_t> ep_plan_h;       // [2 R] the local plan's perm | pos, uploaded
  kc::PinnedBuffer<uint8_t> ep_stage_send, ep_stage_recv;  // host group: the rows via host
  std::vector<comm::Handle> ep_pending;      // device group: exchanges the stream waits for
  RouterStats router;                   // the last forward_trunk_and_norm's (router_stats)
  bool count_router = false;            // inside forward_trunk_and_norm: blocks add to router
  detail::DeviceLora<T, G> lora;       // adapters (bind_lora): the base is frozen when bound
  bool training = false;               // inside loss_and_grad (LoRA dropout applies)
  RowObjective objective;              // set_row_objective (empty: mean cross-entropy)

  Impl(const ParamLayout& l, cudaStream_t s)
      : cfg(l.config()),
        layout(l),
        stream(s),
        stage(s),
        params(static_cast<size_t>(layout.num_units()), nullptr),
        grads(static_cast<size_t>(layout.num_units()), nullptr),
        totals(1),
        lora(cfg, gemm, s) {
    cfg.validate();
    const int64_t D = cfg.head_dim();
    if (!kc::attention_head_dim_supported(D))
      throw InputError(strf("head dim %lld (hidden %lld / heads %lld) has no CUDA attention "
                            "kernel",
                            static_cast<long long>(D), static_cast<long long>(cfg.hidden),
                            static_cast<long long>(cfg.heads)),
                       "zt's CUDA attention supports head dims 16, 32, 48, 64, 80, 96, 100, "
                       "112, 128 and 256 (cuDNN's fused attention, where it loads, takes the bf16 "
                       "ones that are multiples of 8 up to 128).");
    log::info("attention on the GPU: " +
              kc::attention_backend_summary(std::is_same_v<T, kc::bf16_t>, D));
    upload_rope(rope_cos, rope_sin, cfg.rope_theta, cfg.rope_scaling);
    if (cfg.rope_local_theta > 0)  // the sliding layers' own RoPE, without scaling
      upload_rope(local_cos, local_sin, cfg.rope_local_theta, kernels::RopeScaling{});
  }

  // The tables [context, R/2] of one RoPE (base theta, scaling s), built on the host; R =
  // Config::rotary_dim (partial RoPE: the first R dims of a head rotate). Qwen3.5's
  // multimodal RoPE over text (three equal positions) is this plain RoPE, as on the CPU.
  void upload_rope(kc::DeviceBuffer<float>& cos, kc::DeviceBuffer<float>& sin, double theta,
                   const kernels::RopeScaling& s) {
    std::vector<float> cs(DeviceWorkspaceSizes::of(cfg, 0).rope);  // [context, R/2]
    std::vector<float> sn(cs.size());
    kernels::cpu::rope_table<float>(cs.data(), sn.data(), cfg.context, cfg.rotary_dim(), theta, s);
    cos = kc::DeviceBuffer<float>(cs.size());
    sin = kc::DeviceBuffer<float>(sn.size());
    cos.upload(cs);
    sin.upload(sn);
  }
  // Layer l's RoPE tables (cos, sin): its type's (the per-layer schedule, Config::local_rope).
  std::pair<const float*, const float*> rope_of(int l) const {
    return cfg.local_rope(l) ? std::pair{local_cos.data(), local_sin.data()}
                             : std::pair{rope_cos.data(), rope_sin.data()};
  }
  // The embeddings' factor: sqrt(hidden) rounded to T (Gemma: transformers multiplies by a
  // tensor of the model's dtype), else 1 (the CPU model's embed_factor).
  float embed_factor() const {
    if (!cfg.embed_scale()) return 1.0f;
    const float f = std::sqrt(static_cast<float>(cfg.hidden));
    return std::is_same_v<T, kc::bf16_t> ? static_cast<float>(zt::bf16(f)) : f;
  }
  // rows of `width` elements from src (a row every spitch elements) to dst (every dpitch):
  // the output gate's halves of q_proj's rows [query | gate].
  void copy_rows(T* dst, int64_t dpitch, const T* src, int64_t spitch, int64_t width,
                 int64_t rows) {
    ZT_CUDA_CHECK(cudaMemcpy2DAsync(dst, static_cast<size_t>(dpitch) * sizeof(T), src,
                                    static_cast<size_t>(spitch) * sizeof(T),
                                    static_cast<size_t>(width) * sizeof(T),
                                    static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream));
  }
  // x [n] *= s, skipped when s == 1 (query_pre_attn_scalar, the embedding scale).
  void scale_by(T* x, int64_t n, double s) {
    if (s != 1.0) kc::scale_inplace<T>(x, n, static_cast<float>(s), stream);
  }

  // Per-block activations for N rows in Q chunk rows (delta_chunk_rows; allocated by the
  // first step without recompute).
  void ensure_all_acts(int64_t N, int64_t Q) {
    if (N <= acts_rows && Q <= acts_chunks) return;
    N = std::max(N, acts_rows);
    Q = std::max(Q, acts_chunks);
    acts.clear();
    for (int64_t l = 0; l < cfg.layers; ++l) acts.emplace_back(cfg, N, l, Q);  // each its own
    acts_rows = N;
    acts_chunks = Q;
  }

  // Grows the workspace to N rows and Q chunk rows (no-op once the largest shape has been
  // seen).
  void ensure(int64_t N, int64_t Q) {
    if (N <= capacity && Q <= chunk_capacity) return;
    N = std::max(N, capacity);
    Q = std::max(Q, chunk_capacity);
    // Sizes from the shared formula (zt/model/device_workspace.hpp), which zt estimate uses.
    const DeviceWorkspaceSizes z = DeviceWorkspaceSizes::of(cfg, N, Q);
    shared.clear();
    shared.emplace_back(cfg, N, -1, Q);
    xs = kc::DeviceBuffer<T>(z.xs);
    delta = kc::DeviceBuffer<T>(z.rows_c);
    xf = kc::DeviceBuffer<T>(z.rows_c);
    rstd_f = kc::DeviceBuffer<float>(z.rows);
    logits = kc::DeviceBuffer<T>(z.logits);
    row_loss = kc::DeviceBuffer<float>(z.rows);
    tokens_d = kc::DeviceBuffer<int32_t>(z.rows);
    targets_d = kc::DeviceBuffer<int32_t>(z.rows);
    context_d = kc::DeviceBuffer<int32_t>(z.rows);
    positions_d = kc::DeviceBuffer<int32_t>(z.rows);
    dres = kc::DeviceBuffer<T>(z.rows_c);
    dxn = kc::DeviceBuffer<T>(z.rows_c);
    datt = kc::DeviceBuffer<T>(z.hd);
    dq = kc::DeviceBuffer<T>(z.hd);
    dk = kc::DeviceBuffer<T>(z.gd);
    dv = kc::DeviceBuffer<T>(z.gd);
    dh = kc::DeviceBuffer<T>(z.ni);
    dgate = kc::DeviceBuffer<T>(z.ni);
    dup = kc::DeviceBuffer<T>(z.ni);
    attn_delta = kc::DeviceBuffer<float>(z.heads_rows);
    capped = kc::DeviceBuffer<T>(z.capped);
    dsink_f = kc::DeviceBuffer<float>(z.sinks);
    dsink_t = kc::DeviceBuffer<T>(z.sinks);
    norm_partial = kc::DeviceBuffer<float>(z.norm_partial);
    qgate = kc::DeviceBuffer<T>(z.qgate);
    moe_ensure(z.moe);
    linear_ensure(z.linear);
    lora.ensure(N);
    capacity = N;
    chunk_capacity = Q;
  }

  void use(int u) {
    // A layout without the targeted W (QLoRA's) has them only in the NF4 base.
    if (layout.left_out() != 0 && !lora.has_qlora())
      throw std::logic_error(
          "DeviceModel: a layout without the targeted W (QLoRA's) used "
          "before bind_qlora: the model reads those W from the NF4 base");
    if (hooks.before_use) hooks.before_use(u);
    if (!params[static_cast<size_t>(u)])
      throw Error(strf("parameter unit %d (%s) is not bound", u, layout.unit(u).name.c_str()),
                  "call DeviceModel::bind_unit for every unit first.");
  }
  void done(int u) {
    if (hooks.after_use) hooks.after_use(u);
  }
  void ready(int u) {
    if (hooks.grad_ready) hooks.grad_ready(u);
  }
  // y [N, out] = x W^T (+ b [out] when b is not null), plus the LoRA adapter of (layer, t)
  // when one is bound (with QLoRA W is dequantised from the NF4 base first:
  // DeviceLora::weight). The CPU model's order (model_impl.hpp): GEMM, bias, adapter.
  void proj_forward(int layer, LoraTarget t, T* y, const T* x, const T* W, int64_t N, int64_t in,
                    int64_t out, const T* b = nullptr) {
    kc::linear_forward<T>(gemm, y, x, lora.weight(layer, t, W), N, in, out, stream);
    if (b) kc::bias_forward<T>(y, b, N, out, stream);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.forward(*a, y, x, N, training);
  }
  // The backward of proj_forward: dx as linear_backward; dW (and db [out]) only when the
  // base is not frozen (nullptr: no dW GEMM, no bias kernel); the adapter's gradients into
  // its grads.
  void proj_backward(int layer, LoraTarget t, T* dx, G* dW, const T* dy, const T* x, const T* W,
                     int64_t N, int64_t in, int64_t out, bool accumulate_dx, G* db = nullptr) {
    kc::linear_backward<T, G>(gemm, dx, dW, dy, x, lora.weight(layer, t, W), N, in, out,
                              accumulate_dx, stream);
    if (db) kc::bias_backward<T, G>(db, dy, N, out, stream);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.backward(*a, dx, dy, x, N, training);
  }
  // The gradient of the parameters at offset `off` of unit u: nullptr when LoRA freezes
  // the base (the kernels then skip that gradient).
  G* base_grad(int u, int64_t off) { return lora.bound() ? nullptr : grad_of(u) + off; }
  // The same for a tensor the block may lack (off < 0: nullptr).
  G* bias_grad(int u, int64_t off) { return off < 0 ? nullptr : base_grad(u, off); }

  G* grad_of(int u) {
    G* g = grads[static_cast<size_t>(u)];
    if (!g)
      throw Error(
          strf("gradient buffer of unit %d (%s) is not bound", u, layout.unit(u).name.c_str()),
          "loss_and_grad needs bind_unit(u, params, grads) with a gradient buffer.");
    return g;
  }

  T* x_at(int l, int64_t N) { return xs.data() + static_cast<int64_t>(l) * N * cfg.hidden; }
  const T* lm_head_w() const {
    return cfg.tied_embeddings
               ? params[0]
               : params[static_cast<size_t>(layout.head_unit())] + layout.lm_head_offset();
  }

  // Checks the shape and the ids on the host (kernels cannot throw) and uploads them.
  void upload_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                    int64_t Tn, std::span<const int32_t> positions = {});

  // Block l into the activations a. Its input x_l = base + pending (pending == nullptr
  // when x_l is already in xs[l]: block 0, and recompute) is formed and normalised by one
  // fused kernel and stored in xs[l]. Leaves x_mid in a.x_mid and, with_down, the down
  // projection in `delta` (the recompute in the backward needs nothing after h).
  void block_forward(int l, const T* base, const T* pending, detail::DeviceBlockActs<T>& a,
                     int64_t B, int64_t Tn, bool with_down);
  // The attention half of block l (device_block.cpp): a.xn1 -> delta = o_proj(att) (Gemma:
  // its norm), the activations into a; its backward dres -> dxn written (dL/d a.xn1).
  void attn_forward(int l, const T* p, detail::DeviceBlockActs<T>& a, int64_t B, int64_t Tn);
  void attn_backward(int l, int u, const T* p, detail::DeviceBlockActs<T>& a, int64_t B,
                     int64_t Tn);
  // ---- Qwen3.5's Gated DeltaNet mixer (device_linear.cpp), a Config::linear layer's
  // instead of the attention: the same contract as attn_forward / attn_backward.
  void linear_ensure(const DeviceLinearSizes& z);
  void linear_forward(int l, const T* p, detail::DeviceBlockActs<T>& a, int64_t B, int64_t Tn);
  void linear_backward(int l, int u, const T* p, detail::DeviceBlockActs<T>& a, int64_t B,
                       int64_t Tn);
  // Layer l's q projection of a.xn1 into q [N, H*D]; with the output gate (Qwen3.5)
  // q_proj's [N, H, 2D] lands in qgate, its query halves go to q, its gate halves to a.ogate.
  void q_forward(int l, T* q, const T* p, detail::DeviceBlockActs<T>& a, int64_t N);
  // o_proj's input: a.att, or with the output gate a.att * sigmoid(a.ogate) in qgate.
  const T* attn_o_input(detail::DeviceBlockActs<T>& a, int64_t N);
  // ---- the mixture-of-experts MLP (device_moe.cpp) ----
  // The MoE buffers of DeviceMoeSizes z (called by ensure; pinned host memory once).
  void moe_ensure(const DeviceMoeSizes& z);
  // a.xn2 [N, C] -> delta [N, C] = the routed experts' weighted sum, the activations into
  // a (router choice, plan, MoeActs), then qwen2_moe's shared expert added (its SwiGLU in
  // a.gate, a.up, a.h; a.sy, a.sg). Waits once for the plan's expert ranges (the GEMM
  // sizes; comm::wait_stream). Inside forward_trunk_and_norm the routing adds to `router`.
  void moe_forward(int l, const T* p, detail::DeviceBlockActs<T>& a, int64_t N);
  // gpt-oss's expert biases and clamped SwiGLU of block offsets o (defaults: Mixtral's).
  kc::MoeExpertExtras<T> expert_extras(const T* p, const BlockOffsets& o);
  // dres [N, C] (dL/d delta) -> dxn [N, C] written: dL/d a.xn2; the router's and the
  // experts' gradients into unit u's (none when frozen); the aux loss's d/dp (aux_dprob,
  // moe_aux_begin) enters every row's router with router_aux_loss; then the shared
  // expert's backward adds to dxn (moe_rows, moe_dw, dh, dgate, dup its scratch).
  void moe_backward(int l, int u, const T* p, detail::DeviceBlockActs<T>& a, int64_t N);
  // qwen2_moe's shared expert (device_moe.cpp), after the routed experts: its forward adds
  // to delta, its backward to dxn (from dres), its gradients into unit u's.
  void shared_expert_forward(const T* p, const BlockOffsets& o, detail::DeviceBlockActs<T>& a,
                             int64_t N);
  void shared_expert_backward(int u, const T* p, const BlockOffsets& o,
                              detail::DeviceBlockActs<T>& a, int64_t N);
  // ---- expert parallelism (device_moe_ep.cpp), inside moe_forward / moe_backward ----
  // After the plan (a.offsets over the E experts): the rows to the experts' ranks, this
  // rank's experts on what it received (block offsets o; gpt-oss's extras: expert_extras),
  // the outputs back and combined into delta [N, C].
  void ep_experts_forward(const T* p, const BlockOffsets& o, detail::DeviceBlockActs<T>& a,
                          int64_t N);
  // dres [N, C] -> dxn [N, C] written (the experts' part), moe_dw [S] written; this rank's
  // experts' gradients, their biases' too (over the group's rows), into unit u's.
  void ep_experts_backward(int u, const T* p, const BlockOffsets& o,
                           detail::DeviceBlockActs<T>& a, int64_t N);
  // rows of `width` T from send (out_rows[q] to rank q, in rank order) into recv (in_rows[q]
  // from rank q), device buffers; ordered on the stream.
  void ep_exchange(const T* send, const std::vector<size_t>& out_rows, T* recv,
                   const std::vector<size_t>& in_rows, int64_t width);
  // [P, L] counts to each (rank, local expert) -> [P, L] received from each.
  std::vector<int64_t> ep_exchange_counts(const std::vector<int64_t>& send);
  // Waits for the device group's exchanges (their errors surface here).
  void ep_settle();
  void set_expert_group(comm::Comm* group);

  // A forward_trunk_and_norm's statistics: begin zeroes them and counts the blocks'
  // routing; end stops counting and enqueues the copy of the probability sums to the host.
  void moe_stats_begin();
  void moe_stats_end();
  // After forward_trunk_and_norm: with router_aux_loss, d (coef aux) / d p (scaled by
  // grad_scale) computed on the host from the tokens per expert and uploaded to aux_dprob.
  void moe_aux_begin(double grad_scale);
  // After the pass's last wait (the probability sums are on the host): router.aux, and
  // coef * aux with router_aux_loss, else 0 (the term the loss adds, as Model's).
  double moe_aux_term();

  // Block l backward: dres [N, C] holds dL/dx_{l+1} on entry and dL/dx_l on exit.
  void block_backward(int l, detail::DeviceBlockActs<T>& a, int64_t B, int64_t Tn);

  // Embedding, every block and the final norm: xf [N, C] normalised, xs[L] = x_L. With
  // keep_all each block's activations go to acts[l], else all share one set.
  void forward_trunk_and_norm(int64_t B, int64_t Tn, bool keep_all);
  void use_head() {
    use(layout.head_unit());
    if (cfg.tied_embeddings) use(0);
  }
  void done_head() {
    if (cfg.tied_embeddings) done(0);
    done(layout.head_unit());
  }

  kc::CrossEntropyTotals read_totals();
  // Per-row sums of the logits' log-probabilities (device_objective.cpp): logp[b] = the
  // summed log-probability of row b's targets >= 0, count[b] their number (host [B]).
  void row_sums(int64_t B, int64_t Tn, std::span<double> logp, std::span<int64_t> count);
  // The row objective's backward at the head: its value, and dlogits written over the
  // logits, row b's scaled by -grad_scale * dlogp[b] (Model's objective_backward).
  double objective_backward(int64_t B, int64_t Tn, double grad_scale);
  void row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                 int64_t Tn, std::span<const int32_t> positions, std::span<double> logp,
                 std::span<int64_t> count);
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                       int64_t Tn, bool recompute, double grad_scale,
                       std::span<const int32_t> positions);
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t Tn, std::span<const int32_t> positions);
  void logits_last(std::span<const int32_t> tokens, int64_t Tn, T* out);
  size_t workspace_bytes() const {
    size_t b = rope_cos.bytes() + rope_sin.bytes() + local_cos.bytes() + local_sin.bytes() +
               capped.bytes() + dsink_f.bytes() + dsink_t.bytes() + xs.bytes() + delta.bytes() +
               xf.bytes() +
               rstd_f.bytes() + logits.bytes() + row_loss.bytes() + totals.bytes() +
               tokens_d.bytes() + targets_d.bytes() + context_d.bytes() + positions_d.bytes() + dres.bytes() +
               dxn.bytes() + datt.bytes() + dq.bytes() + dk.bytes() + dv.bytes() + dh.bytes() +
               dgate.bytes() + dup.bytes() + attn_delta.bytes() + norm_partial.bytes() +
               rlogits.bytes() + moe_rows.bytes() + moe_dh.bytes() + moe_dw.bytes() +
               aux_dprob.bytes() + router_sums.bytes() + plan_scratch.bytes() +
               ep_send.bytes() + ep_recv.bytes() + ep_dw.bytes() + ep_counts.bytes() +
               qgate.bytes() + lin_rows.bytes() + lin_drows.bytes() + lin_dy.bytes() +
               lin_dout.bytes() + lin_dz.bytes() + lin_dq.bytes() + lin_dk.bytes() +
               lin_da.bytes() + lin_db.bytes() + lin_dg.bytes() + lin_dbeta.bytes() +
               lin_partial.bytes() + lin_scratch.bytes() + lora.workspace_bytes();
    for (const auto& a : shared) b += a.bytes();
    for (const auto& a : acts) b += a.bytes();
    return b;
  }
};

}  // namespace zt::model
