// The Llama-style decoder on one GPU: the pass around the blocks (embedding, the stack of
// blocks of device_block.cpp, the final norm, the head and the fused cross-entropy, the
// unit hooks in the CPU model's order) and the public DeviceModel (see
// zt/model/device_model.hpp). Mirrors src/model/model.cpp op for op. The state and the
// helpers are in device_model_impl.hpp; the engine's TrainableModel in device_trainable.cpp.
#include <algorithm>

#include "device_model_impl.hpp"
#include "zt/comm/device_wait.hpp"
#include "zt/model/moe_parallel.hpp"

namespace zt::model {

static_assert(sizeof(kc::CrossEntropyTotals) == DeviceWorkspaceSizes::kTotalsBytes,
              "DeviceWorkspaceSizes counts one CrossEntropyTotals");
static_assert(kc::kHeadNormChunks == DeviceWorkspaceSizes::kHeadNormChunks,
              "DeviceWorkspaceSizes counts the q/k norm's dw partials");
static_assert(kc::Gemm::kDefaultWorkspaceBytes == kGemmWorkspaceBytes,
              "zt estimate counts the Gemm's default cuBLASLt workspace");

// Checks the shape and the ids on the host (kernels cannot throw) and uploads them.
template <class T, class G>
void DeviceModel<T, G>::Impl::upload_batch(std::span<const int32_t> tokens,
                                           std::span<const int32_t> targets, int64_t B, int64_t Tn,
                                           std::span<const int32_t> positions) {
  if (B <= 0 || Tn <= 0 || Tn > cfg.context)
    throw InputError(strf("batch %lld x sequence %lld (context %lld)", static_cast<long long>(B),
                          static_cast<long long>(Tn), static_cast<long long>(cfg.context)),
                     "B and T must be > 0 and T <= model.context.");
  const int64_t N = B * Tn;
  if (static_cast<int64_t>(tokens.size()) != N || static_cast<int64_t>(targets.size()) != N)
    throw InputError(strf("tokens/targets hold %zu/%zu ids, expected B*T = %lld", tokens.size(),
                          targets.size(), static_cast<long long>(N)),
                     "tokens and targets are [B, T] row-major.");
  for (int64_t n = 0; n < N; ++n) {
    if (tokens[n] < 0 || tokens[n] >= cfg.vocab || targets[n] >= cfg.vocab ||
        targets[n] <= context_target(static_cast<int32_t>(cfg.vocab)))
      throw InputError(
          strf("token %d / target %d at position %lld is outside the vocabulary "
               "[0, %lld)",
               tokens[n], targets[n], static_cast<long long>(n), static_cast<long long>(cfg.vocab)),
          "the data was tokenized for a different vocabulary; target -1 is ignored, "
          "a target <= -2 is the context token -2 - target (model.hpp), both must be < vocab.");
  }
  has_context = std::any_of(targets.begin(), targets.end(), is_context_target);
  check_positions(positions, B, Tn);
  if (!positions.empty() && cfg.linear_layers())
    throw InputError(
        "packed rows (several examples in a row) with Qwen3.5's Gated DeltaNet layers on the GPU "
        "model: its conv and rule run over whole rows",
        "convert the data with `zt convert --no-pack` (one example a row), or train on the CPU "
        "(train.device = cpu), whose model runs them one example at a time.");
  ensure(N, delta_chunk_rows(B, Tn));
  // Through the pinned stage: a copy from pageable memory would first wait for the stream,
  // which may wait on a collective (zt/comm/host_stage.hpp).
  const size_t bytes = static_cast<size_t>(N) * sizeof(int32_t);
  constexpr const char* kWhat = "uploading the batch";
  stage.to_device(tokens_d.data(), tokens.data(), bytes, kWhat);
  pos_d = nullptr;
  if (!positions.empty()) {
    stage.to_device(positions_d.data(), positions.data(), bytes, kWhat);
    pos_d = positions_d.data();
  }
  stage.to_device(targets_d.data(), targets.data(), bytes, kWhat);
  if (!has_context) return;
  context_h.resize(static_cast<size_t>(N));
  std::transform(targets.begin(), targets.end(), context_h.begin(), context_token);
  stage.to_device(context_d.data(), context_h.data(), bytes, kWhat);
}

// Embedding, every block and the final norm: xf [N, C] normalised, xs[L] = x_L. With
// keep_all each block's activations go to acts[l], else all share one set.
template <class T, class G>
void DeviceModel<T, G>::Impl::forward_trunk_and_norm(int64_t B, int64_t Tn, bool keep_all) {
  const int64_t N = B * Tn;
  moe_stats_begin();
  use(0);
  kc::embedding_forward<T>(x_at(0, N), tokens_d.data(), params[0] + layout.embed_offset(), N,
                           cfg.vocab, cfg.hidden, nullptr, stream);
  scale_by(x_at(0, N), N * cfg.hidden, embed_factor());  // Gemma's sqrt(hidden)
  done(0);
  const T* base = x_at(0, N);
  const T* pending = nullptr;
  for (int l = 0; l < static_cast<int>(cfg.layers); ++l) {
    const int u = layout.block_unit(l);
    use(u);
    detail::DeviceBlockActs<T>& a = keep_all ? acts[static_cast<size_t>(l)] : shared[0];
    block_forward(l, base, pending, a, B, Tn, /*with_down=*/true);
    done(u);
    base = a.x_mid.data();
    pending = delta.data();
  }
  moe_stats_end();
  // the head's norm (the head unit is in use from here: see use_head)
  use_head();
  const T* ph = params[static_cast<size_t>(layout.head_unit())];
  kc::residual_rmsnorm_forward<T>(xf.data(), rstd_f.data(), x_at(static_cast<int>(cfg.layers), N),
                                  base, pending, ph + layout.final_norm_offset(), N, cfg.hidden,
                                  cfg.norm_eps, stream, cfg.norm_offset());
  proj_forward(-1, LoraTarget::kLmHead, logits.data(), xf.data(), lm_head_w(), N, cfg.hidden,
               cfg.vocab);
  if (cfg.final_logit_softcap > 0)  // Gemma's cap tanh(logits / cap), in place
    kc::softcap_forward<T>(logits.data(), logits.data(), N * cfg.vocab, cfg.final_logit_softcap,
                           stream);
}

template <class T, class G>
kc::CrossEntropyTotals DeviceModel<T, G>::Impl::read_totals() {
  kc::CrossEntropyTotals t{};
  stage.to_host(&t, totals.data(), sizeof t, "reading the loss");
  return t;
}

template <class T, class G>
double DeviceModel<T, G>::Impl::loss_and_grad(std::span<const int32_t> tokens,
                                              std::span<const int32_t> targets, int64_t B,
                                              int64_t Tn, bool recompute, double grad_scale,
                                              std::span<const int32_t> positions) {
  upload_batch(tokens, targets, B, Tn, positions);
  if (!recompute) ensure_all_acts(B * Tn, delta_chunk_rows(B, Tn));
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
  // The load-balancing loss (router_aux_loss): its gradient enters each block's router in
  // the backward, its value joins the loss once the pass is done (moe_aux_term).
  moe_aux_begin(grad_scale);
  const double cap = cfg.final_logit_softcap;
  if (cap > 0)  // the capped logits, for the cap's backward (the logits become dlogits)
    ZT_CUDA_CHECK(cudaMemcpyAsync(capped.data(), logits.data(),
                                  static_cast<size_t>(N * V) * sizeof(T),
                                  cudaMemcpyDeviceToDevice, stream));
  double value = 0;  // the row objective's (device_objective.cpp)
  if (objective)
    value = objective_backward(B, Tn, grad_scale);
  else
    kc::cross_entropy<T>(logits.data(), logits.data(), targets_d.data(), N, V, scale,
                         row_loss.data(), totals.data(), stream);
  if (cap > 0)
    kc::softcap_backward<T>(logits.data(), logits.data(), capped.data(), N * V, cap, stream);
  G* g_lm = cfg.tied_embeddings ? base_grad(0, layout.embed_offset())
                                : base_grad(hu, layout.lm_head_offset());
  proj_backward(-1, LoraTarget::kLmHead, dxn.data(), g_lm, logits.data(), xf.data(), lm_head_w(), N,
                C, V, /*accumulate_dx=*/false);
  kc::rmsnorm_backward<T, G>(dres.data(), base_grad(hu, layout.final_norm_offset()), dxn.data(),
                             x_at(static_cast<int>(cfg.layers), N),
                             params[static_cast<size_t>(hu)] + layout.final_norm_offset(),
                             rstd_f.data(), N, C, /*accumulate_dx=*/false, stream,
                             cfg.norm_offset());
  done_head();
  ready(hu);

  for (int l = static_cast<int>(cfg.layers) - 1; l >= 0; --l) {
    const int u = layout.block_unit(l);
    use(u);
    if (recompute) block_forward(l, x_at(l, N), nullptr, shared[0], B, Tn, /*with_down=*/false);
    block_backward(l, recompute ? shared[0] : acts[static_cast<size_t>(l)], B, Tn);
    done(u);
    ready(u);
  }

  use(0);
  if (!lora.bound()) {  // a frozen embedding needs no backward at all
    scale_by(dres.data(), N * C, embed_factor());
    kc::embedding_backward<T, G>(grad_of(0) + layout.embed_offset(), dres.data(), tokens_d.data(),
                                 N, C, stream);
  }
  done(0);
  ready(0);
  if (objective) {
    comm::wait_stream(stream, "the row objective's backward");  // the step's work is done
    return value + moe_aux_term();
  }
  const kc::CrossEntropyTotals t = read_totals();
  return (count > 0 ? t.loss_sum / static_cast<double>(count) : 0.0) + moe_aux_term();
}

template <class T, class G>
double DeviceModel<T, G>::Impl::loss(std::span<const int32_t> tokens,
                                     std::span<const int32_t> targets, int64_t B, int64_t Tn,
                                     std::span<const int32_t> positions) {
  upload_batch(tokens, targets, B, Tn, positions);
  const int64_t N = B * Tn;
  forward_trunk_and_norm(B, Tn, /*keep_all=*/false);
  done_head();
  kc::cross_entropy<T>(nullptr, logits.data(), targets_d.data(), N, cfg.vocab, 1.0, row_loss.data(),
                       totals.data(), stream);
  const kc::CrossEntropyTotals t = read_totals();
  return (t.count > 0 ? t.loss_sum / static_cast<double>(t.count) : 0.0) + moe_aux_term();
}

template <class T, class G>
void DeviceModel<T, G>::Impl::logits_last(std::span<const int32_t> tokens, int64_t Tn, T* out) {
  const std::vector<int32_t> no_targets(tokens.size(), -1);
  upload_batch(tokens, no_targets, 1, Tn);
  forward_trunk_and_norm(1, Tn, /*keep_all=*/false);
  done_head();
  ZT_CUDA_CHECK(cudaMemcpyAsync(out, logits.data() + (Tn - 1) * cfg.vocab,
                                static_cast<size_t>(cfg.vocab) * sizeof(T),
                                cudaMemcpyDeviceToDevice, stream));
  comm::wait_stream(stream, "reading the last logits");
  moe_aux_term();  // router_stats of this forward, as Model's
}

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
  if (max_batch > 0 && max_seq > 0) {
    const int64_t seq = std::min(max_seq, cfg.context);
    impl_->ensure(max_batch * seq, delta_chunk_rows(max_batch, seq));
  }
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
  if (impl_->expert_group) refuse_expert_parallel_lora(impl_->expert_group->size());
  impl_->lora.bind(layout, params, grads, impl_->capacity);
}

template <class T, class G>
void DeviceModel<T, G>::set_expert_group(comm::Comm* group) {
  impl_->set_expert_group(group);  // device_moe_ep.cpp
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
void DeviceModel<T, G>::set_row_objective(RowObjective objective) {
  impl_->objective = std::move(objective);
}

template <class T, class G>
void DeviceModel<T, G>::set_adapters_enabled(bool on) {
  impl_->lora.set_enabled(on);
}

template <class T, class G>
void DeviceModel<T, G>::row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                                  int64_t B, int64_t T_, std::span<const int32_t> positions,
                                  std::span<double> logp, std::span<int64_t> count) {
  impl_->row_logps(tokens, targets, B, T_, positions, logp, count);
}

template <class T, class G>
const RouterStats& DeviceModel<T, G>::router_stats() const {
  return impl_->router;
}

template <class T, class G>
size_t DeviceModel<T, G>::workspace_bytes() const {
  return impl_->workspace_bytes();
}

template <class T, class G>
void DeviceModel<T, G>::logits_last(std::span<const int32_t> tokens, int64_t T_, T* out) {
  impl_->logits_last(tokens, T_, out);
}

template class DeviceModel<float, float>;
template class DeviceModel<kc::bf16_t, float>;
template class DeviceModel<kc::bf16_t, kc::bf16_t>;

}  // namespace zt::model
