// LoRA: the finetune.* / lora.* keys, the packed adapter layout, PEFT's init and
// parameter counts.
#include "zt/model/lora.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <ranges>
#include <stdexcept>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/init.hpp"
#include "lora_experts.hpp"

namespace zt::model {

namespace {

constexpr std::array<std::string_view, kNumLoraTargets> kTargetNames = {
    "q", "k", "v", "o", "gate", "up", "down", "lm_head", "experts.gate_up", "experts.down",
    "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"};
constexpr std::array<std::string_view, kNumLoraTargets> kModuleNames = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head",
    "experts.gate_up_proj", "experts.down_proj", "in_proj_qkv", "in_proj_z", "in_proj_b",
    "in_proj_a", "out_proj"};
// A block's targets in packing order (PEFT's: attention or the Gated DeltaNet mixer, MLP,
// then the experts); a layer holds those it has (layer_has_target).
constexpr std::array<LoraTarget, 14> kBlockTargets = {
    LoraTarget::kInQkv, LoraTarget::kInZ, LoraTarget::kInB, LoraTarget::kInA, LoraTarget::kOutProj,
    LoraTarget::kQ,    LoraTarget::kK,    LoraTarget::kV,
    LoraTarget::kO,    LoraTarget::kGate, LoraTarget::kUp,
    LoraTarget::kDown, LoraTarget::kExpertsGateUp, LoraTarget::kExpertsDown};

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const auto e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

// "q, v,lm_head" -> bits; an unknown or empty name is an InputError naming lora.targets.
uint32_t parse_targets(std::string_view text) {
  uint32_t bits = 0;
  // (A find loop, not std::views::split: clang with libstdc++ 12, the fuzz build, rejects
  // split over a string_view.)
  for (size_t begin = 0, comma = 0; comma != std::string_view::npos; begin = comma + 1) {
    comma = text.find(',', begin);
    const std::string name = trim(text.substr(begin, comma == std::string_view::npos ? std::string_view::npos : comma - begin));
    const auto it = std::ranges::find(kTargetNames, name);
    if (it == kTargetNames.end()) {
      throw InputError(strf("lora.targets = \"%s\": unknown target \"%s\"",
                            std::string(text).c_str(), name.c_str()),
                       "list any of q, k, v, o, gate, up, down, lm_head, experts.gate_up, "
                       "experts.down, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, "
                       "comma-separated (e.g. \"q,v\").");
    }
    bits |= 1u << static_cast<int>(it - kTargetNames.begin());
  }
  return bits;
}

// PEFT's module path of the adapter; for experts the ParamWrapper's: gate_up's is wrapped
// by down's when both are targeted (PEFT wraps the parameters of `experts` in their
// registration order, gate_up_proj first), so it sits at "experts.base_layer".
std::string module_path(int layer, LoraTarget t, const LoraConfig& l) {
  if (t == LoraTarget::kLmHead) return "lm_head";
  if (is_expert_target(t))
    return strf("model.layers.%d.mlp.experts%s", layer,
                t == LoraTarget::kExpertsGateUp && l.has_target(LoraTarget::kExpertsDown)
                    ? ".base_layer" : "");
  const bool attn = t <= LoraTarget::kO;
  return strf("model.layers.%d.%s.%s", layer,
              is_linear_attn_target(t) ? "linear_attn" : attn ? "self_attn" : "mlp",
              std::string(lora_module_name(t)).c_str());
}

}  // namespace

bool layer_has_target(const Config& m, int l, LoraTarget t) {
  if (is_linear_attn_target(t)) return m.linear(l);
  if (t <= LoraTarget::kO) return !m.linear(l);
  return true;  // the MLP's, the experts' (check_lora_moe) and lm_head
}

std::string_view lora_target_name(LoraTarget t) { return kTargetNames[static_cast<size_t>(t)]; }
std::string_view lora_module_name(LoraTarget t) { return kModuleNames[static_cast<size_t>(t)]; }

double LoraConfig::scale() const {
  const double r = static_cast<double>(rank);
  return rslora ? alpha / std::sqrt(r) : alpha / r;
}

void add_finetune_keys(config::Schema& s) {
  s.add_string("finetune.method", "full",
               "full (every parameter trains), lora (frozen base + adapters) or qlora (the "
               "targeted base weights read from NF4 + double quantisation); docs/finetune.md")
      .choices = {"full", "lora", "qlora"};
  {
    auto& k = s.add_int("lora.rank", 8, "adapter rank r (1 .. the smaller side of a targeted W)");
    k.min = 1;
    k.max = 1 << 20;  // model.hidden's limit: no W has a smaller side above it
  }
  {
    auto& k = s.add_float("lora.alpha", 16.0, "adapter scale numerator: scale = alpha / r (> 0)");
    k.min = 0.0;
    k.min_exclusive = true;
    k.max = 1e6;  // 1e308 made every step's gradient Inf (issue 36, class 7); PEFT's are 8-512
  }
  {
    auto& k = s.add_float("lora.dropout", 0.0, "dropout on the adapter's input, in [0, 1)");
    k.min = 0.0;
    k.max = 1.0;  // 1 itself is refused by resolve_lora (the range is inclusive)
  }
  s.add_string("lora.targets", "q,v",
               "projections with adapters, comma-separated: any of q, k, v, o, gate, up, down, "
               "lm_head, on a mixture-of-experts model experts.gate_up, experts.down, and on "
               "the Gated DeltaNet layers of Qwen3.5 in_proj_qkv, in_proj_z, in_proj_b, "
               "in_proj_a, out_proj");
  s.add_bool("lora.rslora", false, "rank-stabilised scale alpha / sqrt(r) instead of alpha / r");
}

// A mixture-of-experts block has no gate/up/down projections: its MLP is the experts
// (3-D tensors, PEFT's target_parameters: experts.gate_up, experts.down). A dense block has
// no experts. PEFT's ParamWrapper refuses dropout; zt's NF4 base holds no 3-D weights.
static void check_lora_moe(const Config& m, const LoraConfig& l) {
  for (const LoraTarget t : {LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown})
    if (m.moe() && l.has_target(t))
      throw InputError("lora.targets has " + std::string(lora_target_name(t)) + " on a " +
                           m.family + " model: its blocks' MLP is the experts (the 3-D tensors "
                           "gate_up_proj and down_proj), not gate/up/down projections",
                       "target the experts with experts.gate_up and experts.down (PEFT's "
                       "target_parameters), the attention with q, k, v, o; docs/finetune.md.");
  for (const LoraTarget t : {LoraTarget::kExpertsGateUp, LoraTarget::kExpertsDown}) {
    if (!l.has_target(t)) continue;
    const std::string name(lora_target_name(t));
    if (!m.moe())
      throw InputError("lora.targets has " + name + " on a " + m.family +
                           " model, which has no experts (model.experts = 0)",
                       "target its MLP with gate, up, down.");
    if (m.dense_layers())
      throw InputError("lora.targets has " + name + " on a " + m.family + " model with dense "
                           "layers among its mixture-of-experts layers (mlp_only_layers / "
                           "decoder_sparse_step)",
                       "target the attention (q, k, v, o) on this model; adapters on the "
                       "experts need every layer routed.");
    if (l.dropout > 0)
      throw InputError(strf("lora.dropout = %g with lora.targets %s: adapters on the experts "
                            "(PEFT's ParamWrapper) take no dropout",
                            l.dropout, name.c_str()),
                       "set lora.dropout = 0, or drop the experts.* targets.");
    if (l.method == FinetuneMethod::kQlora)
      throw InputError("finetune.method = qlora with lora.targets " + name +
                           ": zt's NF4 base holds no expert weights (3-D tensors)",
                       "use finetune.method = lora for adapters on the experts, or target "
                       "the attention only with qlora.");
  }
}

// The Gated DeltaNet targets need its layers; q, k, v, o need a full-attention layer.
static void check_lora_linear(const Config& m, const LoraConfig& l) {
  for (int t = 0; t < kNumLoraTargets; ++t) {
    const auto target = static_cast<LoraTarget>(t);
    if (!l.has_target(target)) continue;
    bool any = false;
    for (int layer = 0; layer < static_cast<int>(m.layers) && !any; ++layer)
      any = layer_has_target(m, layer, target);
    if (!any)
      throw InputError("lora.targets has " + std::string(lora_target_name(target)) + ", which no "
                           "layer of this " + m.family + " model has",
                       is_linear_attn_target(target)
                           ? "in_proj_qkv, in_proj_z, in_proj_b, in_proj_a and out_proj are the "
                             "Gated DeltaNet layers' (Qwen3.5); target q, k, v, o here."
                           : "this model's layers are all Gated DeltaNet: target in_proj_qkv, "
                             "in_proj_z, in_proj_b, in_proj_a, out_proj.");
  }
}

void lora_target_dims(const Config& m, LoraTarget t, int64_t& in, int64_t& out) {
  const int64_t C = m.hidden, HD = m.heads * m.head_dim(), GD = m.kv_dim(), I = m.intermediate;
  switch (t) {
    case LoraTarget::kQ: in = C, out = m.q_proj_dim(); return;  // with the output gate's rows
    case LoraTarget::kK: case LoraTarget::kV: in = C, out = GD; return;
    case LoraTarget::kO: in = HD, out = C; return;
    case LoraTarget::kGate: case LoraTarget::kUp: in = C, out = I; return;
    case LoraTarget::kDown: in = I, out = C; return;
    case LoraTarget::kLmHead: in = C, out = m.vocab; return;
    case LoraTarget::kExpertsGateUp: in = C, out = 2 * m.expert_width(); return;  // one expert's [2I, C]
    case LoraTarget::kExpertsDown: in = m.expert_width(), out = C; return;        // one expert's [C, I]
    case LoraTarget::kInQkv: in = C, out = m.linear_conv_dim(); return;
    case LoraTarget::kInZ: in = C, out = m.linear_value_heads * m.linear_value_dim; return;
    case LoraTarget::kInB: case LoraTarget::kInA: in = C, out = m.linear_value_heads; return;
    case LoraTarget::kOutProj: in = m.linear_value_heads * m.linear_value_dim, out = C; return;
  }
}

LoraConfig resolve_lora(const config::Config& c, const Config& model) {
  LoraConfig l;
  const std::string& method = c.get_string("finetune.method");
  l.method = method == "lora"    ? FinetuneMethod::kLora
             : method == "qlora" ? FinetuneMethod::kQlora
                                 : FinetuneMethod::kFull;
  l.rank = c.get_int("lora.rank");
  l.alpha = c.get_float("lora.alpha");
  l.dropout = c.get_float("lora.dropout");
  l.rslora = c.get_bool("lora.rslora");
  // The schema's limits hold for values read from a file or --set; these checks repeat
  // them so that a Config built another way cannot pass either.
  if (l.rank <= 0) {
    throw InputError(strf("lora.rank = %lld: must be >= 1", static_cast<long long>(l.rank)),
                     "LoRA ranks are usually 4 .. 64.");
  }
  if (!(l.alpha > 0) || !std::isfinite(l.alpha)) {
    throw InputError(strf("lora.alpha = %g: must be a finite number > 0", l.alpha),
                     "alpha = 2 x rank is common (the scale alpha / r is then 2).");
  }
  if (!(l.dropout >= 0 && l.dropout < 1)) {
    throw InputError(strf("lora.dropout = %g: must be in [0, 1)", l.dropout),
                     "0.05 or 0.1 are usual; 1 would drop every input.");
  }
  l.targets = parse_targets(c.get_string("lora.targets"));
  if (!l.enabled()) return l;
  check_lora_moe(model, l);
  check_lora_linear(model, l);
  // The rank cannot exceed the smaller side of any targeted W [out, in]: the update
  // B A has rank min(r, in, out) anyway, and PEFT's init assumes r <= in.
  for (int t = 0; t < kNumLoraTargets; ++t) {
    const auto target = static_cast<LoraTarget>(t);
    if (!l.has_target(target)) continue;
    int64_t in = 0, out = 0;
    lora_target_dims(model, target, in, out);
    if (l.rank > std::min(in, out)) {
      throw InputError(strf("lora.rank = %lld exceeds the smaller side of %s [%lld, %lld] "
                            "(lora.targets has %s)",
                            static_cast<long long>(l.rank),
                            std::string(lora_module_name(target)).c_str(),
                            static_cast<long long>(out), static_cast<long long>(in),
                            std::string(lora_target_name(target)).c_str()),
                       strf("use lora.rank <= %lld or drop that target.",
                            static_cast<long long>(std::min(in, out))));
    }
  }
  return l;
}

void check_qlora_dtype(const LoraConfig& lora, DType base) {
  if (lora.method != FinetuneMethod::kQlora) return;
  if (base == DType::kF32 || base == DType::kBF16) return;
  throw InputError(strf("finetune.method = qlora on base weights of dtype %s: NF4 quantises "
                        "fp32 (and bf16, upcast exactly) only",
                        std::string(dtype_name(base)).c_str()),
                   "use finetune.method = lora for this model, or an fp32/bf16 base.");
}

void check_device_lora(const LoraConfig& lora) {
  for (const LoraTarget t : {LoraTarget::kExpertsGateUp, LoraTarget::kExpertsDown})
    if (lora.enabled() && lora.has_target(t))
      throw InputError("lora.targets has " + std::string(lora_target_name(t)) +
                           ": the GPU model takes no adapters on the experts (the CPU model does)",
                       "train adapters on the experts with train.device = cpu, or target the "
                       "attention (q, k, v, o) on the GPU; docs/finetune.md.");
}

LoraLayout::LoraLayout(const Config& model, const LoraConfig& lora)
    : lora_(lora), layers_(model.layers),
      index_(static_cast<size_t>((model.layers + 1) * kNumLoraTargets), -1) {
  ZT_CHECK(lora.enabled() && lora.rank > 0, "LoraLayout of a config without adapters",
           "build it only for finetune.method = lora or qlora (resolve_lora checks the rank).");
  check_lora_moe(model, lora);
  const auto add = [&](int layer, LoraTarget t) {
    LoraAdapterInfo a;
    a.name = module_path(layer, t, lora);
    a.target = t;
    a.layer = t == LoraTarget::kLmHead ? -1 : layer;
    a.weight = t == LoraTarget::kExpertsGateUp ? strf("model.layers.%d.mlp.experts.gate_up_proj", layer)
               : t == LoraTarget::kExpertsDown ? strf("model.layers.%d.mlp.experts.down_proj", layer)
                                               : a.name + ".weight";
    a.experts = is_expert_target(t) ? model.experts : 1;
    lora_target_dims(model, t, a.in, a.out);
    a.a_offset = numel_;
    a.b_offset = numel_ + a.experts * lora.rank * a.in;
    numel_ = a.b_offset + a.out * lora.rank * a.experts;
    const int row = t == LoraTarget::kLmHead ? static_cast<int>(model.layers) : layer;
    index_[static_cast<size_t>(row * kNumLoraTargets + static_cast<int>(t))] =
        static_cast<int>(adapters_.size());
    adapters_.push_back(std::move(a));
  };
  for (int l = 0; l < static_cast<int>(model.layers); ++l)
    for (const LoraTarget t : kBlockTargets)
      if (lora.has_target(t) && layer_has_target(model, l, t)) add(l, t);
  if (lora.has_target(LoraTarget::kLmHead)) add(0, LoraTarget::kLmHead);
}

ParamLayout lora_base_layout(const Config& cfg, const LoraConfig& lora) {
  return ParamLayout::without_weights(cfg, lora.method == FinetuneMethod::kQlora ? lora.targets : 0);
}

// ParamLayout::without_weights takes LoraConfig::targets' bits (layout.cpp names them).
static_assert(static_cast<int>(LoraTarget::kQ) == 0 && static_cast<int>(LoraTarget::kDown) == 6 &&
              static_cast<int>(LoraTarget::kLmHead) == 7 && static_cast<int>(LoraTarget::kInQkv) == 10 &&
              static_cast<int>(LoraTarget::kOutProj) == 14);

// QLoRA's base units leave out the targeted W: the model reads them from the NF4 base.
ParamLayout::ParamLayout(const Config& cfg, const LoraConfig& lora)
    : ParamLayout(lora_base_layout(cfg, lora)) {
  const LoraLayout adapters(cfg, lora);
  for (UnitInfo& u : units_) u.frozen = true;
  UnitInfo unit{"lora", UnitKind::kAdapters, -1, 0, static_cast<int>(tensors_.size()), 0};
  const int ui = static_cast<int>(units_.size());
  const auto add = [&](std::string name, std::vector<int64_t> shape, int64_t offset, InitKind init) {
    TensorInfo t;
    t.name = std::move(name);
    t.numel = shape[0] * shape[1];
    t.shape = std::move(shape);
    t.unit = ui;
    t.offset = offset;
    t.weight_decay = true;  // 2-D weights, as every other (and as HF's Trainer decays them)
    t.init = init;
    ZT_CHECK(t.offset == unit.numel, "the adapters' unit and LoraLayout's packing disagree",
             "a bug in zt's LoRA layout.");
    unit.numel += t.numel;
    unit.num_tensors += 1;
    tensors_.push_back(std::move(t));
  };
  const int64_t r = lora.rank;
  for (const LoraAdapterInfo& a : adapters.adapters()) {
    add(a.name + ".lora_A.weight", {a.experts * r, a.in}, a.a_offset, InitKind::kLoraA);
    add(a.name + ".lora_B.weight", {a.out, r * a.experts}, a.b_offset, InitKind::kZeros);
  }
  ZT_CHECK(unit.numel == adapters.numel(), "the adapters' unit and LoraLayout's size disagree",
           "a bug in zt's LoRA layout.");
  units_.push_back(unit);
  adapter_unit_ = ui;
  total_numel_ += unit.numel;
}

const LoraAdapterInfo* LoraLayout::find(int layer, LoraTarget t) const {
  const int64_t row = t == LoraTarget::kLmHead ? layers_ : layer;
  if (row < 0 || row > layers_) return nullptr;
  const int i = index_[static_cast<size_t>(row * kNumLoraTargets + static_cast<int>(t))];
  return i < 0 ? nullptr : &adapters_[static_cast<size_t>(i)];
}

double TrainableCounts::percent() const {
  return all > 0 ? 100.0 * static_cast<double>(trainable) / static_cast<double>(all) : 0.0;
}

TrainableCounts trainable_counts(const Config& model, const LoraConfig& lora) {
  TrainableCounts c;
  const int64_t base = model.num_params();
  if (!lora.enabled()) {
    c.trainable = c.all = base;
    return c;
  }
  for (int t = 0; t < kNumLoraTargets; ++t) {
    const auto target = static_cast<LoraTarget>(t);
    if (!lora.has_target(target)) continue;
    int64_t in = 0, out = 0;
    lora_target_dims(model, target, in, out);
    const int64_t per = lora.rank * (in + out) * (is_expert_target(target) ? model.experts : 1);
    int64_t layers = 0;
    for (int l = 0; l < static_cast<int>(model.layers); ++l) layers += layer_has_target(model, l, target);
    c.trainable += target == LoraTarget::kLmHead ? per : per * layers;
  }
  c.all = base + c.trainable;
  return c;
}

std::string trainable_banner(const TrainableCounts& c) {
  // Python's f"{n:,d}": digits grouped by three with commas.
  const auto grouped = [](int64_t n) {
    std::string digits = std::to_string(n), out;
    const size_t lead = digits.size() % 3 == 0 ? 3 : digits.size() % 3;
    for (size_t i = 0; i < digits.size(); ++i) {
      if (i >= lead && (i - lead) % 3 == 0 && digits[0] != '-') out += ',';
      out += digits[i];
    }
    return out;
  };
  return strf("trainable params: %s || all params: %s || trainable%%: %.4f",
              grouped(c.trainable).c_str(), grouped(c.all).c_str(), c.percent());
}

template <class T>
void init_lora(const LoraLayout& layout, uint64_t seed, std::span<T> params) {
  ZT_CHECK(static_cast<int64_t>(params.size()) == layout.numel(),
           "init_lora: buffer size differs from the adapters' numel",
           "allocate LoraLayout::numel() elements.");
  const int64_t r = layout.lora().rank;
  for (const LoraAdapterInfo& a : layout.adapters()) {
    // kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in)
    // = 1 / sqrt(fan_in), fan_in = in.
    const double bound = 1.0 / std::sqrt(static_cast<double>(a.in));
    const uint64_t stream = init_stream(seed, a.name + ".lora_A.weight");
    for (int64_t i = 0; i < a.experts * r * a.in; ++i) {
      params[static_cast<size_t>(a.a_offset + i)] =
          static_cast<T>(bound * (2.0 * uniform_at(stream, i) - 1.0));
    }
    std::fill_n(params.begin() + a.b_offset, a.out * r * a.experts, T(0));
  }
}

QloraBase::QloraBase(const LoraLayout& lora, const ParamLayout& layout,
                     const std::vector<std::span<const float>>& units)
    : QloraBase(lora, layout, [&](int u) {
        ZT_CHECK(static_cast<int>(units.size()) == layout.num_units(),
                 "QloraBase: one span per unit expected", "pass every unit's parameters.");
        return units[static_cast<size_t>(u)];
      }) {}

QloraBase::QloraBase(const LoraLayout& lora, const ParamLayout& layout, const UnitReader& read)
    : lora_(lora) {
  int held = -1;                 // the unit `unit` holds
  std::span<const float> unit;   // [layout.unit(held).numel]
  for (const LoraAdapterInfo& a : lora.adapters()) {
    const bool tied_head = a.target == LoraTarget::kLmHead && layout.config().tied_embeddings;
    const TensorInfo& t =
        layout.find(tied_head ? std::string("model.embed_tokens.weight") : a.weight);
    if (t.unit != held) {  // adapters come unit by unit (LoraLayout's packing order)
      held = t.unit;
      unit = read(held);
    }
    ZT_CHECK(static_cast<int64_t>(unit.size()) == layout.unit(t.unit).numel,
             "QloraBase: unit " + layout.unit(t.unit).name + " has the wrong size",
             "pass layout.unit(u).numel elements per unit.");
    weights_.push_back(kernels::nf4::quantize(unit.subspan(static_cast<size_t>(t.offset),
                                                           static_cast<size_t>(t.numel))));
  }
}

const kernels::nf4::Quantized* QloraBase::find(int layer, LoraTarget target) const {
  const LoraAdapterInfo* a = lora_.find(layer, target);
  return a ? &weights_[static_cast<size_t>(a - lora_.adapters().data())] : nullptr;
}

void check_qlora_covers(const ParamLayout& layout, const QloraBase& base) {
  for (int t = 0; t < kNumLoraTargets; ++t) {
    if (((layout.left_out() >> t) & 1u) == 0) continue;
    const auto target = static_cast<LoraTarget>(t);
    for (int l = 0; l < (target == LoraTarget::kLmHead ? 1 : static_cast<int>(layout.config().layers)); ++l)
      if (layer_has_target(layout.config(), l, target) && !base.find(l, target))
        throw std::logic_error("bind_qlora: the model's units leave out W of " +
                               std::string(lora_module_name(target)) +
                               ", which the NF4 base does not hold");
  }
}

int64_t QloraBase::bytes() const {
  int64_t b = 0;
  for (const auto& q : weights_) b += kernels::nf4::quantized_bytes(q.n);
  return b;
}

MergedWeights merge_lora(const Config& base, std::vector<std::vector<float>> units,
                         const LoraLayout& layout, std::span<const float> adapters) {
  const ParamLayout in(base);
  ZT_CHECK(static_cast<int>(units.size()) == in.num_units() &&
               static_cast<int64_t>(adapters.size()) == layout.numel(),
           "merge_lora: buffers of another size than the layouts'",
           "pass every unit of ParamLayout(base) and LoraLayout::numel() adapter elements.");
  for (int u = 0; u < in.num_units(); ++u)
    ZT_CHECK(static_cast<int64_t>(units[static_cast<size_t>(u)].size()) == in.unit(u).numel,
             "merge_lora: unit " + in.unit(u).name + " has the wrong size",
             "pass layout.unit(u).numel elements per unit.");
  // The units are merged in place (a 1.1B model is not held twice). Untying only grows
  // the head unit: its tensors are rebuilt by name, lm_head from the embedding.
  MergedWeights m{base, std::move(units)};
  const bool untie = base.tied_embeddings && layout.lora().has_target(LoraTarget::kLmHead);
  if (untie) m.config.tied_embeddings = false;
  const ParamLayout out(m.config);
  for (int u = 0; u < out.num_units(); ++u) {
    if (out.unit(u).numel == in.unit(u).numel) continue;  // same tensors, same places
    std::vector<float> grown(static_cast<size_t>(out.unit(u).numel));  // [numel] of the untied unit
    for (const TensorInfo& t : out.tensors()) {
      if (t.unit != u) continue;
      const TensorInfo& s = t.name == "lm_head.weight" ? in.find("model.embed_tokens.weight") : in.find(t.name);
      const std::vector<float>& src = m.units[static_cast<size_t>(s.unit)];  // still the base's
      std::copy_n(src.begin() + s.offset, t.numel, grown.begin() + t.offset);
    }
    m.units[static_cast<size_t>(u)] = std::move(grown);
  }
  const int64_t r = layout.lora().rank;
  const double scale = layout.lora().scale();
  const bool qlora = layout.lora().method == FinetuneMethod::kQlora;
  for (const LoraAdapterInfo& a : layout.adapters()) {
    const TensorInfo& t = out.find(a.weight);
    // W [out, in] of this projection in the merged units ([E, out, in] for experts).
    std::span<float> w(m.units[static_cast<size_t>(t.unit)].data() + t.offset, static_cast<size_t>(t.numel));
    if (qlora) kernels::nf4::dequantize(kernels::nf4::quantize(w), w);
    const float* A = adapters.data() + a.a_offset;  // [r, in]
    const float* B = adapters.data() + a.b_offset;  // [out, r]
    if (is_expert_target(a.target)) {  // PEFT's ParamWrapper: per expert
      detail::add_expert_delta<float>(w.data(), A, B, a.experts, a.out, a.in, r, scale);
      continue;
    }
    // Rows are independent: one per thread.
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < a.out; ++o)
      for (int64_t i = 0; i < a.in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < r; ++k) s += static_cast<double>(B[o * r + k]) * A[k * a.in + i];
        float& x = w[static_cast<size_t>(o * a.in + i)];
        x = static_cast<float>(static_cast<double>(x) + scale * s);
      }
  }
  return m;
}

template void init_lora<float>(const LoraLayout&, uint64_t, std::span<float>);
template void init_lora<double>(const LoraLayout&, uint64_t, std::span<double>);

}  // namespace zt::model
