#pragma once
// LoRA adapters (Hu et al. 2021) on the linear projections of the decoder, as Hugging Face
// PEFT defines them, and the finetune.* / lora.* keys that choose them.
//
// For a targeted projection W [out, in] (y = x W^T) the adapter adds two matrices
//   A [r, in]    Kaiming-uniform as PEFT (kaiming_uniform_ with a = sqrt(5), fan_in = in:
//                U(-1/sqrt(in), 1/sqrt(in))), drawn from (seed, adapter name, element)
//   B [out, r]   zero
// and the projection becomes y = x W^T + scale * dropout(x) A^T B^T, with scale =
// alpha / r (rslora: alpha / sqrt(r)). W is frozen: with adapters bound, the model
// computes no gradient for any base parameter (Model::bind_lora).
//
// The adapters of a model live in one flat buffer, packed in PEFT's order: per layer
// q, k, v, o, gate, up, down, experts.gate_up, experts.down (those targeted), then
// lm_head; each adapter A then B. Names are PEFT's as saved in adapter_model.safetensors,
// without the "base_model.model." prefix: "model.layers.3.self_attn.q_proj.lora_A.weight".
//
// Experts (a mixture-of-experts block's 3-D weights W [E, out, in]: experts.gate_up
// [E, 2I, C], experts.down [E, C, I]) take PEFT's target_parameters adapters (its
// ParamWrapper): one rank-r adapter per expert, stored as two 2-D tensors
//   A [E*r, in]   rows e*r .. e*r+r-1 are expert e's A_e [r, in]
//   B [out, r*E]  column k*E + e is column k of expert e's B_e [out, r]
// and W_e becomes W_e + scale * B_e A_e (PEFT merges the stack before the experts run; zt
// the same: lora_experts.hpp). PEFT nests the two wrappers on the one `experts` module:
// with both targeted gate_up's adapter is "mlp.experts.base_layer", down's "mlp.experts";
// with one, it is "mlp.experts". PEFT refuses dropout on them (so does zt).
//
// QLoRA (finetune.method = qlora) is the same adapters over base weights stored as NF4
// with double quantisation (zt/kernels/nf4.hpp): the targeted W are held as NF4 only.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zt/core/config.hpp"
#include "zt/core/dtype.hpp"
#include "zt/kernels/nf4.hpp"
#include "zt/model/config.hpp"
#include "zt/model/layout.hpp"

namespace zt::model {

enum class FinetuneMethod : uint8_t { kFull, kLora, kQlora };

// The projections an adapter can target (the experts' after lm_head, so the bits of the
// eight projections keep their values; then the Gated DeltaNet mixer's five, Qwen3.5's
// linear_attention layers).
enum class LoraTarget : uint8_t { kQ, kK, kV, kO, kGate, kUp, kDown, kLmHead, kExpertsGateUp, kExpertsDown,
                                  kInQkv, kInZ, kInB, kInA, kOutProj };
inline constexpr int kNumLoraTargets = 15;
// "q", "k", "v", "o", "gate", "up", "down", "lm_head", "experts.gate_up", "experts.down",
// "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj" (the lora.targets names).
std::string_view lora_target_name(LoraTarget t);
// The name PEFT matches: "q_proj", ..., "down_proj", "lm_head" (target_modules), and
// "experts.gate_up_proj", "experts.down_proj" (target_parameters).
std::string_view lora_module_name(LoraTarget t);
// The bits of the eight projections q .. lm_head (LoraConfig::targets; not the experts').
inline constexpr uint32_t kProjectionTargets = (1u << (static_cast<int>(LoraTarget::kLmHead) + 1)) - 1;
// experts.gate_up or experts.down: a 3-D parameter (PEFT's target_parameters).
inline bool is_expert_target(LoraTarget t) {
  return t == LoraTarget::kExpertsGateUp || t == LoraTarget::kExpertsDown;
}
// in_proj_qkv .. out_proj: a projection of a Gated DeltaNet (linear_attention) layer only.
inline bool is_linear_attn_target(LoraTarget t) { return t >= LoraTarget::kInQkv; }
// Whether layer l of the model has the projection t (lm_head: every model).
bool layer_has_target(const Config& m, int l, LoraTarget t);

struct LoraConfig {
  FinetuneMethod method = FinetuneMethod::kFull;
  int64_t rank = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  bool rslora = false;
  uint32_t targets = 0;  // bit (1 << LoraTarget) per targeted projection

  bool enabled() const { return method != FinetuneMethod::kFull; }
  bool has_target(LoraTarget t) const { return (targets >> static_cast<int>(t)) & 1u; }
  // alpha / rank, or alpha / sqrt(rank) with rslora.
  double scale() const;
};

// finetune.method, lora.rank, lora.alpha, lora.dropout, lora.targets, lora.rslora.
void add_finetune_keys(config::Schema& schema);

// Reads and checks the keys against the model. zt::InputError (exit 2) naming the key:
// an unknown target name, rank <= 0 or above the smaller dimension of a targeted layer,
// dropout outside [0, 1), alpha <= 0, no targets with lora/qlora; on a mixture-of-experts
// model gate/up/down (its MLP is the experts: experts.gate_up, experts.down); experts.*
// on a dense model, with lora.dropout > 0 (PEFT's ParamWrapper refuses it) or with qlora.
LoraConfig resolve_lora(const config::Config& cfg, const Config& model);

// QLoRA quantises the base weights from `base` (the dtype the base weights are held in):
// fp32 and bf16 (upcast exactly to fp32, what the NF4 kernels take) can be; any other,
// e.g. fp64 (Model<double>, the finite-difference reference) cannot: zt::InputError
// naming finetune.method. No-op unless method is qlora.
void check_qlora_dtype(const LoraConfig& lora, DType base);

// What the GPU model takes of these adapters: none on the experts (the CPU model has them):
// zt::InputError naming lora.targets and the fix. The engine's device space and
// `zt estimate --device gpu` both call it (with Config::validate_for_device).
void check_device_lora(const LoraConfig& lora);

// The base units of a model with these adapters (ParamLayout(cfg, lora) without its
// adapters' unit; nothing frozen): the model's own with LoRA (or none), QLoRA's without W
// of the targeted projections (ParamLayout::without_weights: read from QloraBase).
ParamLayout lora_base_layout(const Config& cfg, const LoraConfig& lora);

// One adapter of the packed buffer.
struct LoraAdapterInfo {
  std::string name;        // PEFT module path: "model.layers.3.self_attn.q_proj", "lm_head",
                           // "model.layers.3.mlp.experts(.base_layer)"
  std::string weight;      // the base tensor: "model.layers.3.self_attn.q_proj.weight",
                           // "model.layers.3.mlp.experts.gate_up_proj"
  LoraTarget target = LoraTarget::kQ;
  int layer = -1;          // block index; -1 for lm_head
  int64_t in = 0, out = 0;  // the base projection's W [out, in] (an expert's, for experts)
  int64_t experts = 1;     // E for an expert target (W [E, out, in]), else 1
  int64_t a_offset = 0;    // A [experts*r, in] in the packed buffer
  int64_t b_offset = 0;    // B [out, r*experts]
};

class LoraLayout {
 public:
  LoraLayout(const Config& model, const LoraConfig& lora);  // lora.enabled() required

  const LoraConfig& lora() const { return lora_; }
  const std::vector<LoraAdapterInfo>& adapters() const { return adapters_; }
  int64_t numel() const { return numel_; }  // elements of the packed buffer (A and B of all)
  // The adapter of `target` in block `layer` (layer ignored for lm_head); nullptr when
  // that projection is not targeted.
  const LoraAdapterInfo* find(int layer, LoraTarget target) const;

 private:
  LoraConfig lora_;
  int64_t layers_ = 0;
  std::vector<LoraAdapterInfo> adapters_;
  std::vector<int> index_;  // [(layers + 1) * kNumLoraTargets] -> adapters_ index or -1
  int64_t numel_ = 0;
};

// (in, out) of a projection of the model: W [out, in].
void lora_target_dims(const Config& model, LoraTarget t, int64_t& in, int64_t& out);

// PEFT's `print_trainable_parameters` numbers: trainable = the adapters' elements, all =
// the base's (tied embeddings counted once, as torch's named_parameters does) + trainable.
struct TrainableCounts {
  int64_t trainable = 0, all = 0;
  double percent() const;  // 100 * trainable / all
};
TrainableCounts trainable_counts(const Config& model, const LoraConfig& lora);
// "trainable params: 1,024 || all params: 1,050,752 || trainable%: 0.0975" (PEFT's line).
std::string trainable_banner(const TrainableCounts& c);

// PEFT's init into params [layout.numel()]: A ~ U(-1/sqrt(in), 1/sqrt(in)) from
// (seed, "<name>.lora_A.weight", element), B = 0.
template <class T>
void init_lora(const LoraLayout& layout, uint64_t seed, std::span<T> params);

// QLoRA's base: W of every targeted projection quantised NF4 + double quantisation
// (zt/kernels/nf4.hpp, bitsandbytes' layout). Model::bind_qlora makes the model read those
// W from here, dequantised on the fly at each use (forward and backward), instead of from
// the units. Other parameters (embedding, norms, untargeted projections) stay in the units.
class QloraBase {
 public:
  // Quantises from the units' fp32 values (units[u] of layout.unit(u).numel elements).
  // An lm_head adapter on tied embeddings quantises the embedding matrix it shares.
  QloraBase(const LoraLayout& lora, const ParamLayout& layout,
            const std::vector<std::span<const float>>& units);
  // The same from one unit at a time, so a caller need not hold the whole fp32 base:
  // unit(u) returns unit u's values (layout.unit(u).numel elements), read until the next
  // call. Each unit holding a targeted W is asked for once (blocks in order, then the
  // head's unit, or the embedding's with a tied lm_head adapter); no other unit is.
  using UnitReader = std::function<std::span<const float>(int u)>;
  QloraBase(const LoraLayout& lora, const ParamLayout& layout, const UnitReader& unit);
  // W of `target` in block `layer` (layer ignored for lm_head); nullptr when not targeted.
  const kernels::nf4::Quantized* find(int layer, LoraTarget target) const;
  // Bytes of the quantised weights (codes, absmax codes, scales, offsets).
  int64_t bytes() const;

 private:
  LoraLayout lora_;
  std::vector<kernels::nf4::Quantized> weights_;  // one per lora_.adapters(), same order
};

// std::logic_error unless `base` holds W of every projection `layout` leaves out
// (ParamLayout::left_out): what Model::bind_qlora / DeviceModel::bind_qlora check.
void check_qlora_covers(const ParamLayout& layout, const QloraBase& base);

// A base model with its adapters merged in, as PEFT's merge_and_unload: for each adapter,
// W' = W + scale * B A (fp32; each element's sum over r taken in double, rounded once);
// for experts W'_e = W_e + scale * B_e A_e per expert.
// QLoRA's adapters trained over W read from NF4: W is first replaced by its NF4 round
// trip (QloraBase's quantisation), the base the adapters were trained with. An lm_head
// adapter on tied embeddings unties the head (lm_head = E + scale * B A, the embedding
// keeps E), so the merged model computes what the adapters did: PEFT's merge would add
// the update to the shared matrix, and so to the embedding too.
struct MergedWeights {
  Config config;                          // the base's; tied_embeddings false after an untie
  std::vector<std::vector<float>> units;  // [units][numel] of ParamLayout(config)
};
// units [units][numel] of ParamLayout(base), taken (merged in place); adapters
// [layout.numel()].
MergedWeights merge_lora(const Config& base, std::vector<std::vector<float>> units,
                         const LoraLayout& layout, std::span<const float> adapters);

}  // namespace zt::model
