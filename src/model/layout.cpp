// Parameter layout: units, Hugging Face names, shapes and offsets.
#include "zt/model/layout.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::model {

namespace {

// Appends a tensor to the unit being built; returns its offset in the unit.
int64_t add_tensor(std::vector<TensorInfo>& tensors, UnitInfo& unit, int unit_index,
                   std::string name, std::vector<int64_t> shape, InitKind init) {
  TensorInfo t;
  t.name = std::move(name);
  t.numel = 1;
  for (int64_t d : shape) t.numel *= d;
  t.shape = std::move(shape);
  t.unit = unit_index;
  t.offset = unit.numel;
  t.weight_decay = t.shape.size() >= 2;
  t.init = init;
  unit.numel += t.numel;
  unit.num_tensors += 1;
  tensors.push_back(std::move(t));
  return tensors.back().offset;
}

// Bits of LoraTarget (lora.hpp, which checks them): q k v o gate up down lm_head = 0..7.
enum : uint32_t { kQ = 1u, kK = 2u, kV = 4u, kO = 8u, kGate = 16u, kUp = 32u, kDown = 64u, kHead = 128u,
                  kInQkv = 1u << 10, kInZ = 1u << 11, kInB = 1u << 12, kInA = 1u << 13,
                  kOutProj = 1u << 14 };

}  // namespace

ParamLayout::ParamLayout(const Config& cfg) : ParamLayout(without_weights(cfg, 0)) {}

ParamLayout ParamLayout::without_weights(const Config& cfg, uint32_t targets) {
  ParamLayout p;
  p.cfg_ = cfg;
  p.cfg_.validate();
  if (p.cfg_.tied_embeddings) targets &= ~kHead;  // the embedding needs it
  p.left_out_ = targets & (0xffu | kInQkv | kInZ | kInB | kInA | kOutProj);  // not the experts
  p.build();
  return p;
}

ParamLayout ParamLayout::expert_slice(const Config& cfg, int parts, int index) {
  ParamLayout p;
  p.cfg_ = cfg;
  p.cfg_.validate();
  if (parts < 1 || !cfg.moe() || cfg.experts % parts != 0 || index < 0 || index >= parts)
    throw InputError(strf("moe.expert_parallel = %d with model.experts = %lld: the expert group "
                          "size must divide the expert count",
                          parts, static_cast<long long>(cfg.experts)),
                     "set moe.expert_parallel to a divisor of model.experts (and of the ranks), "
                     "or 1 (no expert parallelism; also for models without experts)");
  p.expert_parts_ = parts;
  p.first_expert_ = cfg.experts / parts * index;
  p.build();
  return p;
}

ParamLayout::ElementRange ParamLayout::expert_range(int u) const {
  const UnitInfo& info = unit(u);
  if (info.kind != UnitKind::kBlock) return {};
  const BlockOffsets& b = block_offsets(info.layer);
  if (b.experts_gate_up < 0) return {};
  // build() adds the experts' tensors one after another: gate_up, down, gpt-oss's biases.
  const int64_t last = std::max({b.experts_down, b.experts_gate_up_bias, b.experts_down_bias});
  for (int t = info.first_tensor; t < info.first_tensor + info.num_tensors; ++t)
    if (tensors_[static_cast<size_t>(t)].offset == last)
      return {b.experts_gate_up, last + tensors_[static_cast<size_t>(t)].numel};
  throw std::logic_error(strf("ParamLayout::expert_range(%d): no tensor at the experts' last offset", u));
}

void ParamLayout::build() {
  const uint32_t out = left_out_;
  // Adds the tensor unless its projection is left out; its offset (0 when left out).
  const auto maybe = [&](uint32_t bit, UnitInfo& u, int ui, std::string name,
                         std::vector<int64_t> shape, InitKind init) -> int64_t {
    if (out & bit) return 0;
    return add_tensor(tensors_, u, ui, std::move(name), std::move(shape), init);
  };
  const int64_t V = cfg_.vocab, C = cfg_.hidden, I = cfg_.intermediate;
  const int64_t HD = cfg_.q_dim(), GD = cfg_.kv_dim(), D = cfg_.head_dim();
  const bool qkv_bias = cfg_.qkv_bias(), o_bias = cfg_.o_bias(), qk_norm = cfg_.qk_norm();
  // Norm weights start as the identity: ones, or zeros under Gemma's (1 + w).
  const InitKind norm_init = cfg_.norm_offset() != 0 ? InitKind::kZeros : InitKind::kOnes;
  const bool sandwich = cfg_.sandwich_norms();

  // unit 0: embedding
  {
    UnitInfo u{"embedding", UnitKind::kEmbedding, -1, 0, static_cast<int>(tensors_.size()), 0};
    add_tensor(tensors_, u, 0, "model.embed_tokens.weight", {V, C}, InitKind::kNormal);
    units_.push_back(u);
  }
  // units 1..L: blocks
  for (int l = 0; l < static_cast<int>(cfg_.layers); ++l) {
    const int ui = 1 + l;
    UnitInfo u{strf("layers.%d", l), UnitKind::kBlock, l, 0, static_cast<int>(tensors_.size()), 0};
    const std::string p = strf("model.layers.%d.", l);
    BlockOffsets o{};
    o.input_norm = add_tensor(tensors_, u, ui, p + "input_layernorm.weight", {C}, norm_init);
    // Biases (zero-initialised, as torch's Linear in HF's _init_weights) follow their weight.
    const auto bias = [&](const char* proj, int64_t n) {
      return add_tensor(tensors_, u, ui, p + "self_attn." + proj + ".bias", {n}, InitKind::kZeros);
    };
    if (cfg_.linear(l)) {  // Qwen3.5's Gated DeltaNet mixer, transformers' names and shapes
      const std::string la = p + "linear_attn.";
      const int64_t Cc = cfg_.linear_conv_dim(), Hv = cfg_.linear_value_heads;
      const int64_t VD = Hv * cfg_.linear_value_dim;
      const auto add = [&](const char* name, std::vector<int64_t> shape, InitKind init) {
        return add_tensor(tensors_, u, ui, la + name, std::move(shape), init);
      };
      const auto proj = [&](uint32_t bit, const char* name, std::vector<int64_t> shape, InitKind init) {
        return maybe(bit, u, ui, la + name, std::move(shape), init);
      };
      o.q = o.k = o.v = o.o = -1;
      o.lin_qkv = proj(kInQkv, "in_proj_qkv.weight", {Cc, C}, InitKind::kNormal);
      o.lin_z = proj(kInZ, "in_proj_z.weight", {VD, C}, InitKind::kNormal);
      o.lin_b = proj(kInB, "in_proj_b.weight", {Hv, C}, InitKind::kNormal);
      o.lin_a = proj(kInA, "in_proj_a.weight", {Hv, C}, InitKind::kNormal);
      o.lin_conv = add("conv1d.weight", {Cc, 1, cfg_.linear_conv_kernel}, InitKind::kNormal);
      o.lin_dt_bias = add("dt_bias", {Hv}, InitKind::kOnes);
      o.lin_A_log = add("A_log", {Hv}, InitKind::kZeros);  // A = 1
      o.lin_norm = add("norm.weight", {cfg_.linear_value_dim}, InitKind::kOnes);  // w, not 1 + w
      o.lin_out = proj(kOutProj, "out_proj.weight", {C, VD}, InitKind::kNormalScaled);
    } else {
    // q_proj: [H D, C], or with the output gate [H 2D, C], each head's query then its gate.
    const int64_t QD = cfg_.q_proj_dim();
    o.q = maybe(kQ, u, ui, p + "self_attn.q_proj.weight", {QD, C}, InitKind::kNormal);
    if (qkv_bias) o.q_bias = bias("q_proj", QD);
    o.k = maybe(kK, u, ui, p + "self_attn.k_proj.weight", {GD, C}, InitKind::kNormal);
    if (qkv_bias) o.k_bias = bias("k_proj", GD);
    o.v = maybe(kV, u, ui, p + "self_attn.v_proj.weight", {GD, C}, InitKind::kNormal);
    if (qkv_bias) o.v_bias = bias("v_proj", GD);
    o.o = maybe(kO, u, ui, p + "self_attn.o_proj.weight", {C, HD}, InitKind::kNormalScaled);
    if (o_bias) o.o_bias = bias("o_proj", C);
    if (cfg_.attention_sinks())  // zeros: no sink weight at first (exp(0) joins each row)
      o.sinks = add_tensor(tensors_, u, ui, p + "self_attn.sinks", {cfg_.heads}, InitKind::kZeros);
    if (qk_norm) {
      o.q_norm = add_tensor(tensors_, u, ui, p + "self_attn.q_norm.weight", {D}, norm_init);
      o.k_norm = add_tensor(tensors_, u, ui, p + "self_attn.k_norm.weight", {D}, norm_init);
    }
    }
    // The sandwich (Gemma): post_attention_layernorm norms the attention's output and
    // pre_feedforward_layernorm is the MLP's input norm (Llama's post_attention_layernorm).
    if (sandwich)
      o.attn_out_norm = add_tensor(tensors_, u, ui, p + "post_attention_layernorm.weight", {C},
                                   norm_init);
    o.post_norm = add_tensor(tensors_, u, ui,
                             p + (sandwich ? "pre_feedforward_layernorm.weight"
                                           : "post_attention_layernorm.weight"),
                             {C}, norm_init);
    if (cfg_.moe_layer(l)) {
      const int64_t E = cfg_.experts, IE = cfg_.expert_width();
      const int64_t El = E / expert_parts_;  // this rank's slice of the experts (all: 1 part)
      o.gate = o.up = o.down = -1;
      const bool gpt_oss = cfg_.router_bias();  // gpt-oss's router: mlp.router.weight, .bias
      o.router = add_tensor(tensors_, u, ui, p + (gpt_oss ? "mlp.router.weight" : "mlp.gate.weight"),
                            {E, C}, InitKind::kNormal);
      if (gpt_oss)
        o.router_bias = add_tensor(tensors_, u, ui, p + "mlp.router.bias", {E}, InitKind::kZeros);
      const size_t first_expert_tensor = tensors_.size();
      o.experts_gate_up = add_tensor(tensors_, u, ui, p + "mlp.experts.gate_up_proj",
                                     {El, 2 * IE, C}, InitKind::kNormal);
      o.experts_down = add_tensor(tensors_, u, ui, p + "mlp.experts.down_proj", {El, C, IE},
                                  InitKind::kNormalScaled);
      if (cfg_.expert_bias()) {  // gate then up (as gate_up_proj), not interleaved as in HF's file
        o.experts_gate_up_bias = add_tensor(tensors_, u, ui, p + "mlp.experts.gate_up_proj_bias",
                                            {El, 2 * IE}, InitKind::kZeros);
        o.experts_down_bias = add_tensor(tensors_, u, ui, p + "mlp.experts.down_proj_bias",
                                         {El, C}, InitKind::kZeros);
      }
      if (expert_parts_ > 1)  // the slice of each whole tensor (experts lead; biases too)
        for (size_t t = first_expert_tensor; t < tensors_.size(); ++t) {
          tensors_[t].global_rows = E;
          tensors_[t].global_begin = first_expert_ * (tensors_[t].numel / El);
        }
      if (cfg_.shared_expert()) {
        const int64_t S = cfg_.shared_expert_intermediate;
        const std::string se = p + "mlp.shared_expert.";
        o.shared_gate = add_tensor(tensors_, u, ui, se + "gate_proj.weight", {S, C}, InitKind::kNormal);
        o.shared_up = add_tensor(tensors_, u, ui, se + "up_proj.weight", {S, C}, InitKind::kNormal);
        o.shared_down = add_tensor(tensors_, u, ui, se + "down_proj.weight", {C, S},
                                   InitKind::kNormalScaled);
        o.shared_expert_gate = add_tensor(tensors_, u, ui, p + "mlp.shared_expert_gate.weight",
                                          {1, C}, InitKind::kNormal);
      }
    } else {
      o.gate = maybe(kGate, u, ui, p + "mlp.gate_proj.weight", {I, C}, InitKind::kNormal);
      o.up = maybe(kUp, u, ui, p + "mlp.up_proj.weight", {I, C}, InitKind::kNormal);
      o.down = maybe(kDown, u, ui, p + "mlp.down_proj.weight", {C, I}, InitKind::kNormalScaled);
    }
    if (sandwich)
      o.mlp_out_norm = add_tensor(tensors_, u, ui, p + "post_feedforward_layernorm.weight", {C},
                                  norm_init);
    blocks_.push_back(o);
    units_.push_back(u);
  }
  // unit L+1: final norm and LM head
  {
    const int ui = 1 + static_cast<int>(cfg_.layers);
    UnitInfo u{"head", UnitKind::kHead, -1, 0, static_cast<int>(tensors_.size()), 0};
    add_tensor(tensors_, u, ui, "model.norm.weight", {C}, norm_init);
    if (!cfg_.tied_embeddings) {
      lm_head_offset_ = maybe(kHead, u, ui, "lm_head.weight", {V, C}, InitKind::kNormal);
    }
    units_.push_back(u);
  }
  for (const auto& u : units_) total_numel_ += u.numel;
  ZT_CHECK(out != 0 || expert_parts_ > 1 || total_numel_ == cfg_.num_params(), "layout and Config::num_params() disagree",
           "a bug in zt's model layout.");
}

const BlockOffsets& ParamLayout::block_offsets(int layer) const {
  if (layer < 0 || layer >= static_cast<int>(blocks_.size()))
    throw std::logic_error(strf("ParamLayout::block_offsets(%d): the model has %zu blocks", layer,
                                blocks_.size()));
  return blocks_[static_cast<size_t>(layer)];
}

const BlockOffsets& ParamLayout::block_offsets() const {
  // (BlockOffsets is int64_t fields only: equal bytes, equal offsets)
  static_assert(sizeof(BlockOffsets) % sizeof(int64_t) == 0, "BlockOffsets holds int64_t only");
  for (const BlockOffsets& b : blocks_)
    if (std::memcmp(&b, &blocks_.front(), sizeof(BlockOffsets)) != 0)
      throw std::logic_error("ParamLayout::block_offsets(): the blocks of model " + cfg_.name +
                             " differ (dense layers among MoE ones, linear among attention "
                             "ones); use block_offsets(layer)");
  return block_offsets(0);
}

const UnitInfo& ParamLayout::unit(int u) const {
  if (u < 0 || u >= num_units()) {
    throw InputError(strf("parameter unit %d does not exist (the model has %d units)", u,
                          num_units()),
                     "units are 0 = embedding, 1..layers = blocks, layers+1 = head (layers+2 = the "
                     "LoRA adapters).");
  }
  return units_[static_cast<size_t>(u)];
}

int64_t ParamLayout::trainable_numel() const {
  int64_t n = 0;
  for (const UnitInfo& u : units_) n += u.frozen ? 0 : u.numel;
  return n;
}

ParamLayout ParamLayout::trainable_only() const {
  ParamLayout out = *this;
  out.units_.clear();
  out.tensors_.clear();
  out.total_numel_ = 0;
  out.adapter_unit_ = -1;
  for (int u = 0; u < num_units(); ++u) {
    const UnitInfo& from = units_[static_cast<size_t>(u)];
    if (from.frozen) continue;
    const int ui = static_cast<int>(out.units_.size());
    UnitInfo unit = from;
    unit.first_tensor = static_cast<int>(out.tensors_.size());
    for (int t = from.first_tensor; t < from.first_tensor + from.num_tensors; ++t) {
      out.tensors_.push_back(tensors_[static_cast<size_t>(t)]);
      out.tensors_.back().unit = ui;
    }
    if (u == adapter_unit_) out.adapter_unit_ = ui;
    out.units_.push_back(unit);
    out.total_numel_ += unit.numel;
  }
  return out;
}

ParamLayout ParamLayout::only(const std::function<bool(const TensorInfo&)>& keep) const {
  ParamLayout out = *this;
  out.tensors_.clear();
  out.total_numel_ = 0;
  for (UnitInfo& unit : out.units_) {
    const int first = unit.first_tensor, n = unit.num_tensors;
    unit.first_tensor = static_cast<int>(out.tensors_.size());
    unit.num_tensors = 0;
    for (int t = first; t < first + n; ++t) {
      const TensorInfo& info = tensors_[static_cast<size_t>(t)];
      if (!keep(info)) continue;
      out.tensors_.push_back(info);
      unit.num_tensors += 1;
      out.total_numel_ += info.numel;
    }
  }
  return out;
}

const TensorInfo* ParamLayout::try_find(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorInfo& ParamLayout::find(std::string_view name) const {
  if (const TensorInfo* t = try_find(name)) return *t;
  throw InputError(strf("no parameter named '%.*s' in model '%s'", static_cast<int>(name.size()),
                        name.data(), cfg_.name.c_str()),
                   "names follow Hugging Face Llama, e.g. "
                   "model.layers.0.self_attn.q_proj.weight; tied models have no lm_head.weight.");
}

}  // namespace zt::model
