// The Llama-style decoder on one GPU: forward and backward over per-unit device parameter
// spans with the CUDA kernels (see zt/model/device_model.hpp). Mirrors src/model/model.cpp
// op for op, with the residual adds fused into the RMSNorms and attention keeping the
// log-sum-exp instead of the probabilities. Shapes: B batch, T sequence, N = B*T rows,
// C hidden, H heads, G kv heads, D head_dim, I intermediate, V vocab, L layers.
#include "zt/model/device_model.hpp"

#include <optional>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "device_lora.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cpu.hpp"
#include "zt/kernels/cuda/cuda.hpp"
#include "zt/model/device_workspace.hpp"

namespace zt::model {

namespace kc = zt::kernels::cuda;
using kc::DeviceBuffer;

namespace {

static_assert(sizeof(kc::CrossEntropyTotals) == DeviceWorkspaceSizes::kTotalsBytes,
              "DeviceWorkspaceSizes counts one CrossEntropyTotals");

// One block's activations, kept from its forward for its backward.
template <class T>
struct DeviceBlockActs {
  DeviceBuffer<T> xn1;        // [N, C]     input_layernorm(x_in)
  DeviceBuffer<float> rstd1;  // [N]
  DeviceBuffer<T> q;          // [N, H*D]   after RoPE
  DeviceBuffer<T> k;          // [N, G*D]   after RoPE
  DeviceBuffer<T> v;          // [N, G*D]
  DeviceBuffer<T> att;        // [N, H*D]   attention output, before o_proj
  DeviceBuffer<float> lse;    // [B, H, T]  attention log-sum-exp
  DeviceBuffer<T> x_mid;      // [N, C]     x_in + o_proj(att)
  DeviceBuffer<T> xn2;        // [N, C]     post_attention_layernorm(x_mid)
  DeviceBuffer<float> rstd2;  // [N]
  DeviceBuffer<T> gate;       // [N, I]
  DeviceBuffer<T> up;         // [N, I]
  DeviceBuffer<T> h;          // [N, I]     silu(gate) * up

  // Sizes from the shared formula (zt/model/device_workspace.hpp), which zt estimate uses.
  DeviceBlockActs(const Config& c, int64_t N) {
    const DeviceBlockSizes z = DeviceBlockSizes::of(c, N);
    xn1 = DeviceBuffer<T>(z.xn1);
    rstd1 = DeviceBuffer<float>(z.rstd1);
    q = DeviceBuffer<T>(z.q);
    k = DeviceBuffer<T>(z.k);
    v = DeviceBuffer<T>(z.v);
    att = DeviceBuffer<T>(z.att);
    lse = DeviceBuffer<float>(z.lse);
    x_mid = DeviceBuffer<T>(z.x_mid);
    xn2 = DeviceBuffer<T>(z.xn2);
    rstd2 = DeviceBuffer<float>(z.rstd2);
    gate = DeviceBuffer<T>(z.gate);
    up = DeviceBuffer<T>(z.up);
    h = DeviceBuffer<T>(z.h);
  }
  size_t bytes() const {
    return xn1.bytes() + rstd1.bytes() + q.bytes() + k.bytes() + v.bytes() + att.bytes() +
           lse.bytes() + x_mid.bytes() + xn2.bytes() + rstd2.bytes() + gate.bytes() +
           up.bytes() + h.bytes();
  }
};

}  // namespace

template <class T, class G>
struct DeviceModel<T, G>::Impl {
  Config cfg;
  ParamLayout layout;
  cudaStream_t stream;
  kc::Gemm gemm;
  std::vector<const T*> params;  // per unit, device
  std::vector<G*> grads;         // per unit, device (nullptr when unbound)
  UnitHooks hooks;

  int64_t capacity = 0;                     // rows N the workspace holds
  DeviceBuffer<float> rope_cos, rope_sin;   // [context, D/2]
  DeviceBuffer<T> xs;                       // [L+1, N, C] block inputs + final hidden state
  std::vector<DeviceBlockActs<T>> shared;   // [1]: forward-only use and recompute
  std::vector<DeviceBlockActs<T>> acts;     // [L]: a step without recompute keeps every block's
  int64_t acts_rows = 0;                    // rows the per-block activations hold
  DeviceBuffer<T> delta;                    // [N, C] o_proj or down_proj output, pending add
  DeviceBuffer<T> xf;                       // [N, C] final norm output
  DeviceBuffer<float> rstd_f;               // [N]
  DeviceBuffer<T> logits;                   // [N, V] logits, then dlogits (in place)
  DeviceBuffer<float> row_loss;             // [N]
  DeviceBuffer<kc::CrossEntropyTotals> totals;  // [1]
  DeviceBuffer<int32_t> tokens_d, targets_d;    // [N]
  DeviceBuffer<int32_t> positions_d;            // [N] packed examples (when given)
  const int32_t* pos_d = nullptr;               // positions_d of this call, or nullptr
  // backward scratch
  DeviceBuffer<T> dres, dxn;                // [N, C]
  DeviceBuffer<T> datt, dq;                 // [N, H*D]
  DeviceBuffer<T> dk, dv;                   // [N, G*D]
  DeviceBuffer<T> dh, dgate, dup;           // [N, I]
  DeviceBuffer<float> attn_delta;           // [B, H, T]
  detail::DeviceLora<T, G> lora;            // adapters (bind_lora): the base is frozen when bound
  bool training = false;                    // inside loss_and_grad (LoRA dropout applies)

  Impl(const ParamLayout& l, cudaStream_t s)
      : cfg(l.config()), layout(l), stream(s),
        params(static_cast<size_t>(layout.num_units()), nullptr),
        grads(static_cast<size_t>(layout.num_units()), nullptr), totals(1),
        lora(cfg, gemm, s) {
    cfg.validate();
    const int64_t D = cfg.head_dim();
    if (!kc::attention_head_dim_supported(D))
      throw InputError(strf("head dim %lld (hidden %lld / heads %lld) has no CUDA attention "
                            "kernel",
                            static_cast<long long>(D), static_cast<long long>(cfg.hidden),
                            static_cast<long long>(cfg.heads)),
                       "zt's CUDA attention supports head dims 16, 32, 64, 80, 96, 100 and "
                       "128 (cuDNN's fused attention, where it loads, takes the bf16 ones that "
                       "are multiples of 8).");
    log::info("attention on the GPU: " +
              kc::attention_backend_summary(std::is_same_v<T, kc::bf16_t>, D));
    std::vector<float> cs(DeviceWorkspaceSizes::of(cfg, 0).rope);  // [context, D/2]
    std::vector<float> sn(cs.size());
    kernels::cpu::rope_table<float>(cs.data(), sn.data(), cfg.context, D, cfg.rope_theta,
                                      cfg.rope_scaling);
    rope_cos = DeviceBuffer<float>(cs.size());
    rope_sin = DeviceBuffer<float>(sn.size());
    rope_cos.upload(cs);
    rope_sin.upload(sn);
  }

  // Per-block activations for N rows (allocated by the first step without recompute).
  void ensure_all_acts(int64_t N) {
    if (N <= acts_rows) return;
    acts.clear();
    for (int64_t l = 0; l < cfg.layers; ++l) acts.emplace_back(cfg, N);
    acts_rows = N;
  }

  // Grows the workspace to N rows (no-op once the largest shape has been seen).
  void ensure(int64_t N) {
    if (N <= capacity) return;
    // Sizes from the shared formula (zt/model/device_workspace.hpp), which zt estimate uses.
    const DeviceWorkspaceSizes z = DeviceWorkspaceSizes::of(cfg, N);
    shared.clear();
    shared.emplace_back(cfg, N);
    xs = DeviceBuffer<T>(z.xs);
    delta = DeviceBuffer<T>(z.rows_c);
    xf = DeviceBuffer<T>(z.rows_c);
    rstd_f = DeviceBuffer<float>(z.rows);
    logits = DeviceBuffer<T>(z.logits);
    row_loss = DeviceBuffer<float>(z.rows);
    tokens_d = DeviceBuffer<int32_t>(z.rows);
    targets_d = DeviceBuffer<int32_t>(z.rows);
    positions_d = DeviceBuffer<int32_t>(z.rows);
    dres = DeviceBuffer<T>(z.rows_c);
    dxn = DeviceBuffer<T>(z.rows_c);
    datt = DeviceBuffer<T>(z.hd);
    dq = DeviceBuffer<T>(z.hd);
    dk = DeviceBuffer<T>(z.gd);
    dv = DeviceBuffer<T>(z.gd);
    dh = DeviceBuffer<T>(z.ni);
    dgate = DeviceBuffer<T>(z.ni);
    dup = DeviceBuffer<T>(z.ni);
    attn_delta = DeviceBuffer<float>(z.heads_rows);
    lora.ensure(N);
    capacity = N;
  }

  void use(int u) {
    // A layout without the targeted W (QLoRA's) has them only in the NF4 base.
    if (layout.left_out() != 0 && !lora.has_qlora())
      throw std::logic_error("DeviceModel: a layout without the targeted W (QLoRA's) used "
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
  // y [N, out] = x W^T, plus the LoRA adapter of (layer, t) when one is bound (with QLoRA
  // W is dequantised from the NF4 base first: DeviceLora::weight).
  void proj_forward(int layer, LoraTarget t, T* y, const T* x, const T* W, int64_t N,
                    int64_t in, int64_t out) {
    kc::linear_forward<T>(gemm, y, x, lora.weight(layer, t, W), N, in, out, stream);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.forward(*a, y, x, N, training);
  }
  // The backward of proj_forward: dx as linear_backward; dW only when the base is not
  // frozen (nullptr: no dW GEMM); the adapter's gradients into its grads.
  void proj_backward(int layer, LoraTarget t, T* dx, G* dW, const T* dy, const T* x, const T* W,
                     int64_t N, int64_t in, int64_t out, bool accumulate_dx) {
    kc::linear_backward<T, G>(gemm, dx, dW, dy, x, lora.weight(layer, t, W), N, in, out,
                              accumulate_dx, stream);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.backward(*a, dx, dy, x, N, training);
  }
  // The gradient of the parameters at offset `off` of unit u: nullptr when LoRA freezes
  // the base (the kernels then skip that gradient).
  G* base_grad(int u, int64_t off) { return lora.bound() ? nullptr : grad_of(u) + off; }

  G* grad_of(int u) {
    G* g = grads[static_cast<size_t>(u)];
    if (!g)
      throw Error(strf("gradient buffer of unit %d (%s) is not bound", u,
                       layout.unit(u).name.c_str()),
                  "loss_and_grad needs bind_unit(u, params, grads) with a gradient buffer.");
    return g;
  }

  // Checks the shape and the ids on the host (kernels cannot throw) and uploads them.
  void upload_batch(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                    int64_t Tn, std::span<const int32_t> positions = {}) {
    if (B <= 0 || Tn <= 0 || Tn > cfg.context)
      throw InputError(strf("batch %lld x sequence %lld (context %lld)",
                            static_cast<long long>(B), static_cast<long long>(Tn),
                            static_cast<long long>(cfg.context)),
                       "B and T must be > 0 and T <= model.context.");
    const int64_t N = B * Tn;
    if (static_cast<int64_t>(tokens.size()) != N || static_cast<int64_t>(targets.size()) != N)
      throw InputError(strf("tokens/targets hold %zu/%zu ids, expected B*T = %lld", tokens.size(),
                            targets.size(), static_cast<long long>(N)),
                       "tokens and targets are [B, T] row-major.");
    for (int64_t n = 0; n < N; ++n) {
      if (tokens[n] < 0 || tokens[n] >= cfg.vocab || targets[n] >= cfg.vocab)
        throw InputError(strf("token %d / target %d at position %lld is outside the vocabulary "
                              "[0, %lld)",
                              tokens[n], targets[n], static_cast<long long>(n),
                              static_cast<long long>(cfg.vocab)),
                         "the data was tokenized for a different vocabulary; targets < 0 "
                         "are ignored, others must be < vocab.");
    }
    check_positions(positions, B, Tn);
    ensure(N);
    ZT_CUDA_CHECK(cudaMemcpyAsync(tokens_d.data(), tokens.data(), N * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream));
    pos_d = nullptr;
    if (!positions.empty()) {
      ZT_CUDA_CHECK(cudaMemcpyAsync(positions_d.data(), positions.data(), N * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream));
      pos_d = positions_d.data();
    }
    ZT_CUDA_CHECK(cudaMemcpyAsync(targets_d.data(), targets.data(), N * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, stream));
  }

  T* x_at(int l, int64_t N) { return xs.data() + static_cast<int64_t>(l) * N * cfg.hidden; }
  const T* lm_head_w() const {
    return cfg.tied_embeddings ? params[0]
                               : params[static_cast<size_t>(layout.head_unit())] +
                                     layout.lm_head_offset();
  }

  // Block l into the activations a. Its input x_l = base + pending (pending == nullptr
  // when x_l is already in xs[l]: block 0, and recompute) is formed and normalised by one
  // fused kernel and stored in xs[l]. Leaves x_mid in a.x_mid and, with_down, the down
  // projection in `delta` (the recompute in the backward needs nothing after h).
  void block_forward(int l, const T* base, const T* pending, DeviceBlockActs<T>& a, int64_t B,
                     int64_t Tn, bool with_down) {
    const int64_t N = B * Tn, C = cfg.hidden, I = cfg.intermediate;
    const int64_t H = cfg.heads, Gk = cfg.kv_heads, D = cfg.head_dim();
    const T* p = params[static_cast<size_t>(layout.block_unit(l))];
    const BlockOffsets& o = layout.block_offsets();
    T* x_in = x_at(l, N);
    kc::residual_rmsnorm_forward<T>(a.xn1.data(), a.rstd1.data(), x_in, base, pending,
                                    p + o.input_norm, N, C, cfg.norm_eps, stream);
    proj_forward(l, LoraTarget::kQ, a.q.data(), a.xn1.data(), p + o.q, N, C, H * D);
    proj_forward(l, LoraTarget::kK, a.k.data(), a.xn1.data(), p + o.k, N, C, Gk * D);
    proj_forward(l, LoraTarget::kV, a.v.data(), a.xn1.data(), p + o.v, N, C, Gk * D);
    kc::rope_forward<T>(a.q.data(), rope_cos.data(), rope_sin.data(), B, Tn, H, D, stream, pos_d);
    kc::rope_forward<T>(a.k.data(), rope_cos.data(), rope_sin.data(), B, Tn, Gk, D, stream, pos_d);
    kc::attention_forward<T>(a.att.data(), a.lse.data(), a.q.data(), a.k.data(), a.v.data(), B,
                             Tn, H, Gk, D, stream, pos_d);
    proj_forward(l, LoraTarget::kO, delta.data(), a.att.data(), p + o.o, N, H * D, C);
    kc::residual_rmsnorm_forward<T>(a.xn2.data(), a.rstd2.data(), a.x_mid.data(), x_in,
                                    delta.data(), p + o.post_norm, N, C, cfg.norm_eps, stream);
    proj_forward(l, LoraTarget::kGate, a.gate.data(), a.xn2.data(), p + o.gate, N, C, I);
    proj_forward(l, LoraTarget::kUp, a.up.data(), a.xn2.data(), p + o.up, N, C, I);
    kc::swiglu_forward<T>(a.h.data(), a.gate.data(), a.up.data(), N * I, stream);
    if (with_down)
      proj_forward(l, LoraTarget::kDown, delta.data(), a.h.data(), p + o.down, N, I, C);
  }

  // Block l backward: dres [N, C] holds dL/dx_{l+1} on entry and dL/dx_l on exit.
  void block_backward(int l, DeviceBlockActs<T>& a, int64_t B, int64_t Tn) {
    const int64_t N = B * Tn, C = cfg.hidden, I = cfg.intermediate;
    const int64_t H = cfg.heads, Gk = cfg.kv_heads, D = cfg.head_dim();
    const int u = layout.block_unit(l);
    const T* p = params[static_cast<size_t>(u)];
    const auto g = [&](int64_t off) { return base_grad(u, off); };  // nullptr: frozen
    const BlockOffsets& o = layout.block_offsets();
    const T* x_in = x_at(l, N);
    // MLP half: x_{l+1} = x_mid + down(h); dres passes through the residual unchanged.
    proj_backward(l, LoraTarget::kDown, dh.data(), g(o.down), dres.data(), a.h.data(),
                  p + o.down, N, I, C, /*accumulate_dx=*/false);
    kc::swiglu_backward<T>(dgate.data(), dup.data(), dh.data(), a.gate.data(), a.up.data(),
                           N * I, /*accumulate=*/false, stream);
    proj_backward(l, LoraTarget::kGate, dxn.data(), g(o.gate), dgate.data(), a.xn2.data(),
                  p + o.gate, N, C, I, /*accumulate_dx=*/false);
    proj_backward(l, LoraTarget::kUp, dxn.data(), g(o.up), dup.data(), a.xn2.data(), p + o.up,
                  N, C, I, /*accumulate_dx=*/true);
    kc::rmsnorm_backward<T, G>(dres.data(), g(o.post_norm), dxn.data(), a.x_mid.data(),
                               p + o.post_norm, a.rstd2.data(), N, C, /*accumulate_dx=*/true,
                               stream);
    // attention half: x_mid = x_in + o_proj(att)
    proj_backward(l, LoraTarget::kO, datt.data(), g(o.o), dres.data(), a.att.data(), p + o.o,
                  N, H * D, C, /*accumulate_dx=*/false);
    kc::attention_backward<T>(dq.data(), dk.data(), dv.data(), attn_delta.data(), datt.data(),
                              a.att.data(), a.q.data(), a.k.data(), a.v.data(), a.lse.data(), B,
                              Tn, H, Gk, D, /*accumulate=*/false, stream, pos_d);
    kc::rope_backward<T>(dq.data(), rope_cos.data(), rope_sin.data(), B, Tn, H, D, stream, pos_d);
    kc::rope_backward<T>(dk.data(), rope_cos.data(), rope_sin.data(), B, Tn, Gk, D, stream, pos_d);
    proj_backward(l, LoraTarget::kQ, dxn.data(), g(o.q), dq.data(), a.xn1.data(), p + o.q, N, C,
                  H * D, /*accumulate_dx=*/false);
    proj_backward(l, LoraTarget::kK, dxn.data(), g(o.k), dk.data(), a.xn1.data(), p + o.k, N, C,
                  Gk * D, /*accumulate_dx=*/true);
    proj_backward(l, LoraTarget::kV, dxn.data(), g(o.v), dv.data(), a.xn1.data(), p + o.v, N, C,
                  Gk * D, /*accumulate_dx=*/true);
    kc::rmsnorm_backward<T, G>(dres.data(), g(o.input_norm), dxn.data(), x_in,
                               p + o.input_norm, a.rstd1.data(), N, C, /*accumulate_dx=*/true,
                               stream);
  }

  // Embedding, every block and the final norm: xf [N, C] normalised, xs[L] = x_L. With
  // keep_all each block's activations go to acts[l], else all share one set.
  void forward_trunk_and_norm(int64_t B, int64_t Tn, bool keep_all) {
    const int64_t N = B * Tn;
    use(0);
    kc::embedding_forward<T>(x_at(0, N), tokens_d.data(), params[0] + layout.embed_offset(), N,
                             cfg.vocab, cfg.hidden, nullptr, stream);
    done(0);
    const T* base = x_at(0, N);
    const T* pending = nullptr;
    for (int l = 0; l < static_cast<int>(cfg.layers); ++l) {
      const int u = layout.block_unit(l);
      use(u);
      DeviceBlockActs<T>& a = keep_all ? acts[static_cast<size_t>(l)] : shared[0];
      block_forward(l, base, pending, a, B, Tn, /*with_down=*/true);
      done(u);
      base = a.x_mid.data();
      pending = delta.data();
    }
    // the head's norm (the head unit is in use from here: see use_head)
    use_head();
    const T* ph = params[static_cast<size_t>(layout.head_unit())];
    kc::residual_rmsnorm_forward<T>(xf.data(), rstd_f.data(),
                                    x_at(static_cast<int>(cfg.layers), N), base, pending,
                                    ph + layout.final_norm_offset(), N, cfg.hidden, cfg.norm_eps,
                                    stream);
    proj_forward(-1, LoraTarget::kLmHead, logits.data(), xf.data(), lm_head_w(), N, cfg.hidden,
                 cfg.vocab);
  }

  void use_head() {
    use(layout.head_unit());
    if (cfg.tied_embeddings) use(0);
  }
  void done_head() {
    if (cfg.tied_embeddings) done(0);
    done(layout.head_unit());
  }

  kc::CrossEntropyTotals read_totals() {
    kc::CrossEntropyTotals t{};
    ZT_CUDA_CHECK(cudaMemcpyAsync(&t, totals.data(), sizeof t, cudaMemcpyDeviceToHost, stream));
    ZT_CUDA_CHECK(cudaStreamSynchronize(stream));
    return t;
  }

  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       int64_t B, int64_t Tn, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) {
    upload_batch(tokens, targets, B, Tn, positions);
    if (!recompute) ensure_all_acts(B * Tn);
    const int64_t N = B * Tn, C = cfg.hidden, V = cfg.vocab;
    const int hu = layout.head_unit();
    if (!hooks.before_use && !lora.bound()) {  // fail before any work (hooks may bind lazily)
      for (int u = 0; u < layout.num_units(); ++u) grad_of(u);
    }
    int64_t count = 0;
    for (int32_t t : targets) count += t >= 0 ? 1 : 0;
    const double scale = count > 0 ? grad_scale / static_cast<double>(count) : 0.0;

    training = true;  // LoRA dropout on until the return (or an exception)
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{training};
    forward_trunk_and_norm(B, Tn, !recompute);  // leaves the head unit in use
    kc::cross_entropy<T>(logits.data(), logits.data(), targets_d.data(), N, V, scale,
                         row_loss.data(), totals.data(), stream);
    G* g_lm = cfg.tied_embeddings ? base_grad(0, layout.embed_offset())
                                  : base_grad(hu, layout.lm_head_offset());
    proj_backward(-1, LoraTarget::kLmHead, dxn.data(), g_lm, logits.data(), xf.data(),
                  lm_head_w(), N, C, V, /*accumulate_dx=*/false);
    kc::rmsnorm_backward<T, G>(dres.data(), base_grad(hu, layout.final_norm_offset()), dxn.data(),
                               x_at(static_cast<int>(cfg.layers), N),
                               params[static_cast<size_t>(hu)] + layout.final_norm_offset(),
                               rstd_f.data(), N, C, /*accumulate_dx=*/false, stream);
    done_head();
    ready(hu);

    for (int l = static_cast<int>(cfg.layers) - 1; l >= 0; --l) {
      const int u = layout.block_unit(l);
      use(u);
      if (recompute)
        block_forward(l, x_at(l, N), nullptr, shared[0], B, Tn, /*with_down=*/false);
      block_backward(l, recompute ? shared[0] : acts[static_cast<size_t>(l)], B, Tn);
      done(u);
      ready(u);
    }

    use(0);
    if (!lora.bound()) {  // a frozen embedding needs no backward at all
      kc::embedding_backward<T, G>(grad_of(0) + layout.embed_offset(), dres.data(),
                                   tokens_d.data(), N, C, stream);
    }
    done(0);
    ready(0);
    const kc::CrossEntropyTotals t = read_totals();
    return count > 0 ? t.loss_sum / static_cast<double>(count) : 0.0;
  }

  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t Tn, std::span<const int32_t> positions) {
    upload_batch(tokens, targets, B, Tn, positions);
    const int64_t N = B * Tn;
    forward_trunk_and_norm(B, Tn, /*keep_all=*/false);
    done_head();
    kc::cross_entropy<T>(nullptr, logits.data(), targets_d.data(), N, cfg.vocab, 1.0,
                         row_loss.data(), totals.data(), stream);
    const kc::CrossEntropyTotals t = read_totals();
    return t.count > 0 ? t.loss_sum / static_cast<double>(t.count) : 0.0;
  }

  void logits_last(std::span<const int32_t> tokens, int64_t Tn, T* out) {
    const std::vector<int32_t> no_targets(tokens.size(), -1);
    upload_batch(tokens, no_targets, 1, Tn);
    forward_trunk_and_norm(1, Tn, /*keep_all=*/false);
    done_head();
    ZT_CUDA_CHECK(cudaMemcpyAsync(out, logits.data() + (Tn - 1) * cfg.vocab,
                                  static_cast<size_t>(cfg.vocab) * sizeof(T),
                                  cudaMemcpyDeviceToDevice, stream));
    ZT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  size_t workspace_bytes() const {
    size_t b = rope_cos.bytes() + rope_sin.bytes() + xs.bytes() + delta.bytes() + xf.bytes() +
               rstd_f.bytes() + logits.bytes() + row_loss.bytes() + totals.bytes() +
               tokens_d.bytes() + targets_d.bytes() + positions_d.bytes() + dres.bytes() + dxn.bytes() +
               datt.bytes() + dq.bytes() + dk.bytes() + dv.bytes() + dh.bytes() +
               dgate.bytes() + dup.bytes() + attn_delta.bytes() + lora.workspace_bytes();
    for (const auto& a : shared) b += a.bytes();
    for (const auto& a : acts) b += a.bytes();
    return b;
  }
};

template <class T, class G>
DeviceModel<T, G>::DeviceModel(const Config& cfg, int64_t max_batch, int64_t max_seq,
                               cudaStream_t stream)
    : DeviceModel(ParamLayout(cfg), max_batch, max_seq, stream) {}

template <class T, class G>
DeviceModel<T, G>::DeviceModel(const ParamLayout& layout, int64_t max_batch, int64_t max_seq,
                               cudaStream_t stream)
    : impl_(std::make_unique<Impl>(layout, stream)) {
  const Config& cfg = layout.config();
  ZT_CHECK(layout.adapter_unit() < 0, "DeviceModel built on a layout with the adapters' unit",
           "build it on the base units (lora_base_layout); bind_lora binds the adapters.");
  if (max_batch > 0 && max_seq > 0) impl_->ensure(max_batch * std::min(max_seq, cfg.context));
}

template <class T, class G>
DeviceModel<T, G>::~DeviceModel() = default;

template <class T, class G>
const Config& DeviceModel<T, G>::config() const {
  return impl_->cfg;
}
template <class T, class G>
const ParamLayout& DeviceModel<T, G>::layout() const {
  return impl_->layout;
}

template <class T, class G>
void DeviceModel<T, G>::bind_unit(int u, const T* params, G* grads) {
  impl_->layout.unit(u);  // throws InputError when out of range
  impl_->params[static_cast<size_t>(u)] = params;
  impl_->grads[static_cast<size_t>(u)] = grads;
}

template <class T, class G>
void DeviceModel<T, G>::set_hooks(UnitHooks hooks) {
  impl_->hooks = std::move(hooks);
}

template <class T, class G>
void DeviceModel<T, G>::bind_lora(const LoraLayout& layout, const T* params, G* grads) {
  impl_->lora.bind(layout, params, grads, impl_->capacity);
}

template <class T, class G>
void DeviceModel<T, G>::set_lora_stream(uint64_t stream) {
  impl_->lora.set_stream(stream);
}

template <class T, class G>
void DeviceModel<T, G>::bind_qlora(const QloraBase& base) {
  check_qlora_covers(impl_->layout, base);
  impl_->lora.bind_qlora(base);
}

template <class T, class G>
double DeviceModel<T, G>::loss_and_grad(std::span<const int32_t> tokens,
                                        std::span<const int32_t> targets, int64_t B, int64_t T_,
                                        bool recompute, double grad_scale,
                                        std::span<const int32_t> positions) {
  return impl_->loss_and_grad(tokens, targets, B, T_, recompute, grad_scale, positions);
}

template <class T, class G>
double DeviceModel<T, G>::loss(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                               int64_t B, int64_t T_, std::span<const int32_t> positions) {
  return impl_->loss(tokens, targets, B, T_, positions);
}

template <class T, class G>
size_t DeviceModel<T, G>::workspace_bytes() const {
  return impl_->workspace_bytes();
}

template <class T, class G>
void DeviceModel<T, G>::logits_last(std::span<const int32_t> tokens, int64_t T_, T* out) {
  impl_->logits_last(tokens, T_, out);
}

namespace {

template <class X>
constexpr DType dtype_of() {
  return std::is_same_v<X, float> ? DType::kF32 : DType::kBF16;
}

// DeviceModel<T, G> on device memory, as the engine sees models. With lora.enabled():
// DeviceModel::bind_lora behind the adapters' unit, as the host model (trainable.cpp,
// HostModel) has Model::bind_lora: the same unit, hooks and deferral of QLoRA.
template <class T, class G>
class DeviceTrainable final : public TrainableModel {
 public:
  DeviceTrainable(const Config& cfg, int64_t max_batch, int64_t max_seq, cudaStream_t stream,
                  const LoraConfig& lora)
      : model_(lora_base_layout(cfg, lora), max_batch, max_seq, stream) {
    if (lora.enabled()) {
      lora_layout_.emplace(cfg, lora);
      layout_.emplace(cfg, lora);
    }
  }

  const ParamLayout& layout() const override { return layout_ ? *layout_ : model_.layout(); }
  Space space() const override { return Space::kDevice; }
  DType param_dtype() const override { return dtype_of<T>(); }
  DType grad_dtype() const override { return dtype_of<G>(); }
  std::string describe() const override {
    return strf("device %s / grads %s", std::string(dtype_name(dtype_of<T>())).c_str(),
                std::string(dtype_name(dtype_of<G>())).c_str());
  }
  // The adapters' unit too: bf16 under bf16 compute (the engine casts it from the fp32
  // master as it casts units), fp32 gradients.
  void bind_unit(int u, ConstView params, MutView grads) override {
    const int64_t numel = layout().unit(u).numel;
    check_view(params, Space::kDevice, dtype_of<T>(), numel, strf("unit %d parameters", u));
    if (grads.data != nullptr || grads.numel != 0)
      check_view(grads, Space::kDevice, dtype_of<G>(), numel, strf("unit %d gradients", u));
    const T* p = static_cast<const T*>(params.data);
    G* g = static_cast<G*>(grads.data);
    if (u == layout().adapter_unit()) {
      model_.bind_lora(*lora_layout_, p, g);
      lora_bound_ = true;
      // Uploads the NF4 base once per bind_qlora (DeviceLora keeps it across rebinds).
      if (qlora_ && !qlora_uploaded_) {
        model_.bind_qlora(*qlora_);
        qlora_uploaded_ = true;
      }
    } else
      model_.bind_unit(u, p, g);
  }
  void set_hooks(UnitHooks hooks) override {
    hooks_ = hooks;
    model_.set_hooks(std::move(hooks));
  }
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                       int64_t Tn, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) override {
    use_adapters();
    const double loss = model_.loss_and_grad(tokens, targets, B, Tn, recompute, grad_scale, positions);
    done_adapters(true);
    return loss;
  }
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t Tn, std::span<const int32_t> positions) override {
    use_adapters();
    const double loss = model_.loss(tokens, targets, B, Tn, positions);
    done_adapters(false);
    return loss;
  }
  void logits_last(std::span<const int32_t> tokens, int64_t Tn, MutView out) override {
    check_view(out, Space::kDevice, dtype_of<T>(), model_.config().vocab, "logits_last output");
    use_adapters();
    model_.logits_last(tokens, Tn, static_cast<T*>(out.data));
    done_adapters(false);
  }
  size_t workspace_bytes() const override { return model_.workspace_bytes(); }
  void set_dropout_stream(uint64_t stream) override { model_.set_lora_stream(stream); }
  void bind_qlora(const QloraBase& base) override {
    if (!lora_layout_ || lora_layout_->lora().method != FinetuneMethod::kQlora)
      TrainableModel::bind_qlora(base);  // refuses
    // DeviceModel::bind_qlora needs the adapters bound (stage 3: at their first use).
    qlora_ = &base;
    qlora_uploaded_ = false;  // a new base (after a load): upload it again
    if (lora_bound_) {
      model_.bind_qlora(base);
      qlora_uploaded_ = true;
    }
  }

 private:
  // The adapters' unit spans the whole pass (trainable.hpp): its hooks bracket the call;
  // at stage 3 before_use(a) rebinds it, so adapter pointers are read only after it.
  void use_adapters() { adapters_begin(hooks_, layout().adapter_unit()); }
  void done_adapters(bool grads) { adapters_end(hooks_, layout().adapter_unit(), grads); }

  DeviceModel<T, G> model_;
  std::optional<LoraLayout> lora_layout_;  // with adapters
  std::optional<ParamLayout> layout_;      // with adapters: ParamLayout(cfg, lora)
  UnitHooks hooks_;
  bool lora_bound_ = false;
  const QloraBase* qlora_ = nullptr;  // QLoRA: the NF4 base (owned by the engine)
  bool qlora_uploaded_ = false;       // qlora_ is on the device
};

}  // namespace

std::unique_ptr<TrainableModel> make_device_model(const Config& cfg, int64_t max_batch,
                                                  int64_t max_seq, const std::string& precision,
                                                  cudaStream_t stream, const LoraConfig& lora) {
  if (precision == "fp32")
    return std::make_unique<DeviceTrainable<float, float>>(cfg, max_batch, max_seq, stream, lora);
  if (precision == "bf16-mixed")
    return std::make_unique<DeviceTrainable<kc::bf16_t, float>>(cfg, max_batch, max_seq, stream, lora);
  if (precision == "bf16-true")
    return std::make_unique<DeviceTrainable<kc::bf16_t, kc::bf16_t>>(cfg, max_batch, max_seq, stream,
                                                                     lora);
  throw InputError("train.precision = '" + precision + "' is not a precision",
                   "use fp32, bf16-mixed (bf16 compute, fp32 master weights and moments) or "
                   "bf16-true");
}

template class DeviceModel<float, float>;
template class DeviceModel<kc::bf16_t, float>;
template class DeviceModel<kc::bf16_t, kc::bf16_t>;

}  // namespace zt::model
