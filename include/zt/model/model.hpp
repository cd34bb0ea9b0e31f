#pragma once
// The Llama-style decoder on CPU: explicit forward and backward over per-unit flat
// parameter buffers (see layout.hpp), with an activation-recompute option and a
// preallocated activation workspace. This is the fp32 reference every fast path is
// checked against; Model<double> exists for finite-difference tests.
//
//   x = embed(tokens)                                  [B, T, C]
//   per block l:  x = x + o_proj(attn(rope(q(n1(x))), rope(k(n1(x))), v(n1(x))))
//                 x = x + down(silu(gate(n2(x))) * up(n2(x)))
//   logits = lm_head(norm(x))                          [B, T, V]
//   loss = mean over targets >= 0 of cross_entropy(logits, target)
//
// The model does not own parameters: each unit is bound to externally owned spans
// (bind_unit), so the ZeRO engine can own, gather and release them. Parameters<Real>
// below is a simple owner for single-process use and tests.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "zt/model/config.hpp"
#include "zt/model/init.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"

namespace zt::comm {
class Comm;
}

namespace zt::model {

// Called around each use of a unit's parameters (all optional). Within one
// loss_and_grad call, with H = L + 1 the head unit:
//   forward:  use 0 (embedding); use 1, ..., L (blocks)
//   head:     use H (and 0 when tied) for its forward, the loss AND its backward;
//             grad_ready(H)
//   backward: use L, ..., 1, each followed by grad_ready; then use 0, grad_ready(0)
// where "use u" is before_use(u) ... after_use(u). loss() and logits_last() do the
// forward and head uses only. A before_use hook may call bind_unit(u, ...) to point the
// unit at a freshly gathered buffer; grad_ready(u) means unit u's gradient for this call
// is complete (e.g. to start its reduce-scatter).
struct UnitHooks {
  std::function<void(int unit)> before_use;
  std::function<void(int unit)> after_use;
  std::function<void(int unit)> grad_ready;
};

// A per-sequence objective (DPO, ORPO: zt/train/preference.hpp). Given each row's summed
// log-probability of its targets logp[b] (targets >= 0 only) and their count count[b], it
// returns the objective's value and writes dlogp[b] = d value / d logp[b]; the model
// backpropagates it through the row's tokens (their cross-entropy gradient times
// -dlogp[b]), the smallest seam between a sequence-level loss and the token-level one.
// Context targets: a target t <= -2 (the token -2 - t) counts in neither logp[b] nor the
// mean cross-entropy; when a micro-batch holds one, logp, count and dlogp hold 2B entries,
// [B + b] the sum over row b's context targets (ORPO's NLL over the prompt, orpo.nll =
// sequence), backpropagated alike with -dlogp[B + b].
using RowObjective = std::function<double(std::span<const double> logp, std::span<const int64_t> count,
                                          std::span<double> dlogp)>;
// The context target of a token (t <= -2), and the token of a target: its context
// token, or -1 for any other target.
constexpr int32_t context_target(int32_t token) { return -2 - token; }
constexpr bool is_context_target(int32_t t) { return t <= -2; }
constexpr int32_t context_token(int32_t t) { return is_context_target(t) ? -2 - t : -1; }

// The state of incremental decoding of one sequence (Model::decode), per block: the keys
// (after RoPE) and values of its past positions for an attention block; for a Gated
// DeltaNet block (Config::linear(l)) the conv's last K - 1 inputs per channel and the
// rule's recurrent state (a fixed size, whatever the length).
template <class Real>
struct KvCache {
  KvCache(const Config& cfg, int64_t capacity);  // capacity in 1 .. cfg.context
  // The bytes such a cache holds (what the generation memory preflight counts).
  static size_t bytes(const Config& cfg, int64_t capacity);
  int64_t capacity = 0;    // positions it can hold
  int64_t length = 0;      // positions held (0 .. capacity); clear by setting 0
  std::vector<Real> k, v;  // [La, capacity, G * D], La attention blocks
  std::vector<Real> conv;  // [Ll, Cc, K - 1], Ll Gated DeltaNet blocks (oldest input first)
  std::vector<Real> state; // [Ll, Hv, Dk, Dv]
  std::vector<int64_t> slot;  // [L] block l's index among the blocks of its kind
};

// The routers of a mixture-of-experts model over its last forward (every block's,
// summed: transformers' load_balancing_loss_func statistics; Model::router_stats).
struct RouterStats {
  std::vector<double> tokens;  // [E] times each expert was among a row's top k
  double rows = 0;             // rows routed (tokens x blocks)
  double aux = 0;              // the load-balancing loss E sum_e T_e P_e / rows^2 (before coef)
  // max over mean of tokens (1: perfectly balanced; 0 when nothing was routed).
  double imbalance() const;
};

template <class Real>
class Model {
 public:
  // max_batch/max_seq preallocate the workspace; a later call with a larger B*T grows it
  // once (the hot path never allocates once the largest shape has been seen).
  explicit Model(const Config& cfg, int64_t max_batch = 1, int64_t max_seq = 0);
  // On the units of `layout` (no adapters' unit): QLoRA's ParamLayout::without_weights,
  // whose targeted W the model reads from the NF4 base only. Such a model refuses any
  // pass (std::logic_error) until bind_qlora gives it a base holding every left-out W.
  explicit Model(const ParamLayout& layout, int64_t max_batch = 1, int64_t max_seq = 0);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Config& config() const;
  const ParamLayout& layout() const;

  // Point unit u at its parameters (numel == layout().unit(u).numel) and gradient
  // buffer (same size; may be empty for eval-only use). Spans must outlive their use.
  void bind_unit(int u, std::span<const Real> params, std::span<Real> grads);
  void set_hooks(UnitHooks hooks);

  // LoRA (lora.hpp): adds adapters to the targeted projections. params/grads
  // [layout.numel()] packed as LoraLayout says (grads may be empty for eval). From then
  // on the base is frozen: loss_and_grad computes no gradient of any unit (their gradient
  // spans may be empty) and ADDS grad_scale * d(loss)/d(adapters) into grads. Dropout
  // (lora.dropout) applies in loss_and_grad only, with masks drawn from the stream set by
  // set_lora_stream (the same stream, the same masks; set a new one per micro-batch).
  void bind_lora(const LoraLayout& layout, std::span<const Real> params, std::span<Real> grads);
  void set_lora_stream(uint64_t stream);
  // QLoRA: W of every projection `base` holds is read from it (NF4, dequantised at each
  // use into a scratch buffer), not from the units; `base` must outlive its use. Needs
  // adapters of the same layout bound (bind_lora). Model<double> refuses it
  // (check_qlora_dtype: NF4 quantises fp32 only).
  void bind_qlora(const QloraBase& base);

  // tokens, targets: [B, T] row-major, token ids in [0, vocab); a target < 0 is ignored.
  // Returns the mean cross-entropy (nats) over the counted targets and ADDS
  // grad_scale * d(mean loss)/d(params) into the bound gradient buffers (the caller
  // zeroes them; accumulation over micro-batches works by calling again, e.g. with
  // grad_scale = 1/micro_batches). recompute: keep only each block's input in the
  // forward and recompute the block in the backward (same result bit for bit).
  // positions [B, T] (optional; empty: 0..T-1 in every row): packed examples, each
  // token's position within its example, restarting at 0 where an example starts (and
  // otherwise one more than the previous token's). RoPE rotates by these positions and a
  // token attends only to the tokens of its own example, as if each example were run
  // alone (HF's position_ids packing).
  double loss_and_grad(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                       int64_t B, int64_t T, bool recompute = false, double grad_scale = 1.0,
                       std::span<const int32_t> positions = {});

  // With an objective set (empty: none, the mean cross-entropy), loss_and_grad returns
  // its value and adds grad_scale * d(value)/d(params) (RowObjective above).
  void set_row_objective(RowObjective objective);
  // Adapters off (on by default): the frozen base alone (QLoRA: its NF4 base), as PEFT's
  // disable_adapter(): DPO's reference model without a second copy of the weights.
  void set_adapters_enabled(bool on);
  // Forward only: logp[b] = the summed log-probability of row b's targets >= 0, count[b]
  // their number (logp, count: [B]; [2B]: then [B + b] row b's context targets').
  void row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                 int64_t T, std::span<const int32_t> positions, std::span<double> logp,
                 std::span<int64_t> count);

  // Forward only: mean cross-entropy over targets >= 0 (0 when none counts).
  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T, std::span<const int32_t> positions = {});

  // Forward one sequence tokens[0..T) and write the logits of its last position
  // (out.size() == vocab). For sampling.
  void logits_last(std::span<const int32_t> tokens, int64_t T, std::span<Real> out);

  // Incremental decoding of one sequence: appends tokens (positions cache.length ..) to
  // the cache and writes the logits of the last of them into out ([vocab]). The first
  // call with the whole prompt (prefill), then one token per call. Same unit uses (and
  // hooks) as logits_last; equal to logits_last over the whole sequence up to rounding.
  // A Gated DeltaNet block runs the chunked rule over several tokens (a prefill) and the
  // recurrent one over one; length 0 starts its conv and state from zeros.
  void decode(std::span<const int32_t> tokens, KvCache<Real>& cache, std::span<Real> out);

  // Bytes held by the activation workspace now.
  size_t workspace_bytes() const;

  // Mixture of experts: the router statistics of the last loss_and_grad / loss /
  // logits_last / row_logps (empty tokens without experts).
  const RouterStats& router_stats() const;

  // Expert parallelism (docs/zero.md "Expert parallelism"): the model's layout must be
  // ParamLayout::expert_slice(cfg, group->size(), group->rank()); every block's experts
  // then run through ExpertParallelMoe over `group` (moe_parallel.hpp), and every pass is
  // collective over it (every rank of the group runs the same calls, each on its own
  // tokens). The router statistics are this rank's tokens'. nullptr: off. Model<float>
  // only (Model<double> refuses it: the exchanges move fp32).
  void set_expert_group(comm::Comm* group);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks per-token positions [B, T] of packed examples (empty passes): each is 0 (an
// example starts) or one more than the previous token's in its row; so 0 <= pos[t] <= t.
// zt::InputError naming the first bad one.
void check_positions(std::span<const int32_t> positions, int64_t B, int64_t T);

// Owns one flat parameter buffer and one gradient buffer per unit.
template <class Real>
class Parameters {
 public:
  explicit Parameters(const ParamLayout& layout);

  int num_units() const { return static_cast<int>(params_.size()); }
  std::span<Real> params(int u) { return params_.at(u); }
  std::span<const Real> params(int u) const { return params_.at(u); }
  std::span<Real> grads(int u) { return grads_.at(u); }
  std::span<const Real> grads(int u) const { return grads_.at(u); }

  void init(const InitOptions& opt);  // every unit, via init_unit
  void zero_grads();
  void bind(Model<Real>& model);  // model.bind_unit(u, params(u), grads(u)) for every u

 private:
  ParamLayout layout_;
  std::vector<std::vector<Real>> params_;
  std::vector<std::vector<Real>> grads_;
};

extern template class Model<float>;
extern template class Model<double>;
extern template struct KvCache<float>;
extern template struct KvCache<double>;
extern template class Parameters<float>;
extern template class Parameters<double>;

}  // namespace zt::model
