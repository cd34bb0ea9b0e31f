// The field list of model::Config (include/zt/model/config_fields.hpp).
#include "zt/model/config_fields.hpp"

#include "zt/core/log.hpp"
#include "zt/model/family.hpp"

namespace zt::model {
namespace {

// The member `m` of Config, as ConfigField::Ref.
#define ZT_FIELD(m) +[](Config& c) -> decltype((c.m)) { return c.m; }

using F = ConfigField;
constexpr double kInt32Max = 2147483647.0;

const char* no_experts(const Config& c) {
  return c.moe() ? nullptr
                 : "the model has no experts (model.experts = 0): set model.family = mixtral, "
                   "qwen2_moe or qwen3_moe and model.experts for them";
}
const char* no_aux_loss(const Config& c) {
  if (const char* why = no_experts(c)) return why;
  return c.router_aux_loss ? nullptr
                           : "the load-balancing loss is off (model.router_aux_loss = false, as "
                             "transformers' output_router_logits): set model.router_aux_loss = "
                             "true to add it to the loss";
}
const char* no_rope_scaling(const Config& c) {
  return c.rope_scaling.type == "default" ? "set model.rope_type = linear or llama3" : nullptr;
}
const char* no_llama3(const Config& c) {
  return c.rope_scaling.type != "llama3" ? "set model.rope_type = llama3" : nullptr;
}
const char* no_yarn(const Config& c) {
  return c.rope_scaling.type != "yarn" ? "set model.rope_type = yarn" : nullptr;
}
const char* no_clamp(const Config& c) {
  return c.swiglu_limit > 0 ? nullptr : "set model.swiglu_limit (gpt_oss)";
}
const char* no_linear(const Config& c) {
  return c.linear_layers() ? nullptr
                           : "no layer is linear_attention: set model.family = qwen3_5_text and "
                             "an l in model.layer_types";
}
// The key of a Gated DeltaNet size in config.json: Qwen3.5's families only.
const char* linear_key(const Family& f, const char* key) { return f.hybrid ? key : nullptr; }
const char* no_window(const Config& c) {
  return c.sliding_window == 0 ? "set model.sliding_window" : nullptr;
}

const ConfigField kFields[] = {
    {.attr = "name", .ref = ZT_FIELD(name), .save = F::kAlways, .resume = F::kFree},
    {.key = "family", .attr = "family", .hf = "model_type", .hf_form = F::kHfModelType,
     .ref = ZT_FIELD(family),
     .resume = F::kShape, .refused_as = "family",
     .help = "override: model family = Hugging Face model_type (docs/model.md's table)",
     .choices = &Config::family_names},
    {.key = "vocab", .attr = "vocab", .hf = "vocab_size", .hf_form = F::kHfPlain, .ref = ZT_FIELD(vocab),
     .save = F::kAlways, .resume = F::kShape, .min = 1, .max = kInt32Max,
     .help = "override: vocabulary size (>= the dataset's)"},
    {.key = "hidden", .attr = "hidden", .hf = "hidden_size", .hf_form = F::kHfPlain, .ref = ZT_FIELD(hidden),
     .save = F::kAlways, .resume = F::kShape, .min = 1, .max = Config::kMaxHidden,
     .help = "override: model width"},
    {.key = "layers", .attr = "layers", .hf = "num_hidden_layers", .hf_form = F::kHfPlain, .ref = ZT_FIELD(layers),
     .save = F::kAlways, .resume = F::kShape, .min = 1, .max = Config::kMaxLayers,
     .help = "override: transformer blocks"},
    {.key = "heads", .attr = "heads", .hf = "num_attention_heads", .hf_form = F::kHfPlain, .ref = ZT_FIELD(heads),
     .save = F::kAlways, .resume = F::kShape, .min = 1, .max = Config::kMaxHeads,
     .help = "override: query heads"},
    {.key = "kv_heads", .attr = "kv_heads", .hf = "num_key_value_heads", .hf_form = F::kHfPlain,
     .hf_absent = [](const Family& f, const Config& c) { return double(f.hf.kv_heads.value_or(c.heads)); },
     .ref = ZT_FIELD(kv_heads),
     .save = F::kAlways, .resume = F::kShape, .min = 1, .max = Config::kMaxHeads,
     .help = "override: key/value heads (GQA)"},
    // Routed in every layer (qwen3_5_moe_text): no intermediate_size; the experts' width.
    {.key = "intermediate", .attr = "intermediate", .hf = "intermediate_size", .hf_form = F::kHfFamily,
     .hf_key = [](const Family& f) { return f.moe_every_layer ? nullptr : "intermediate_size"; },
     .ref = ZT_FIELD(intermediate), .save = F::kAlways, .resume = F::kShape, .min = 1,
     .max = Config::kMaxIntermediate, .help = "override: SwiGLU inner width"},
    {.key = "context", .attr = "context", .hf = "max_position_embeddings", .hf_form = F::kHfPlain,
     .hf_absent = [](const Family& f, const Config&) { return double(f.hf.context); },
     .ref = ZT_FIELD(context),
     .save = F::kAlways, .min = 1, .max = Config::kMaxContext,
     .help = "override: longest sequence (RoPE table)"},
    {.key = "tied_embeddings", .attr = "tied_embeddings", .hf = "tie_word_embeddings", .hf_form = F::kHfPlain,
     .hf_absent = [](const Family& f, const Config&) { return double(f.hf.tied_embeddings); },
     .ref = ZT_FIELD(tied_embeddings), .save = F::kAlways, .resume = F::kShape,
     .help = "override: lm_head shares the embedding"},
    {.key = "head_dim", .attr = "head_dim", .hf = "head_dim", .hf_form = F::kHfPlain,
     .hf_absent = [](const Family& f, const Config&) { return double(f.hf.head_dim.value_or(0)); },
     .ref = ZT_FIELD(head_dim_), .resume = F::kShape,
     .shape = [](const Config& c) { return c.head_dim_ > 0 || c.hidden % c.heads == 0 ? c.head_dim() : 0; }, .min = 0,
     .max = Config::kMaxHidden, .help = "override: head_dim (0: hidden / heads)"},
    {.key = "attention_bias", .attr = "attention_bias", .hf = "attention_bias", .hf_form = F::kHfFamily,
     .hf_absent = [](const Family& f, const Config&) { return double(f.hf.attention_bias); },
     .hf_key = [](const Family& f) { return f.bias_key; },
     .ref = ZT_FIELD(attention_bias), .resume = F::kShape,
     .help = "override: biases on q/k/v/o (llama, qwen3; qwen2 has q/k/v biases always)"},
    {.key = "rope_theta", .attr = "rope_theta", .hf = "rope_theta", .hf_form = F::kHfRope, .ref = ZT_FIELD(rope_theta),
     .save = F::kAlways, .min = 0, .max = 1e12, .min_exclusive = true,
     .help = "override: RoPE base"},
    {.key = "rope_type", .attr = "rope_scaling.type", .hf = "rope_scaling.rope_type", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(rope_scaling.type), .save = F::kWithRope,
     .help = "override: RoPE scaling (default, linear, llama3, yarn; docs/model.md)",
     .choices = [] { return std::vector<std::string>{"default", "linear", "llama3", "yarn"}; }},
    {.key = "rope_factor", .attr = "rope_scaling.factor", .hf = "rope_scaling.factor", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(rope_scaling.factor), .save = F::kWithRope, .min = 0, .max = 1e6,
     .min_exclusive = true, .help = "override: RoPE scaling factor", .inert = no_rope_scaling},
    {.key = "rope_low_freq_factor", .attr = "rope_scaling.low_freq_factor",
     .hf = "rope_scaling.low_freq_factor", .hf_form = F::kHfRope, .ref = ZT_FIELD(rope_scaling.low_freq_factor),
     .save = F::kWithRope, .min = 0, .max = 1e6, .min_exclusive = true,
     .help = "override: llama3 low_freq_factor", .inert = no_llama3},
    {.key = "rope_high_freq_factor", .attr = "rope_scaling.high_freq_factor",
     .hf = "rope_scaling.high_freq_factor", .hf_form = F::kHfRope, .ref = ZT_FIELD(rope_scaling.high_freq_factor),
     .save = F::kWithRope, .min = 0, .max = 1e6, .min_exclusive = true,
     .help = "override: llama3 high_freq_factor", .inert = no_llama3},
    {.key = "rope_original_context", .attr = "rope_scaling.original_context",
     .hf = "rope_scaling.original_max_position_embeddings", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(rope_scaling.original_context), .save = F::kWithRope, .min = 1,
     .max = Config::kMaxContext,
     .help = "override: llama3 / yarn original_max_position_embeddings", .inert = no_rope_scaling},
    {.key = "rope_beta_fast", .attr = "rope_scaling.beta_fast", .hf = "rope_scaling.beta_fast", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(rope_scaling.beta_fast), .save = F::kWithRope, .min = 0, .max = 1e6,
     .min_exclusive = true, .help = "override: yarn beta_fast", .inert = no_yarn},
    {.key = "rope_beta_slow", .attr = "rope_scaling.beta_slow", .hf = "rope_scaling.beta_slow", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(rope_scaling.beta_slow), .save = F::kWithRope, .min = 0, .max = 1e6,
     .min_exclusive = true, .help = "override: yarn beta_slow", .inert = no_yarn},
    {.key = "rope_truncate", .attr = "rope_scaling.truncate", .hf = "rope_scaling.truncate", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(rope_scaling.truncate), .save = F::kWithRope,
     .help = "override: yarn truncate (whole-dimension correction range)", .inert = no_yarn},
    {.key = "rope_mscale", .attr = "rope_scaling.mscale", .hf = "rope_scaling.mscale", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(rope_scaling.mscale), .save = F::kWithRope, .min = 0, .max = 1e6,
     .help = "override: yarn mscale (DeepSeek; 0: absent)", .inert = no_yarn},
    {.key = "rope_mscale_all_dim", .attr = "rope_scaling.mscale_all_dim",
     .hf = "rope_scaling.mscale_all_dim", .hf_form = F::kHfRope, .ref = ZT_FIELD(rope_scaling.mscale_all_dim),
     .save = F::kWithRope, .min = 0, .max = 1e6,
     .help = "override: yarn mscale_all_dim (DeepSeek; 0: absent)", .inert = no_yarn},
    {.key = "rope_attention_factor", .attr = "rope_scaling.attention_factor",
     .hf = "rope_scaling.attention_factor", .hf_form = F::kHfRope, .ref = ZT_FIELD(rope_scaling.attention_factor),
     .save = F::kWithRope, .min = 0, .max = 1e6,
     .help = "override: yarn attention_factor (0: from the factor)", .inert = no_yarn},
    {.key = "partial_rotary_factor", .attr = "partial_rotary_factor",
     .hf = "rope_parameters.partial_rotary_factor", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(partial_rotary_factor), .min = 0, .max = 1, .min_exclusive = true,
     .help = "override: the rotated share of each head (Qwen3.5: 0.25; 1: the whole head)"},
    {.key = "mrope_section", .attr = "mrope_section", .hf = "rope_parameters.mrope_section",
     .hf_form = F::kHfRope, .ref = ZT_FIELD(mrope_section),
     .help = "override: Qwen3.5's multimodal RoPE sections (11,11,10); text rotates as plain "
             "RoPE, kept for export"},
    {.key = "mrope_interleaved", .attr = "mrope_interleaved",
     .hf = "rope_parameters.mrope_interleaved", .hf_form = F::kHfRope,
     .ref = ZT_FIELD(mrope_interleaved),
     .help = "override: Qwen3.5's interleaved multimodal RoPE; kept for export"},
    {.key = "swiglu_limit", .attr = "swiglu_limit", .hf = "swiglu_limit", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(swiglu_limit), .min = 0, .max = 1e6,
     .help = "override: gpt-oss's expert clamp (7; 0: plain SwiGLU)"},
    {.key = "swiglu_alpha", .attr = "swiglu_alpha", .hf = "swiglu_alpha", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(swiglu_alpha), .min = 0, .max = 1e6,
     .min_exclusive = true, .help = "override: gpt-oss's sigmoid gain (1.702)", .inert = no_clamp},
    {.key = "norm_eps", .attr = "norm_eps", .hf = "rms_norm_eps", .hf_form = F::kHfPlain,
     .hf_absent = [](const Family& f, const Config&) { return f.hf.norm_eps; },
     .ref = ZT_FIELD(norm_eps),
     .save = F::kAlways, .min = 0, .max = 1, .min_exclusive = true,
     .help = "override: RMSNorm epsilon"},
    {.key = "sliding_window", .attr = "sliding_window", .hf = "sliding_window", .hf_form = F::kHfWindow,
     .ref = ZT_FIELD(sliding_window), .min = 0, .max = Config::kMaxContext,
     .help = "override: sliding-window attention, positions attended incl. self (0: full "
             "causal; Mistral 7B: 4096)"},
    {.key = "experts", .attr = "experts", .hf = "num_experts", .hf_form = F::kHfMoe, .ref = ZT_FIELD(experts),
     .save = F::kWithExperts, .resume = F::kShape, .min = 0, .max = Config::kMaxExperts,
     .help = "override: experts per block (mixtral, qwen2_moe, qwen3_moe; Mixtral 8x7B: 8; 0: "
             "the dense MLP of the other families)"},
    {.key = "experts_per_token", .attr = "experts_per_token", .hf = "num_experts_per_tok", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(experts_per_token), .save = F::kWithExperts, .resume = F::kShape, .min = 1,
     .max = Config::kMaxExperts,
     .help = "override: experts each token is routed to (1 .. model.experts; Mixtral: 2)",
     .inert = no_experts},
    {.key = "router_aux_loss_coef", .attr = "router_aux_loss_coef", .hf = "router_aux_loss_coef", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(router_aux_loss_coef), .save = F::kWithExperts, .min = 0, .max = 1e6,
     .help = "override: weight of the load-balancing loss (transformers' router_aux_loss_coef)",
     .inert = no_aux_loss},
    {.key = "router_aux_loss", .attr = "router_aux_loss", .hf = "output_router_logits", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(router_aux_loss), .save = F::kWithExperts,
     .help = "override: add router_aux_loss_coef x the load-balancing loss to the loss "
             "(transformers' output_router_logits; default false, as transformers)",
     .inert = no_experts},
    {.key = "moe_intermediate", .attr = "moe_intermediate", .hf = "moe_intermediate_size", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(moe_intermediate), .resume = F::kShape,
     .shape = [](const Config& c) { return c.expert_width(); }, .min = 0,
     .max = Config::kMaxIntermediate,
     .help = "override: the experts' width (qwen2_moe, qwen3_moe's moe_intermediate_size; 0: "
             "model.intermediate)"},
    {.key = "shared_expert_intermediate", .attr = "shared_expert_intermediate",
     .hf = "shared_expert_intermediate_size", .hf_form = F::kHfMoe, .ref = ZT_FIELD(shared_expert_intermediate),
     .resume = F::kShape, .min = 0, .max = Config::kMaxIntermediate,
     .help = "override: qwen2_moe's shared expert width (shared_expert_intermediate_size)"},
    {.key = "norm_topk_prob", .attr = "norm_topk_prob", .hf = "norm_topk_prob", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(norm_topk_prob),
     .help = "override: renormalise the k chosen router probabilities (qwen2_moe, qwen3_moe; "
             "mixtral always does)"},
    {.key = "decoder_sparse_step", .attr = "decoder_sparse_step", .hf = "decoder_sparse_step", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(decoder_sparse_step), .resume = F::kShape, .min = 1,
     .max = Config::kMaxLayers,
     .help = "override: layer l has the experts when (l + 1) % step == 0, the others the dense "
             "MLP (qwen2_moe, qwen3_moe; 1: every layer)"},
    {.key = "first_sliding_layer", .attr = "first_sliding_layer", .hf = "layer_types", .hf_form = F::kHfWindow,
     .ref = ZT_FIELD(first_sliding_layer), .min = 0, .max = Config::kMaxLayers,
     .help = "override: layers from this one on use model.sliding_window, earlier ones attend "
             "in full (Qwen's max_window_layers; 0: every layer)",
     .inert = no_window},
    {.key = "layer_types", .attr = "layer_types", .hf = "layer_types", .hf_form = F::kHfWindow, .ref = ZT_FIELD(layer_types),
     .help = "override: the attention schedule, one letter per layer: s sliding (model."
             "sliding_window), f full, e.g. sssssf (Gemma 3); empty: model.first_sliding_layer"},
    {.key = "linear_key_heads", .attr = "linear_key_heads", .hf = "linear_num_key_heads",
     .hf_form = F::kHfFamily, .hf_absent = [](const Family&, const Config&) { return 16.0; },
     .hf_key = [](const Family& f) { return linear_key(f, "linear_num_key_heads"); },
     .ref = ZT_FIELD(linear_key_heads), .resume = F::kShape, .min = 1, .max = Config::kMaxHeads,
     .help = "override: Gated DeltaNet key heads (Qwen3.5: 16)", .inert = no_linear},
    {.key = "linear_value_heads", .attr = "linear_value_heads", .hf = "linear_num_value_heads",
     .hf_form = F::kHfFamily, .hf_absent = [](const Family&, const Config&) { return 32.0; },
     .hf_key = [](const Family& f) { return linear_key(f, "linear_num_value_heads"); },
     .ref = ZT_FIELD(linear_value_heads), .resume = F::kShape, .min = 1, .max = Config::kMaxHeads,
     .help = "override: Gated DeltaNet value heads (Qwen3.5: 32)", .inert = no_linear},
    {.key = "linear_key_dim", .attr = "linear_key_dim", .hf = "linear_key_head_dim",
     .hf_form = F::kHfFamily, .hf_absent = [](const Family&, const Config&) { return 128.0; },
     .hf_key = [](const Family& f) { return linear_key(f, "linear_key_head_dim"); },
     .ref = ZT_FIELD(linear_key_dim), .resume = F::kShape, .min = 1, .max = Config::kMaxHidden,
     .help = "override: Gated DeltaNet key head dim (Qwen3.5: 128)", .inert = no_linear},
    {.key = "linear_value_dim", .attr = "linear_value_dim", .hf = "linear_value_head_dim",
     .hf_form = F::kHfFamily, .hf_absent = [](const Family&, const Config&) { return 128.0; },
     .hf_key = [](const Family& f) { return linear_key(f, "linear_value_head_dim"); },
     .ref = ZT_FIELD(linear_value_dim), .resume = F::kShape, .min = 1, .max = Config::kMaxHidden,
     .help = "override: Gated DeltaNet value head dim (Qwen3.5: 128)", .inert = no_linear},
    {.key = "linear_conv_kernel", .attr = "linear_conv_kernel", .hf = "linear_conv_kernel_dim",
     .hf_form = F::kHfFamily, .hf_absent = [](const Family&, const Config&) { return 4.0; },
     .hf_key = [](const Family& f) { return linear_key(f, "linear_conv_kernel_dim"); },
     .ref = ZT_FIELD(linear_conv_kernel), .resume = F::kShape, .min = 1, .max = 1024,
     .help = "override: Gated DeltaNet causal conv1d kernel (Qwen3.5: 4)", .inert = no_linear},
    {.key = "rope_local_theta", .attr = "rope_local_theta", .hf = "rope_local_base_freq", .hf_form = F::kHfSchedule,
     .ref = ZT_FIELD(rope_local_theta), .min = 0, .max = 1e12,
     .help = "override: RoPE base of the sliding layers, unscaled (Gemma 3: 10000; 0: the full "
             "layers' RoPE)"},
    {.key = "query_pre_attn_scalar", .attr = "query_pre_attn_scalar", .hf = "query_pre_attn_scalar", .hf_form = F::kHfSchedule,
     .ref = ZT_FIELD(query_pre_attn_scalar), .min = 0, .max = 1e12,
     .help = "override: attention scores scaled by this^-0.5 (Gemma; 0: head_dim)"},
    {.key = "final_logit_softcap", .attr = "final_logit_softcap", .hf = "final_logit_softcapping", .hf_form = F::kHfSchedule,
     .ref = ZT_FIELD(final_logit_softcap), .min = 0, .max = 1e12,
     .help = "override: logits capped as cap tanh(logits / cap) (Gemma 2: 30; 0: none)"},
    // Gemma 2's key (Family::attn_softcap); transformers 5.24's Gemma3Attention ignores it
    // (hf_schedule.cpp refuses it set in gemma3_text, and a capped model on its export).
    {.key = "attn_logit_softcap", .attr = "attn_logit_softcap", .hf = "attn_logit_softcapping",
     .hf_form = F::kHfSchedule,
     .ref = ZT_FIELD(attn_logit_softcap), .min = 0, .max = 1e12,
     .help = "override: attention scores capped as cap tanh(score / cap) before the softmax "
             "(Gemma 2: 50; 0: none)"},
    {.key = "mlp_only_layers", .attr = "mlp_only_layers", .hf = "mlp_only_layers", .hf_form = F::kHfMoe,
     .ref = ZT_FIELD(mlp_only_layers), .resume = F::kLayers,
     .help = "override: layers with the dense MLP among the experts' ones, comma-separated "
             "indices, e.g. 0,3 (qwen2_moe, qwen3_moe's mlp_only_layers; empty: none)"},
};

#undef ZT_FIELD

}  // namespace

std::span<const ConfigField> config_fields() { return kFields; }

const char* plain_hf_key(const ConfigField& f, const Family& fam) {
  if (f.hf_form == ConfigField::kHfPlain) return f.hf;
  if (f.hf_form == ConfigField::kHfFamily) return f.hf_key(fam);
  return nullptr;
}

const ConfigField* config_field(std::string_view key) {
  for (const ConfigField& f : kFields)
    if (f.key && key == f.key) return &f;
  return nullptr;
}

std::string field_text(const ConfigField& f, const Config& c) {
  Config& m = const_cast<Config&>(c);  // read only
  return std::visit(
      [&](auto ref) -> std::string {
        const auto& v = ref(m);
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) return std::to_string(v);
        else if constexpr (std::is_same_v<T, double>) return strf("%g", v);
        else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return v;
        else {
          std::string out;
          for (const int64_t l : v) {
            if (!out.empty()) out += ',';
            out += std::to_string(l);
          }
          return out;
        }
      },
      f.ref);
}

bool same_field(const ConfigField& f, const Config& a, const Config& b) {
  return f.shape ? f.shape(a) == f.shape(b) : same_value(f, a, b);
}

bool same_value(const ConfigField& f, const Config& a, const Config& b) {
  return std::visit([&](auto ref) { return ref(const_cast<Config&>(a)) == ref(const_cast<Config&>(b)); },
                    f.ref);
}

}  // namespace zt::model
