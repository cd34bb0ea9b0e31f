// The Llama-style decoder on CPU: forward, backward and activation recompute over
// per-unit parameter spans, on a preallocated workspace. Shapes: B batch, T sequence,
// N = B*T rows, C hidden, H heads, G kv heads, D head_dim, I intermediate, V vocab.
#include "zt/model/model.hpp"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "buffer.hpp"
#include "lora_apply.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/kernels/cpu.hpp"

namespace zt::model {

namespace k = zt::kernels::cpu;
using detail::Buffer;

namespace {

// One block's activations, kept from its forward for its backward.
template <class R>
struct BlockActs {
  Buffer<R> xn1;    // [N, C]      input_layernorm(x_in)
  Buffer<R> rstd1;  // [N]
  Buffer<R> q;      // [N, H*D]    after RoPE
  Buffer<R> k;      // [N, G*D]    after RoPE
  Buffer<R> v;      // [N, G*D]
  Buffer<R> probs;  // [B, H, T, T] attention softmax
  Buffer<R> att;    // [N, H*D]    attention output, before o_proj
  Buffer<R> x_mid;  // [N, C]      x_in + o_proj(att)
  Buffer<R> xn2;    // [N, C]      post_attention_layernorm(x_mid)
  Buffer<R> rstd2;  // [N]
  Buffer<R> gate;   // [N, I]      gate_proj(xn2)
  Buffer<R> up;     // [N, I]      up_proj(xn2)
  Buffer<R> h;      // [N, I]      silu(gate) * up

  void ensure(const Config& c, int64_t N, int64_t BHTT) {
    const int64_t HD = c.heads * c.head_dim(), GD = c.kv_dim();
    xn1.ensure(N * c.hidden);
    rstd1.ensure(N);
    q.ensure(N * HD);
    k.ensure(N * GD);
    v.ensure(N * GD);
    probs.ensure(BHTT);
    att.ensure(N * HD);
    x_mid.ensure(N * c.hidden);
    xn2.ensure(N * c.hidden);
    rstd2.ensure(N);
    gate.ensure(N * c.intermediate);
    up.ensure(N * c.intermediate);
    h.ensure(N * c.intermediate);
  }
  size_t bytes() const {
    return xn1.bytes() + rstd1.bytes() + q.bytes() + k.bytes() + v.bytes() + probs.bytes() +
           att.bytes() + x_mid.bytes() + xn2.bytes() + rstd2.bytes() + gate.bytes() +
           up.bytes() + h.bytes();
  }
};

}  // namespace

template <class R>
struct Model<R>::Impl {
  Config cfg;
  ParamLayout layout;
  std::vector<const R*> params;  // per unit
  std::vector<R*> grads;         // per unit (nullptr when unbound)
  UnitHooks hooks;

  Buffer<R> rope_cos, rope_sin;     // [context, D/2]
  Buffer<R> xs;                     // [L+1, N, C] residual stream: block inputs + final output
  BlockActs<R> shared;              // eval and recompute
  std::vector<BlockActs<R>> saved;  // [L], only for loss_and_grad without recompute
  Buffer<R> xf;                     // [N, C] final norm output
  Buffer<R> rstd_f;                 // [N]
  Buffer<R> logits;                 // [N, V] logits, then dlogits (in place)
  // backward scratch
  Buffer<R> dres;                   // [N, C] gradient of the residual stream
  Buffer<R> dxn;                    // [N, C] gradient of a norm output
  Buffer<R> datt;                   // [N, H*D]
  Buffer<R> dq;                     // [N, H*D]
  Buffer<R> dk, dv;                 // [N, G*D]
  Buffer<R> dh, dgate, dup;         // [N, I]
  Buffer<R> attn_scratch;           // attention_backward_scratch(T, threads)
  // Per-token positions of the call in progress ([B, T]; nullptr: 0..T-1 in each row):
  // packed examples restart RoPE positions and attention at each example's first token.
  const int32_t* pos = nullptr;
  Buffer<R> decode_scores;          // [H, past + n] attention scores of decode()
  detail::LoraApply<R> lora;        // adapters (bind_lora): the base is frozen when bound
  bool training = false;            // inside loss_and_grad (LoRA dropout applies)

  explicit Impl(const ParamLayout& l)
      : cfg(l.config()), layout(l), params(static_cast<size_t>(layout.num_units()), nullptr),
        grads(static_cast<size_t>(layout.num_units()), nullptr) {
    const int64_t half = cfg.head_dim() / 2;
    rope_cos.ensure(cfg.context * half);
    rope_sin.ensure(cfg.context * half);
    k::rope_table(rope_cos.data(), rope_sin.data(), cfg.context, cfg.head_dim(), cfg.rope_theta);
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
  // y [N, out] = x W^T, plus the LoRA adapter of (layer, t) when one is bound (with QLoRA
  // W is read dequantised from the NF4 base: LoraApply::weight).
  void proj_forward(int layer, LoraTarget t, R* y, const R* x, const R* W, int64_t N,
                    int64_t in, int64_t out) {
    k::linear_forward(y, x, lora.weight(layer, t, W), N, in, out);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.forward(*a, y, x, N, training);
  }
  // The backward of proj_forward: dx as linear_backward; dW only when the base is not
  // frozen (pass nullptr for no dW); the adapter's gradients into its grads.
  void proj_backward(int layer, LoraTarget t, R* dx, R* dW, const R* dy, const R* x, const R* W,
                     int64_t N, int64_t in, int64_t out, bool accumulate_dx = true) {
    k::linear_backward(dx, dW, dy, x, lora.weight(layer, t, W), N, in, out, accumulate_dx);
    if (const LoraAdapterInfo* a = lora.find(layer, t)) lora.backward(*a, dx, dy, x, N, training);
  }
  // The gradient of the parameters at offset `off` of unit u: nullptr when LoRA freezes
  // the base (the kernels then skip that gradient).
  R* base_grad(int u, int64_t off) { return lora.bound() ? nullptr : grad_of(u) + off; }

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
                   int64_t T, bool need_targets) const {
    if (B <= 0 || T <= 0) {
      throw InputError(strf("batch %lld x sequence %lld: both must be > 0",
                            static_cast<long long>(B), static_cast<long long>(T)),
                       "pass at least one token.");
    }
    if (T > cfg.context) {
      throw InputError(strf("sequence length %lld exceeds the model context %lld",
                            static_cast<long long>(T), static_cast<long long>(cfg.context)),
                       "lower the sequence length or raise model.context.");
    }
    if (static_cast<int64_t>(tokens.size()) != B * T ||
        (need_targets && static_cast<int64_t>(targets.size()) != B * T)) {
      throw InputError(strf("tokens/targets hold %zu/%zu ids, expected B*T = %lld", tokens.size(),
                            targets.size(), static_cast<long long>(B * T)),
                       "tokens and targets are [B, T] row-major.");
    }
  }

  // Grows the workspace for B x T (no-op once the largest shape has been seen).
  void ensure(int64_t B, int64_t T, bool backward, bool keep_all) {
    const int64_t N = B * T, C = cfg.hidden, V = cfg.vocab, I = cfg.intermediate;
    const int64_t HD = cfg.heads * cfg.head_dim(), GD = cfg.kv_dim();
    const int64_t BHTT = B * cfg.heads * T * T;
    xs.ensure((cfg.layers + 1) * N * C);
    xf.ensure(N * C);
    rstd_f.ensure(N);
    logits.ensure(N * V);
    if (!backward || !keep_all) shared.ensure(cfg, N, BHTT);
    if (backward && keep_all) {
      saved.resize(static_cast<size_t>(cfg.layers));
      for (auto& a : saved) a.ensure(cfg, N, BHTT);
    }
    if (backward) {
      dres.ensure(N * C);
      dxn.ensure(N * C);
      datt.ensure(N * HD);
      dq.ensure(N * HD);
      dk.ensure(N * GD);
      dv.ensure(N * GD);
      dh.ensure(N * I);
      dgate.ensure(N * I);
      dup.ensure(N * I);
      attn_scratch.ensure(k::attention_backward_scratch(T, omp_get_max_threads()));
    }
  }

  R* x_at(int l, int64_t N) { return xs.data() + static_cast<int64_t>(l) * N * cfg.hidden; }
  const R* lm_head_w() const {
    return cfg.tied_embeddings ? params[0]
                               : params[static_cast<size_t>(layout.head_unit())] +
                                     layout.lm_head_offset();
  }

  // Block l: x_in [N, C] -> x_out [N, C]; activations into a. With x_out == nullptr
  // (recompute in the backward) the down projection and last residual are skipped:
  // the backward needs only what comes before them.
  void block_forward(int l, const R* x_in, R* x_out, BlockActs<R>& a, int64_t B, int64_t T) {
    const int64_t N = B * T, C = cfg.hidden;
    const int64_t H = cfg.heads, G = cfg.kv_heads, D = cfg.head_dim();
    const R* p = params[static_cast<size_t>(layout.block_unit(l))];
    const BlockOffsets& o = layout.block_offsets();
    // attention half
    k::rmsnorm_forward(a.xn1.data(), a.rstd1.data(), x_in, p + o.input_norm, N, C, cfg.norm_eps);
    proj_forward(l, LoraTarget::kQ, a.q.data(), a.xn1.data(), p + o.q, N, C, H * D);
    proj_forward(l, LoraTarget::kK, a.k.data(), a.xn1.data(), p + o.k, N, C, G * D);
    proj_forward(l, LoraTarget::kV, a.v.data(), a.xn1.data(), p + o.v, N, C, G * D);
    k::rope_forward(a.q.data(), rope_cos.data(), rope_sin.data(), B, T, H, D, pos);
    k::rope_forward(a.k.data(), rope_cos.data(), rope_sin.data(), B, T, G, D, pos);
    k::attention_forward(a.att.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), B, T,
                         H, G, D, pos);
    proj_forward(l, LoraTarget::kO, a.x_mid.data(), a.att.data(), p + o.o, N, H * D, C);
    k::residual_forward(a.x_mid.data(), x_in, a.x_mid.data(), N * C);
    mlp_forward(l, p, x_out, a, N);
  }

  // A block's MLP half: a.x_mid [N, C] -> x_out [N, C] (skipped when x_out == nullptr).
  void mlp_forward(int l, const R* p, R* x_out, BlockActs<R>& a, int64_t N) {
    const int64_t C = cfg.hidden, I = cfg.intermediate;
    const BlockOffsets& o = layout.block_offsets();
    k::rmsnorm_forward(a.xn2.data(), a.rstd2.data(), a.x_mid.data(), p + o.post_norm, N, C,
                       cfg.norm_eps);
    proj_forward(l, LoraTarget::kGate, a.gate.data(), a.xn2.data(), p + o.gate, N, C, I);
    proj_forward(l, LoraTarget::kUp, a.up.data(), a.xn2.data(), p + o.up, N, C, I);
    k::swiglu_forward(a.h.data(), a.gate.data(), a.up.data(), N * I);
    if (x_out) {
      proj_forward(l, LoraTarget::kDown, x_out, a.h.data(), p + o.down, N, I, C);
      k::residual_forward(x_out, a.x_mid.data(), x_out, N * C);
    }
  }

  // Block l over n new positions of one sequence (past before them in the cache): their
  // keys and values go into the cache, their queries attend the whole cache.
  void block_decode(int l, const R* x_in, R* x_out, BlockActs<R>& a, int64_t n, int64_t past,
                    KvCache<R>& cache) {
    const int64_t C = cfg.hidden, H = cfg.heads, G = cfg.kv_heads, D = cfg.head_dim();
    const int64_t GD = G * D, half = D / 2;
    const R* p = params[static_cast<size_t>(layout.block_unit(l))];
    const BlockOffsets& o = layout.block_offsets();
    R* kc = cache.k.data() + static_cast<int64_t>(l) * cache.capacity * GD;  // [capacity, G*D]
    R* vc = cache.v.data() + static_cast<int64_t>(l) * cache.capacity * GD;  // [capacity, G*D]
    k::rmsnorm_forward(a.xn1.data(), a.rstd1.data(), x_in, p + o.input_norm, n, C, cfg.norm_eps);
    proj_forward(l, LoraTarget::kQ, a.q.data(), a.xn1.data(), p + o.q, n, C, H * D);
    proj_forward(l, LoraTarget::kK, kc + past * GD, a.xn1.data(), p + o.k, n, C, GD);
    proj_forward(l, LoraTarget::kV, vc + past * GD, a.xn1.data(), p + o.v, n, C, GD);
    const R* cos = rope_cos.data() + past * half;  // positions past .. past + n - 1
    const R* sin = rope_sin.data() + past * half;
    k::rope_forward(a.q.data(), cos, sin, 1, n, H, D);
    k::rope_forward(kc + past * GD, cos, sin, 1, n, G, D);
    k::attention_decode(a.att.data(), decode_scores.data(), a.q.data(), kc, vc, n, past, H, G, D);
    proj_forward(l, LoraTarget::kO, a.x_mid.data(), a.att.data(), p + o.o, n, H * D, C);
    k::residual_forward(a.x_mid.data(), x_in, a.x_mid.data(), n * C);
    mlp_forward(l, p, x_out, a, n);
  }

  // Block l backward: dres [N, C] holds dL/dx_out on entry and dL/dx_in on exit.
  void block_backward(int l, const R* x_in, BlockActs<R>& a, int64_t B, int64_t T) {
    const int64_t N = B * T, C = cfg.hidden, I = cfg.intermediate;
    const int64_t H = cfg.heads, G = cfg.kv_heads, D = cfg.head_dim();
    const int u = layout.block_unit(l);
    const R* p = params[static_cast<size_t>(u)];
    const BlockOffsets& o = layout.block_offsets();
    const auto g = [&](int64_t off) { return base_grad(u, off); };  // nullptr: frozen
    // MLP half: x_out = x_mid + down(h); the residual passes dres through unchanged.
    // First contributions to the scratch gradients WRITE (accumulate = false), so no
    // buffer needs zeroing.
    proj_backward(l, LoraTarget::kDown, dh.data(), g(o.down), dres.data(), a.h.data(),
                  p + o.down, N, I, C, /*accumulate_dx=*/false);
    k::swiglu_backward(dgate.data(), dup.data(), dh.data(), a.gate.data(), a.up.data(), N * I,
                       /*accumulate=*/false);
    proj_backward(l, LoraTarget::kGate, dxn.data(), g(o.gate), dgate.data(), a.xn2.data(),
                  p + o.gate, N, C, I, /*accumulate_dx=*/false);
    proj_backward(l, LoraTarget::kUp, dxn.data(), g(o.up), dup.data(), a.xn2.data(), p + o.up,
                  N, C, I);
    k::rmsnorm_backward(dres.data(), g(o.post_norm), dxn.data(), a.x_mid.data(), p + o.post_norm,
                        a.rstd2.data(), N, C);  // dres += (the residual branch)
    // attention half: x_mid = x_in + o_proj(att)
    proj_backward(l, LoraTarget::kO, datt.data(), g(o.o), dres.data(), a.att.data(), p + o.o,
                  N, H * D, C, /*accumulate_dx=*/false);
    k::attention_backward(dq.data(), dk.data(), dv.data(), attn_scratch.data(), datt.data(),
                          a.q.data(), a.k.data(), a.v.data(), a.probs.data(), B, T, H, G, D,
                          /*accumulate=*/false);
    k::rope_backward(dq.data(), rope_cos.data(), rope_sin.data(), B, T, H, D, pos);
    k::rope_backward(dk.data(), rope_cos.data(), rope_sin.data(), B, T, G, D, pos);
    proj_backward(l, LoraTarget::kQ, dxn.data(), g(o.q), dq.data(), a.xn1.data(), p + o.q, N,
                  C, H * D, /*accumulate_dx=*/false);
    proj_backward(l, LoraTarget::kK, dxn.data(), g(o.k), dk.data(), a.xn1.data(), p + o.k, N,
                  C, G * D);
    proj_backward(l, LoraTarget::kV, dxn.data(), g(o.v), dv.data(), a.xn1.data(), p + o.v, N,
                  C, G * D);
    k::rmsnorm_backward(dres.data(), g(o.input_norm), dxn.data(), x_in, p + o.input_norm,
                        a.rstd1.data(), N, C);  // dres += (the residual branch)
  }

  // Embedding and every block; xs[L] holds the final hidden state afterwards.
  void forward_trunk(std::span<const int32_t> tokens, int64_t B, int64_t T, bool keep_all) {
    const int64_t N = B * T;
    use(0);
    k::embedding_forward(x_at(0, N), tokens.data(), params[0] + layout.embed_offset(), N,
                         cfg.vocab, cfg.hidden);
    done(0);
    for (int l = 0; l < static_cast<int>(cfg.layers); ++l) {
      const int u = layout.block_unit(l);
      use(u);
      BlockActs<R>& a = keep_all ? saved[static_cast<size_t>(l)] : shared;
      block_forward(l, x_at(l, N), x_at(l + 1, N), a, B, T);
      done(u);
    }
  }

  // Final norm and LM head over all N rows: logits [N, V].
  void head_forward(int64_t N) {
    const R* ph = params[static_cast<size_t>(layout.head_unit())];
    k::rmsnorm_forward(xf.data(), rstd_f.data(), x_at(static_cast<int>(cfg.layers), N),
                       ph + layout.final_norm_offset(), N, cfg.hidden, cfg.norm_eps);
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

  // Positions [B, T] for this call (empty: none; see check_positions).
  void set_positions(std::span<const int32_t> positions, int64_t B, int64_t T) {
    check_positions(positions, B, T);
    pos = positions.empty() ? nullptr : positions.data();
  }

  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       int64_t B, int64_t T, bool recompute, double grad_scale,
                       std::span<const int32_t> positions) {
    check_shape(tokens, targets, B, T, true);
    set_positions(positions, B, T);
    const int64_t N = B * T, C = cfg.hidden, V = cfg.vocab;
    const int hu = layout.head_unit();
    if (!hooks.before_use && !lora.bound()) {  // fail before any work (hooks may bind lazily)
      for (int u = 0; u < layout.num_units(); ++u) grad_of(u);
    }
    ensure(B, T, /*backward=*/true, /*keep_all=*/!recompute);
    int64_t count = 0;
    for (int32_t t : targets) count += t >= 0 ? 1 : 0;
    const double scale = count > 0 ? grad_scale / static_cast<double>(count) : 0.0;

    training = true;  // LoRA dropout on until the return (or an exception)
    struct Reset {
      bool& flag;
      ~Reset() { flag = false; }
    } reset{training};
    forward_trunk(tokens, B, T, !recompute);

    // head: forward, loss, backward in one use of the unit
    use_head();
    head_forward(N);
    const k::CrossEntropyResult ce =
        k::cross_entropy(logits.data(), logits.data(), targets.data(), N, V, scale);
    R* g_lm = cfg.tied_embeddings ? base_grad(0, layout.embed_offset())
                                  : base_grad(hu, layout.lm_head_offset());
    proj_backward(-1, LoraTarget::kLmHead, dxn.data(), g_lm, logits.data(), xf.data(),
                  lm_head_w(), N, C, V, /*accumulate_dx=*/false);
    k::rmsnorm_backward(dres.data(), base_grad(hu, layout.final_norm_offset()), dxn.data(),
                        x_at(static_cast<int>(cfg.layers), N),
                        params[static_cast<size_t>(hu)] + layout.final_norm_offset(),
                        rstd_f.data(), N, C, /*accumulate_dx=*/false);
    done_head();
    ready(hu);

    for (int l = static_cast<int>(cfg.layers) - 1; l >= 0; --l) {
      const int u = layout.block_unit(l);
      use(u);
      if (recompute) block_forward(l, x_at(l, N), nullptr, shared, B, T);
      block_backward(l, x_at(l, N), recompute ? shared : saved[static_cast<size_t>(l)], B, T);
      done(u);
      ready(u);
    }

    use(0);
    if (!lora.bound()) {  // a frozen embedding needs no backward at all
      k::embedding_backward(grad_of(0) + layout.embed_offset(), dres.data(), tokens.data(), N, C);
    }
    done(0);
    ready(0);
    return count > 0 ? ce.loss_sum / static_cast<double>(count) : 0.0;
  }

  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T, std::span<const int32_t> positions) {
    check_shape(tokens, targets, B, T, true);
    set_positions(positions, B, T);
    const int64_t N = B * T;
    ensure(B, T, /*backward=*/false, /*keep_all=*/false);
    forward_trunk(tokens, B, T, false);
    use_head();
    head_forward(N);
    done_head();
    const k::CrossEntropyResult ce =
        k::cross_entropy<R>(nullptr, logits.data(), targets.data(), N, cfg.vocab, 1.0);
    return ce.count > 0 ? ce.loss_sum / static_cast<double>(ce.count) : 0.0;
  }

  void logits_last(std::span<const int32_t> tokens, int64_t T, std::span<R> out) {
    check_shape(tokens, {}, 1, T, false);
    if (static_cast<int64_t>(out.size()) != cfg.vocab) {
      throw InputError(strf("logits_last: output holds %zu values, the vocabulary has %lld",
                            out.size(), static_cast<long long>(cfg.vocab)),
                       "pass a span of config().vocab elements.");
    }
    ensure(1, T, false, false);
    pos = nullptr;  // one sequence from position 0
    forward_trunk(tokens, 1, T, false);
    head_last(T, out);
  }

  // The head over the last of the n rows of the final hidden state: logits [V] into out.
  void head_last(int64_t n, std::span<R> out) {
    use_head();
    const R* ph = params[static_cast<size_t>(layout.head_unit())];
    const R* last = x_at(static_cast<int>(cfg.layers), n) + (n - 1) * cfg.hidden;  // [C]
    k::rmsnorm_forward(xf.data(), static_cast<R*>(nullptr), last, ph + layout.final_norm_offset(),
                       1, cfg.hidden, cfg.norm_eps);
    proj_forward(-1, LoraTarget::kLmHead, out.data(), xf.data(), lm_head_w(), 1, cfg.hidden,
                 cfg.vocab);
    done_head();
  }

  void decode(std::span<const int32_t> tokens, KvCache<R>& cache, std::span<R> out) {
    const int64_t n = static_cast<int64_t>(tokens.size()), past = cache.length;
    const int64_t GD = cfg.kv_dim();
    if (n <= 0) throw InputError("decode: no tokens", "pass at least one new token.");
    if (cache.capacity > cfg.context || past < 0 ||
        static_cast<int64_t>(cache.k.size()) != cfg.layers * cache.capacity * GD ||
        cache.v.size() != cache.k.size()) {
      throw InputError(strf("decode: the cache (capacity %lld, length %lld) is not one of this "
                            "model (%lld layers, context %lld)",
                            static_cast<long long>(cache.capacity), static_cast<long long>(past),
                            static_cast<long long>(cfg.layers),
                            static_cast<long long>(cfg.context)),
                       "make the cache with KvCache(model.config(), capacity).");
    }
    if (past + n > cache.capacity) {
      throw InputError(strf("decode: %lld cached + %lld new positions exceed the cache's %lld",
                            static_cast<long long>(past), static_cast<long long>(n),
                            static_cast<long long>(cache.capacity)),
                       "clear the cache and decode the last positions again (a sliding window).");
    }
    if (static_cast<int64_t>(out.size()) != cfg.vocab) {
      throw InputError(strf("decode: output holds %zu values, the vocabulary has %lld",
                            out.size(), static_cast<long long>(cfg.vocab)),
                       "pass a span of config().vocab elements.");
    }
    ensure(1, n, false, false);
    decode_scores.ensure(cfg.heads * (past + n));
    use(0);
    k::embedding_forward(x_at(0, n), tokens.data(), params[0] + layout.embed_offset(), n,
                         cfg.vocab, cfg.hidden);
    done(0);
    for (int l = 0; l < static_cast<int>(cfg.layers); ++l) {
      const int u = layout.block_unit(l);
      use(u);
      block_decode(l, x_at(l, n), x_at(l + 1, n), shared, n, past, cache);
      done(u);
    }
    head_last(n, out);
    cache.length = past + n;
  }

  size_t workspace_bytes() const {
    size_t b = rope_cos.bytes() + rope_sin.bytes() + xs.bytes() + shared.bytes() + xf.bytes() +
               rstd_f.bytes() + logits.bytes() + dres.bytes() + dxn.bytes() + datt.bytes() +
               dq.bytes() + dk.bytes() + dv.bytes() + dh.bytes() + dgate.bytes() + dup.bytes() +
               attn_scratch.bytes() + decode_scores.bytes() + lora.workspace_bytes();
    for (const auto& a : saved) b += a.bytes();
    return b;
  }
};

template <class R>
Model<R>::Model(const Config& cfg, int64_t max_batch, int64_t max_seq)
    : Model(ParamLayout(cfg), max_batch, max_seq) {}

template <class R>
Model<R>::Model(const ParamLayout& layout, int64_t max_batch, int64_t max_seq)
    : impl_(std::make_unique<Impl>(layout)) {
  const Config& cfg = layout.config();
  ZT_CHECK(layout.adapter_unit() < 0, "Model built on a layout with the adapters' unit",
           "build it on the base units (ParamLayout::without_weights); bind_lora binds the "
           "adapters.");
  // Preallocate for the forward, backward and recompute at this shape; the per-layer
  // activations of a no-recompute step are allocated by the first such step.
  if (max_batch > 0 && max_seq > 0) {
    impl_->ensure(max_batch, std::min(max_seq, cfg.context), /*backward=*/true,
                  /*keep_all=*/false);
  }
}

template <class R>
Model<R>::~Model() = default;
template <class R>
Model<R>::Model(Model&&) noexcept = default;
template <class R>
Model<R>& Model<R>::operator=(Model&&) noexcept = default;

template <class R>
const Config& Model<R>::config() const {
  return impl_->cfg;
}
template <class R>
const ParamLayout& Model<R>::layout() const {
  return impl_->layout;
}

template <class R>
void Model<R>::bind_unit(int u, std::span<const R> params, std::span<R> grads) {
  const UnitInfo& unit = impl_->layout.unit(u);
  if (static_cast<int64_t>(params.size()) != unit.numel ||
      (!grads.empty() && static_cast<int64_t>(grads.size()) != unit.numel)) {
    throw InputError(strf("bind_unit(%d = %s): params/grads hold %zu/%zu elements, the unit has "
                          "%lld",
                          u, unit.name.c_str(), params.size(), grads.size(),
                          static_cast<long long>(unit.numel)),
                     "allocate layout().unit(u).numel elements per buffer (grads may be "
                     "empty for eval).");
  }
  impl_->params[static_cast<size_t>(u)] = params.data();
  impl_->grads[static_cast<size_t>(u)] = grads.empty() ? nullptr : grads.data();
}

template <class R>
void Model<R>::set_hooks(UnitHooks hooks) {
  impl_->hooks = std::move(hooks);
}

template <class R>
void Model<R>::bind_lora(const LoraLayout& layout, std::span<const R> params,
                         std::span<R> grads) {
  impl_->lora.bind(layout, params, grads);
}

template <class R>
void Model<R>::bind_qlora(const QloraBase& base) {
  check_qlora_covers(impl_->layout, base);
  impl_->lora.bind_qlora(base);
}

template <class R>
void Model<R>::set_lora_stream(uint64_t stream) {
  impl_->lora.set_stream(stream);
}

template <class R>
double Model<R>::loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                               int64_t B, int64_t T, bool recompute, double grad_scale,
                               std::span<const int32_t> positions) {
  return impl_->loss_and_grad(tokens, targets, B, T, recompute, grad_scale, positions);
}

template <class R>
double Model<R>::loss(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                      int64_t B, int64_t T, std::span<const int32_t> positions) {
  return impl_->loss(tokens, targets, B, T, positions);
}

template <class R>
void Model<R>::logits_last(std::span<const int32_t> tokens, int64_t T, std::span<R> out) {
  impl_->logits_last(tokens, T, out);
}

template <class R>
void Model<R>::decode(std::span<const int32_t> tokens, KvCache<R>& cache, std::span<R> out) {
  impl_->decode(tokens, cache, out);
}

void check_positions(std::span<const int32_t> positions, int64_t B, int64_t T) {
  if (positions.empty()) return;
  if (static_cast<int64_t>(positions.size()) != B * T)
    throw InputError(strf("positions hold %zu ids, expected B*T = %lld", positions.size(),
                          static_cast<long long>(B * T)),
                     "positions are [B, T] row-major, like tokens (or empty).");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int32_t p = positions[static_cast<size_t>(b * T + t)];
      const int32_t prev = t > 0 ? positions[static_cast<size_t>(b * T + t - 1)] : -1;
      if (p != 0 && p != prev + 1)
        throw InputError(strf("position %d at row %lld, index %lld: positions restart at 0 "
                              "or count up by one",
                              p, static_cast<long long>(b), static_cast<long long>(t)),
                         "positions come from example boundaries (zt/data/sampler.hpp).");
    }
}

template <class R>
KvCache<R>::KvCache(const Config& cfg, int64_t cap) : capacity(cap) {
  if (cap <= 0 || cap > cfg.context) {
    throw InputError(strf("a key/value cache of %lld positions for a model of context %lld",
                          static_cast<long long>(cap), static_cast<long long>(cfg.context)),
                     "the cache holds 1 .. model.context positions.");
  }
  const auto n = static_cast<size_t>(cfg.layers * cap * cfg.kv_dim());
  k.assign(n, R(0));
  v.assign(n, R(0));
}

template <class R>
size_t Model<R>::workspace_bytes() const {
  return impl_->workspace_bytes();
}

template class Model<float>;
template class Model<double>;
template struct KvCache<float>;
template struct KvCache<double>;

}  // namespace zt::model
