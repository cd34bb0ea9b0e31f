// The Llama-style decoder on CPU: the embedding, the trunk of blocks (block.cpp), the final
// norm and LM head, and the Model calls (loss_and_grad with recompute, loss, logits_last,
// decode) over per-unit parameter spans, on a preallocated workspace (model_impl.hpp).
#include "zt/model/model.hpp"

#include <omp.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "model_impl.hpp"

namespace zt::model {

template <class R>
void Model<R>::Impl::check_shape(std::span<const int32_t> tokens,
                                 std::span<const int32_t> targets, int64_t B, int64_t T,
                                 bool need_targets) const {
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
template <class R>
void Model<R>::Impl::ensure(int64_t B, int64_t T, bool backward, bool keep_all) {
  const int64_t N = B * T, C = cfg.hidden, V = cfg.vocab, I = cfg.intermediate;
  const int64_t HD = cfg.heads * cfg.head_dim(), GD = cfg.kv_dim();
  const int64_t BHTT = B * cfg.heads * T * T;
  ensure_rope(T);
  xs.ensure((cfg.layers + 1) * N * C);
  xf.ensure(N * C);
  rstd_f.ensure(N);
  logits.ensure(N * V);
  const bool routed = ep.empty();  // expert parallelism: its layers keep the routed rows
  if (!backward || !keep_all) shared.ensure(cfg, N, BHTT, routed, Mixers::of_model(cfg));
  if (backward && keep_all) {
    saved.resize(static_cast<size_t>(cfg.layers));
    for (int64_t l = 0; l < cfg.layers; ++l)
      saved[static_cast<size_t>(l)].ensure(cfg, N, BHTT, routed, Mixers::of_layer(cfg, l));
  }
  if (backward) {
    dres.ensure(N * C);
    dxn.ensure(N * C);
    datt.ensure(N * HD);
    dq.ensure(N * HD);
    if (cfg.linear_layers()) dlin.ensure(cfg, N);
    if (cfg.output_gate()) {
      dogate.ensure(N * HD);
      dqg.ensure(N * 2 * HD);
    }
    dk.ensure(N * GD);
    dv.ensure(N * GD);
    // The dense MLP's (every layer without experts) and the shared expert's scratch.
    const int64_t width = std::max(cfg.dense_layers() ? I : 0, cfg.shared_expert_intermediate);
    if (width > 0) {
      dh.ensure(N * width);
      dgate.ensure(N * width);
      dup.ensure(N * width);
    }
    if (cfg.shared_expert()) {
      dshared.ensure(N * C);
      dshared_gate.ensure(N);
    }
    attn_scratch.ensure(cpu::attention_backward_scratch(T, omp_get_max_threads()));
  }
}

// Embedding and every block; xs[L] holds the final hidden state afterwards.
template <class R>
void Model<R>::Impl::forward_trunk(std::span<const int32_t> tokens, int64_t B, int64_t T,
                                   bool keep_all) {
  const int64_t N = B * T;
  moe_stats_begin();
  use(0);
  cpu::embedding_forward(x_at(0, N), tokens.data(), params[0] + layout.embed_offset(), N,
                       cfg.vocab, cfg.hidden);
  scale_by(x_at(0, N), N * cfg.hidden, embed_factor());
  done(0);
  for (int l = 0; l < static_cast<int>(cfg.layers); ++l) {
    const int u = layout.block_unit(l);
    use(u);
    BlockActs<R>& a = keep_all ? saved[static_cast<size_t>(l)] : shared;
    block_forward(l, x_at(l, N), x_at(l + 1, N), a, B, T);
    done(u);
  }
  moe_stats_end();
}

// Final norm and LM head over all N rows: logits [N, V].
template <class R>
void Model<R>::Impl::head_forward(int64_t N) {
  const R* ph = params[static_cast<size_t>(layout.head_unit())];
  cpu::rmsnorm_forward(xf.data(), rstd_f.data(), x_at(static_cast<int>(cfg.layers), N),
                     ph + layout.final_norm_offset(), N, cfg.hidden, cfg.norm_eps,
                     cfg.norm_offset());
  proj_forward(-1, LoraTarget::kLmHead, logits.data(), xf.data(), lm_head_w(), N, cfg.hidden,
               cfg.vocab);
  if (cfg.final_logit_softcap > 0) {  // kept for the backward (loss_and_grad)
    capped.ensure(N * cfg.vocab);
    cpu::softcap_forward(logits.data(), logits.data(), N * cfg.vocab, cfg.final_logit_softcap);
    std::copy_n(logits.data(), N * cfg.vocab, capped.data());
  }
}

template <class R>
void Model<R>::Impl::use_head() {
  use(layout.head_unit());
  if (cfg.tied_embeddings) use(0);
}

template <class R>
void Model<R>::Impl::done_head() {
  if (cfg.tied_embeddings) done(0);
  done(layout.head_unit());
}

// Positions [B, T] for this call (empty: none; see check_positions).
template <class R>
void Model<R>::Impl::set_positions(std::span<const int32_t> positions, int64_t B, int64_t T) {
  check_positions(positions, B, T);
  pos = positions.empty() ? nullptr : positions.data();
}

template <class R>
double Model<R>::Impl::loss_and_grad(std::span<const int32_t> tokens,
                                     std::span<const int32_t> targets, int64_t B, int64_t T,
                                     bool recompute, double grad_scale,
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
  // The load-balancing loss (router_aux_loss): its value joins the loss, its gradient
  // enters each block's router in the backward.
  const double aux_term = moe_aux_term(grad_scale);

  // head: forward, loss, backward in one use of the unit
  use_head();
  head_forward(N);
  cpu::CrossEntropyResult ce;
  double value = 0;
  if (objective)
    value = objective_backward(targets.data(), B, T, grad_scale);
  else
    ce = cpu::cross_entropy(logits.data(), logits.data(), targets.data(), N, V, scale);
  if (cfg.final_logit_softcap > 0)
    cpu::softcap_backward(logits.data(), logits.data(), capped.data(), N * V, cfg.final_logit_softcap);
  R* g_lm = cfg.tied_embeddings ? base_grad(0, layout.embed_offset())
                                : base_grad(hu, layout.lm_head_offset());
  proj_backward(-1, LoraTarget::kLmHead, dxn.data(), g_lm, logits.data(), xf.data(),
                lm_head_w(), N, C, V, /*accumulate_dx=*/false);
  cpu::rmsnorm_backward(dres.data(), base_grad(hu, layout.final_norm_offset()), dxn.data(),
                      x_at(static_cast<int>(cfg.layers), N),
                      params[static_cast<size_t>(hu)] + layout.final_norm_offset(),
                      rstd_f.data(), N, C, /*accumulate_dx=*/false, cfg.norm_offset());
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
    scale_by(dres.data(), N * C, embed_factor());
    cpu::embedding_backward(grad_of(0) + layout.embed_offset(), dres.data(), tokens.data(), N, C);
  }
  done(0);
  ready(0);
  if (objective) return value + aux_term;
  return (count > 0 ? ce.loss_sum / static_cast<double>(count) : 0.0) + aux_term;
}

namespace {

int32_t own_token(int32_t t) { return t >= 0 ? t : -1; }

bool has_context(const int32_t* targets, int64_t n) {
  return std::any_of(targets, targets + n, is_context_target);
}

// The elements of a KvCache per block kind: k (and v) per position over the attention
// blocks; conv and state over the Gated DeltaNet blocks.
struct CacheSizes {
  int64_t kv_per_position = 0, conv = 0, state = 0;
};
CacheSizes cache_sizes(const Config& cfg) {
  int64_t ll = 0;
  for (int64_t l = 0; l < cfg.layers; ++l) ll += cfg.linear(l) ? 1 : 0;
  return {.kv_per_position = (cfg.layers - ll) * cfg.kv_dim(),
          .conv = ll * cfg.linear_conv_dim() * (cfg.linear_conv_kernel - 1),
          .state = ll * cfg.linear_value_heads * cfg.linear_key_dim * cfg.linear_value_dim};
}
}  // namespace

template <class R>
void Model<R>::Impl::row_sums(const int32_t* targets, int64_t B, int64_t T, std::span<double> logp,
                              std::span<int64_t> count) const {
  const int64_t V = cfg.vocab;
  const bool context = static_cast<int64_t>(logp.size()) == 2 * B;
  if ((static_cast<int64_t>(logp.size()) != B && !context) || count.size() != logp.size())
    throw InputError(strf("row log-probs: %zu / %zu outputs for %lld rows", logp.size(), count.size(),
                          static_cast<long long>(B)),
                     "pass spans of B elements (2B: the context targets' sums after them)");
  std::vector<int32_t> row(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* tr = targets + b * T;
    for (int part = 0; part < (context ? 2 : 1); ++part) {
      std::transform(tr, tr + T, row.begin(), part == 0 ? own_token : context_token);
      const cpu::CrossEntropyResult r =
          cpu::cross_entropy<R>(nullptr, logits.data() + b * T * V, row.data(), T, V, 1.0);
      logp[static_cast<size_t>(part * B + b)] = -r.loss_sum;
      count[static_cast<size_t>(part * B + b)] = r.count;
    }
  }
}

// d value / d logits of row b's target t = dlogp[b] x d logp_t / d logits
// = -dlogp[b] x (softmax - onehot): the cross-entropy gradient with scale -dlogp[b]
// (-dlogp[B + b] at row b's context targets, run by run: the kernel writes in place).
template <class R>
double Model<R>::Impl::objective_backward(const int32_t* targets, int64_t B, int64_t T,
                                          double grad_scale) {
  const int64_t V = cfg.vocab;
  const bool context = has_context(targets, B * T);
  const size_t n = static_cast<size_t>(context ? 2 * B : B);
  std::vector<double> logp(n), dlogp(n);
  std::vector<int64_t> count(n);
  row_sums(targets, B, T, logp, count);
  const double value = objective(logp, count, dlogp);
  std::vector<int32_t> run(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    R* row = logits.data() + b * T * V;
    const int32_t* tr = targets + b * T;
    if (!context) {
      cpu::cross_entropy(row, row, tr, T, V, -dlogp[static_cast<size_t>(b)] * grad_scale);
      continue;
    }
    for (int64_t t0 = 0, t1; t0 < T; t0 = t1) {  // runs of one kind: own, context or ignored
      const bool ctx = is_context_target(tr[t0]);
      for (t1 = t0 + 1; t1 < T && is_context_target(tr[t1]) == ctx; ++t1) {
      }
      std::transform(tr + t0, tr + t1, run.begin(), ctx ? context_token : own_token);
      const double d = dlogp[static_cast<size_t>(ctx ? B + b : b)];
      cpu::cross_entropy(row + t0 * V, row + t0 * V, run.data(), t1 - t0, V, -d * grad_scale);
    }
  }
  return value;
}

template <class R>
double Model<R>::Impl::loss(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                            int64_t B, int64_t T, std::span<const int32_t> positions) {
  check_shape(tokens, targets, B, T, true);
  set_positions(positions, B, T);
  const int64_t N = B * T;
  ensure(B, T, /*backward=*/false, /*keep_all=*/false);
  forward_trunk(tokens, B, T, false);
  const double aux_term = moe_aux_term(0.0);  // as loss_and_grad's value
  use_head();
  head_forward(N);
  done_head();
  const cpu::CrossEntropyResult ce =
      cpu::cross_entropy<R>(nullptr, logits.data(), targets.data(), N, cfg.vocab, 1.0);
  return (ce.count > 0 ? ce.loss_sum / static_cast<double>(ce.count) : 0.0) + aux_term;
}

template <class R>
void Model<R>::row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                         int64_t T, std::span<const int32_t> positions, std::span<double> logp,
                         std::span<int64_t> count) {
  Impl& m = *impl_;
  m.check_shape(tokens, targets, B, T, true);
  m.set_positions(positions, B, T);
  m.ensure(B, T, /*backward=*/false, /*keep_all=*/false);
  m.forward_trunk(tokens, B, T, false);
  m.use_head();
  m.head_forward(B * T);
  m.done_head();
  m.row_sums(targets.data(), B, T, logp, count);
}

template <class R>
void Model<R>::set_row_objective(RowObjective objective) {
  impl_->objective = std::move(objective);
}

template <class R>
void Model<R>::set_adapters_enabled(bool on) {
  impl_->lora.set_enabled(on);
}

template <class R>
void Model<R>::Impl::logits_last(std::span<const int32_t> tokens, int64_t T, std::span<R> out) {
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
template <class R>
void Model<R>::Impl::head_last(int64_t n, std::span<R> out) {
  use_head();
  const R* ph = params[static_cast<size_t>(layout.head_unit())];
  const R* last = x_at(static_cast<int>(cfg.layers), n) + (n - 1) * cfg.hidden;  // [C]
  cpu::rmsnorm_forward(xf.data(), static_cast<R*>(nullptr), last, ph + layout.final_norm_offset(),
                     1, cfg.hidden, cfg.norm_eps, cfg.norm_offset());
  proj_forward(-1, LoraTarget::kLmHead, out.data(), xf.data(), lm_head_w(), 1, cfg.hidden,
               cfg.vocab);
  if (cfg.final_logit_softcap > 0)
    cpu::softcap_forward(out.data(), out.data(), cfg.vocab, cfg.final_logit_softcap);
  done_head();
}

template <class R>
void Model<R>::Impl::decode(std::span<const int32_t> tokens, KvCache<R>& cache, std::span<R> out) {
  const int64_t n = static_cast<int64_t>(tokens.size()), past = cache.length;
  if (n <= 0) throw InputError("decode: no tokens", "pass at least one new token.");
  const CacheSizes size = cache_sizes(cfg);
  if (cache.capacity > cfg.context || past < 0 ||
      cache.slot.size() != static_cast<size_t>(cfg.layers) ||
      static_cast<int64_t>(cache.k.size()) != size.kv_per_position * cache.capacity ||
      cache.v.size() != cache.k.size() || static_cast<int64_t>(cache.conv.size()) != size.conv ||
      static_cast<int64_t>(cache.state.size()) != size.state) {
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
  if (past == 0) {  // a new sequence: the Gated DeltaNet blocks start from zeros
    std::fill(cache.conv.begin(), cache.conv.end(), R(0));
    std::fill(cache.state.begin(), cache.state.end(), R(0));
  }
  ensure(1, n, false, false);
  ensure_rope(past + n);
  decode_scores.ensure(cfg.heads * (past + n));
  use(0);
  cpu::embedding_forward(x_at(0, n), tokens.data(), params[0] + layout.embed_offset(), n,
                       cfg.vocab, cfg.hidden);
  scale_by(x_at(0, n), n * cfg.hidden, embed_factor());
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

template <class R>
size_t Model<R>::Impl::workspace_bytes() const {
  size_t b = rope_cos.bytes() + rope_sin.bytes() + xs.bytes() + shared.bytes() + xf.bytes() +
             rstd_f.bytes() + logits.bytes() + capped.bytes() + local_cos.bytes() +
             local_sin.bytes() + dres.bytes() + dxn.bytes() + datt.bytes() +
             dq.bytes() + dogate.bytes() + dqg.bytes() + dk.bytes() + dv.bytes() + dh.bytes() +
             dgate.bytes() + dup.bytes() + dlin.bytes() +
             attn_scratch.bytes() + decode_scores.bytes() + lora.workspace_bytes() +
             router_logits.bytes() + moe_out.bytes() + dlogits_r.bytes() + dw_r.bytes() +
             aux_dprob.bytes() + dshared.bytes() + dshared_gate.bytes();
  for (const auto& a : saved) b += a.bytes();
  for (const auto& m : ep) b += m->bytes();
  return b;
}

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
  for (int64_t l = 0, la = 0, ll = 0; l < cfg.layers; ++l) slot.push_back(cfg.linear(l) ? ll++ : la++);
  const CacheSizes n = cache_sizes(cfg);
  k.assign(static_cast<size_t>(n.kv_per_position * cap), R(0));
  v.assign(k.size(), R(0));
  conv.assign(static_cast<size_t>(n.conv), R(0));
  state.assign(static_cast<size_t>(n.state), R(0));
}

template <class R>
size_t KvCache<R>::bytes(const Config& cfg, int64_t cap) {
  const CacheSizes n = cache_sizes(cfg);
  return sizeof(R) * static_cast<size_t>(2 * n.kv_per_position * cap + n.conv + n.state);
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
