#pragma once
// Where every parameter lives. The model's parameters are split into UNITS, each one
// contiguous flat buffer (the unit of gather/shard/offload for the ZeRO engine):
//
//   unit 0          "embedding"  model.embed_tokens.weight            [V, C]
//   unit 1 + l      "layers.l"   model.layers.l.input_layernorm.weight       [C]
//                                model.layers.l.self_attn.q_proj.weight      [H*D, C]
//                               (model.layers.l.self_attn.q_proj.bias        [H*D]  qkv_bias())
//                                model.layers.l.self_attn.k_proj.weight      [G*D, C]
//                               (model.layers.l.self_attn.k_proj.bias        [G*D]  qkv_bias())
//                                model.layers.l.self_attn.v_proj.weight      [G*D, C]
//                               (model.layers.l.self_attn.v_proj.bias        [G*D]  qkv_bias())
//                                model.layers.l.self_attn.o_proj.weight      [C, H*D]
//                               (model.layers.l.self_attn.o_proj.bias        [C]    o_bias())
//                               (model.layers.l.self_attn.q_norm.weight      [D]    qk_norm())
//                               (model.layers.l.self_attn.k_norm.weight      [D]    qk_norm())
//                                model.layers.l.post_attention_layernorm.weight [C]
//                               (Gemma's sandwich: post_attention_layernorm norms the
//                                attention's output, then pre_feedforward_layernorm [C] here,
//                                post_feedforward_layernorm [C] after the MLP)
//                                model.layers.l.mlp.gate_proj.weight         [I, C]
//                                model.layers.l.mlp.up_proj.weight           [I, C]
//                                model.layers.l.mlp.down_proj.weight         [C, I]
//                               with experts (Config::moe(), mixtral) instead of the three:
//                                model.layers.l.mlp.gate.weight              [E, C]  router
//                                model.layers.l.mlp.experts.gate_up_proj     [E, 2I, C]
//                                model.layers.l.mlp.experts.down_proj        [E, C, I]
//                               (gpt-oss: mlp.router.weight [E, C] and .bias [E],
//                                self_attn.sinks [H] after o_proj, the experts' biases
//                                mlp.experts.gate_up_proj_bias [E, 2I], down_proj_bias [E, C])
//                               (transformers 5's names and shapes, I = the expert width
//                               Config::expert_width(); the converter maps the per-expert
//                               files (Mixtral's w1/w3/w2, Qwen's gate/up/down) onto them)
//                               and with Config::shared_expert() (qwen2_moe) after them:
//                                model.layers.l.mlp.shared_expert.gate_proj.weight [S, C]
//                                model.layers.l.mlp.shared_expert.up_proj.weight   [S, C]
//                                model.layers.l.mlp.shared_expert.down_proj.weight [C, S]
//                                model.layers.l.mlp.shared_expert_gate.weight      [1, C]
//                               A layer that is not Config::moe_layer(l) (Qwen's
//                               mlp_only_layers, decoder_sparse_step) has the dense three.
//   unit L + 1      "head"       model.norm.weight                    [C]
//                                lm_head.weight                       [V, C]  (absent when tied)
//
// With LoRA (ParamLayout(cfg, lora), lora.hpp) every unit above is FROZEN (no gradient,
// no optimizer state) and one trainable unit follows them:
//   unit L + 2      "lora"       <PEFT module>.lora_A.weight  [r, in]   then
//                                <PEFT module>.lora_B.weight  [out, r]  per adapter
// in LoraLayout's packing order (its packed buffer IS this unit's flat buffer).
// With QLoRA (finetune.method = qlora) the base units also leave out W of every targeted
// projection (ParamLayout::without_weights): the model reads those W from the NF4 base
// (QloraBase), so no fp32 copy of them is held. A tied lm_head's W is the embedding,
// which the embedding needs: it stays. A left-out tensor has no TensorInfo, its
// BlockOffsets field (or lm_head_offset) is 0 and left_out() names it.
//
// Names and shapes are Hugging Face Llama's (linear weights are [out, in], row-major).
// Tensors are packed back to back in the order above, with no padding: a unit's numel
// is the sum of its tensors' numel. Offsets are in elements from the start of the unit.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "zt/model/config.hpp"

namespace zt::model {

// How a tensor is initialised (see init.hpp).
enum class InitKind : uint8_t {
  kOnes,          // RMSNorm weights
  kNormal,        // N(0, std)
  kNormalScaled,  // N(0, std / sqrt(2 * layers)): o_proj and down_proj (write into the residual)
  kLoraA,         // PEFT's lora_A: U(-1/sqrt(in), 1/sqrt(in)), in = shape[1] (init_lora)
  kZeros,         // PEFT's lora_B
};

struct TensorInfo {
  std::string name;            // Hugging Face name, e.g. "model.layers.3.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // Hugging Face shape, row-major ([out, in] for linear weights)
  int unit = 0;                // index into ParamLayout::units()
  int64_t offset = 0;          // first element within the unit's flat buffer
  int64_t numel = 0;           // product of shape
  // Expert parallelism (ParamLayout::expert_slice): this tensor is elements
  // [global_begin, global_begin + numel) of the whole tensor, whose leading dimension is
  // global_rows (the experts; 0: the tensor is whole, as always without experts split).
  int64_t global_begin = 0;
  int64_t global_rows = 0;
  bool weight_decay = false;   // AdamW decays it: 2-D weights yes (incl. embedding, lm_head), norms no
  InitKind init = InitKind::kNormal;
};

enum class UnitKind : uint8_t { kEmbedding, kBlock, kHead, kAdapters };

struct LoraConfig;  // lora.hpp

struct UnitInfo {
  std::string name;          // "embedding", "layers.3", "head"
  UnitKind kind = UnitKind::kBlock;
  int layer = -1;            // block index for kBlock, else -1
  int64_t numel = 0;         // elements in the unit's flat buffer
  int first_tensor = 0;      // its tensors are tensors()[first_tensor, first_tensor + num_tensors)
  int num_tensors = 0;
  bool frozen = false;       // no gradient, no optimizer state (the base under LoRA)
};

// Offsets of one block's tensors inside its unit (the same for every block unless some
// layers are dense among MoE ones: block_offsets(l)). The biases and q/k norms are -1 when
// the config has none (Config::qkv_bias, o_bias, qk_norm); the dense MLP's -1 and the
// experts' set in a Config::moe_layer(l); the shared expert's -1 without one.
struct BlockOffsets {
  int64_t input_norm, q, k, v, o, post_norm, gate, up, down;
  int64_t q_bias = -1, k_bias = -1, v_bias = -1, o_bias = -1, q_norm = -1, k_norm = -1;
  // Gemma's sandwich (Config::sandwich_norms()): the norms of the attention's and the MLP's
  // outputs (HF post_attention_layernorm, post_feedforward_layernorm); post_norm is then
  // HF's pre_feedforward_layernorm.
  int64_t attn_out_norm = -1, mlp_out_norm = -1;
  // Mixture of experts (gate, up and down are -1 then): the router and the experts.
  int64_t router = -1, experts_gate_up = -1, experts_down = -1;
  // gpt-oss (Config::router_bias(), expert_bias(), attention_sinks()): the router's bias [E],
  // the experts' biases [E, 2I] (gate then up) and [E, C], the sinks [H].
  int64_t router_bias = -1, experts_gate_up_bias = -1, experts_down_bias = -1, sinks = -1;
  // qwen2_moe's shared expert (Config::shared_expert()) and its gate [1, C].
  int64_t shared_gate = -1, shared_up = -1, shared_down = -1, shared_expert_gate = -1;
  // A Gated DeltaNet layer (Config::linear(l); q, k, v, o are -1 then): linear_attn.*.
  int64_t lin_qkv = -1, lin_z = -1, lin_b = -1, lin_a = -1, lin_conv = -1, lin_dt_bias = -1,
          lin_A_log = -1, lin_norm = -1, lin_out = -1;
};

class ParamLayout {
 public:
  explicit ParamLayout(const Config& cfg);  // validates cfg
  // LoRA: the base units frozen, the adapters' unit appended (see above; lora.enabled()
  // required; defined in lora.cpp).
  ParamLayout(const Config& cfg, const LoraConfig& lora);
  // The model's units without W of the projections in `targets` (bit 1 << LoraTarget,
  // lora.hpp; an lm_head bit is ignored with tied embeddings): QLoRA's base. Nothing
  // frozen, no adapters' unit; the other tensors keep their names, order and init.
  static ParamLayout without_weights(const Config& cfg, uint32_t targets);
  // Expert parallelism (moe.expert_parallel = parts, docs/zero.md "Expert parallelism"):
  // the model's units with only experts [index E/parts, (index + 1) E/parts) of every
  // block (gate_up_proj [E/parts, 2I, C], down_proj [E/parts, C, I], each the slice of
  // the whole tensor at TensorInfo::global_begin); every other tensor whole. parts must
  // divide E (zt::InputError naming both otherwise). parts 1: ParamLayout(cfg).
  static ParamLayout expert_slice(const Config& cfg, int parts, int index);
  int expert_parts() const { return expert_parts_; }  // 1 unless expert_slice
  int64_t first_expert() const { return first_expert_; }
  // The elements [begin, end) of unit u that are its routed experts' tensors (gate_up,
  // down, and gpt-oss's biases; this rank's slice under expert_slice); empty ({0, 0}) for
  // units without experts (embedding, head, dense layers). The rest of the unit is
  // replicated over an expert group: norms, attention, router, and qwen2_moe's shared
  // expert, which follows the experts.
  struct ElementRange {
    int64_t begin = 0, end = 0;
  };
  ElementRange expert_range(int u) const;

  const Config& config() const { return cfg_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  const std::vector<UnitInfo>& units() const { return units_; }
  const UnitInfo& unit(int u) const;              // throws InputError when out of range
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // == config().num_params() (+ the adapters' with LoRA, - the left-out W with QLoRA)
  int64_t total_numel() const { return total_numel_; }
  // Bit 1 << LoraTarget per projection whose W the units leave out (QLoRA); 0 otherwise.
  uint32_t left_out() const { return left_out_; }

  static constexpr int kEmbeddingUnit = 0;
  int block_unit(int layer) const { return 1 + layer; }
  int head_unit() const { return 1 + static_cast<int>(cfg_.layers); }
  // The adapters' unit (L + 2) with LoRA, else -1.
  int adapter_unit() const { return adapter_unit_; }
  bool frozen(int u) const { return unit(u).frozen; }
  int64_t trainable_numel() const;  // elements of the units that are not frozen
  // The units that are not frozen (renumbered from 0, their tensors' unit and order
  // kept): the tensors a LoRA run's checkpoint holds. Block offsets stay the model's.
  ParamLayout trainable_only() const;
  // The tensors `keep` accepts, where they are: the same units (numbers, names, numel),
  // each with its kept tensors only, offsets unchanged; total_numel() counts the kept
  // tensors. For reading part of a file into whole units (a QLoRA base's targeted W).
  ParamLayout only(const std::function<bool(const TensorInfo&)>& keep) const;

  // Lookup by Hugging Face name. find() throws zt::InputError naming the tensor;
  // try_find() returns nullptr.
  const TensorInfo& find(std::string_view name) const;
  const TensorInfo* try_find(std::string_view name) const;

  // Fixed offsets used by the forward/backward (no name lookups in the hot path):
  // block l's, and (for code that handles only uniform blocks, as the device model)
  // every block's, which throws std::logic_error when the blocks differ.
  const BlockOffsets& block_offsets(int layer) const;
  const BlockOffsets& block_offsets() const;
  int64_t embed_offset() const { return 0; }        // in the embedding unit
  int64_t final_norm_offset() const { return 0; }   // in the head unit
  // In the head unit (untied only; 0 when left out).
  int64_t lm_head_offset() const { return lm_head_offset_; }

 private:
  ParamLayout() = default;
  void build();  // the units of cfg_ without the left_out_ W

  Config cfg_;
  std::vector<UnitInfo> units_;
  std::vector<TensorInfo> tensors_;
  std::vector<BlockOffsets> blocks_;  // per layer
  int64_t total_numel_ = 0;
  int adapter_unit_ = -1;
  uint32_t left_out_ = 0;
  int64_t lm_head_offset_ = 0;
  int expert_parts_ = 1;
  int64_t first_expert_ = 0;
};

}  // namespace zt::model
