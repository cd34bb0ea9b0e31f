// Hugging Face config.json <-> zt::model::Config (see include/zt/ckpt/hf_config.hpp) for the
// families of the family table (include/zt/model/family.hpp): Llama and what each adds to it.
#include "zt/ckpt/hf_config.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <vector>
#include <nlohmann/json.hpp>

#include "zt/core/escape.hpp"
#include "zt/core/files.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"
#include "zt/core/error.hpp"
#include "zt/ckpt/format.hpp"
#include "zt/model/config_fields.hpp"
#include "zt/model/family.hpp"
#include "hf_json.hpp"

namespace zt::ckpt {
namespace {
constexpr const char* kHint =
    "zt imports Llama-architecture models (LlamaForCausalLM, MistralForCausalLM, "
    "Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, "
    "Qwen3MoeForCausalLM, Gemma3ForCausalLM: RMSNorm, RoPE (default, linear or llama3 "
    "scaling), SwiGLU; Qwen's biases and q/k norms, Mistral's sliding window, Mixtral's and "
    "Qwen's experts, Gemma 3's block and layer_types); "
    "docs/model.md lists every config.json field and the family table";

using model::Family;

}  // namespace

namespace hfj {

const Family::Defaults& hf_defaults(const std::string& model_type) {
  return model::family(model_type).hf;
}

bool present(const json& j, const std::string& key) {
  return j.contains(key) && !j.at(key).is_null();
}

// What a refusal says the file holds for `key`, whose value zt took as `value`: "is 7", or
// "is absent (transformers' mixtral default: 7)": a message names what the file holds.
std::string held(const json& j, const std::string& key, const std::string& family,
                 const std::string& value) {
  if (present(j, key)) return "is " + value;
  return "is absent (transformers' " + family + " default: " + value + ")";
}

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& what) {
  throw InputError("config '" + where + "': '" + key + "' " + what, kHint);
}

int64_t get_int(const json& j, const std::string& key, const std::string& where,
                std::optional<int64_t> fallback) {
  if (!j.contains(key) || j.at(key).is_null()) {
    if (fallback) return *fallback;
    bad(where, key, "is missing (zt has no default for it; set it)");
  }
  const json& v = j.at(key);
  if (!v.is_number_integer()) bad(where, key, "is " + describe_json(v) + ", not an integer");
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    bad(where, key, "is " + describe_json(v) + ", too large for a 64-bit integer");
  return v.get<int64_t>();
}

double get_double(const json& j, const std::string& key, const std::string& where,
                  double fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  const json& v = j.at(key);
  if (!v.is_number()) bad(where, key, "is " + describe_json(v) + ", not a number");
  return v.get<double>();
}

bool get_bool(const json& j, const std::string& key, const std::string& where, bool fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  const json& v = j.at(key);
  if (!v.is_boolean()) bad(where, key, "is " + describe_json(v) + ", not true or false");
  return v.get<bool>();
}

// One RoPE dictionary: transformers 4's rope_scaling or transformers 5's rope_parameters
// (`name`), read into `scaling` (and its rope_theta into *theta when present).
void read_rope_dict(const json& d, const std::string& name, const std::string& where,
                    int64_t context, const json& top, kernels::RopeScaling* scaling,
                    std::optional<double>* theta, model::Config* shares) {
  if (!d.is_object()) bad(where, name, "is " + describe_json(d) + ", not an object");
  for (const auto& [key, v] : d.items()) {
    static const char* known[] = {"rope_type", "type", "rope_theta", "factor", "low_freq_factor",
                                  "high_freq_factor", "original_max_position_embeddings",
                                  "partial_rotary_factor", "beta_fast", "beta_slow", "truncate",
                                  "mscale", "mscale_all_dim", "attention_factor",
                                  "mrope_section", "mrope_interleaved"};
    if (std::find(std::begin(known), std::end(known), key) == std::end(known))
      bad(where, name + "." + key,
          v.is_object() ? "is a per-layer-type RoPE setting; zt has one RoPE for every layer"
                        : "is a RoPE setting zt does not implement");
  }
  std::string type = "default";
  for (const char* k : {"rope_type", "type"})
    if (d.contains(k) && !d.at(k).is_null()) {
      if (!d.at(k).is_string()) bad(where, name + "." + k, "is " + describe_json(d.at(k)) + ", not a string");
      type = d.at(k).get<std::string>();
      break;
    }
  if (d.contains("rope_theta") && !d.at("rope_theta").is_null())
    *theta = get_double(d, "rope_theta", where, 0.0);
  if (shares) {
    shares->partial_rotary_factor =
        get_double(d, "partial_rotary_factor", where, shares->partial_rotary_factor);
    if (present(d, "mrope_section")) {
      const json& ms = d.at("mrope_section");
      if (!ms.is_array() || ms.size() != 3)
        bad(where, name + ".mrope_section", "is " + describe_json(ms) + ", not 3 counts");
      shares->mrope_section.clear();
      for (size_t i = 0; i < 3; ++i) {
        if (!ms[i].is_number_integer() || ms[i].get<int64_t>() < 0)
          bad(where, name + ".mrope_section", "is " + describe_json(ms) + ", not 3 counts >= 0");
        shares->mrope_section.push_back(ms[i].get<int64_t>());
      }
    }
    shares->mrope_interleaved = get_bool(d, "mrope_interleaved", where, false);
  } else {
    if (get_double(d, "partial_rotary_factor", where, 1.0) != 1.0)
      bad(where, name + ".partial_rotary_factor", "is " + describe_json(d.at("partial_rotary_factor")) +
                                                      ", not 1; zt rotates the whole head");
    for (const char* key : {"mrope_section", "mrope_interleaved"})
      if (present(d, key))
        bad(where, name + "." + key, "is a multimodal RoPE setting (Qwen3.5's); this family has none");
  }
  const auto need = [&](const char* key) {
    if (!d.contains(key) || d.at(key).is_null())
      bad(where, name + "." + key, "is missing (rope_type \"" + type + "\" needs it)");
    return get_double(d, key, where, 0.0);
  };
  kernels::RopeScaling s;
  s.type = type;
  if (type == "default") {
  } else if (type == "linear") {
    s.factor = need("factor");
  } else if (type == "llama3") {
    s.factor = need("factor");
    s.low_freq_factor = need("low_freq_factor");
    s.high_freq_factor = need("high_freq_factor");
    // As transformers 5: a top-level original_max_position_embeddings wins, else the
    // dictionary's, else max_position_embeddings.
    s.original_context = top.contains("original_max_position_embeddings")
                             ? get_int(top, "original_max_position_embeddings", where)
                             : get_int(d, "original_max_position_embeddings", where, context);
  } else if (type == "yarn") {  // transformers' _compute_yarn_parameters
    s.factor = need("factor");
    if (!top.contains("original_max_position_embeddings")) need("original_max_position_embeddings");
    s.original_context = top.contains("original_max_position_embeddings")
                             ? get_int(top, "original_max_position_embeddings", where)
                             : get_int(d, "original_max_position_embeddings", where);
    // transformers: beta_fast / beta_slow "or" their defaults; mscale, mscale_all_dim and
    // attention_factor absent or null: 0 here.
    s.beta_fast = get_double(d, "beta_fast", where, 32.0);
    s.beta_slow = get_double(d, "beta_slow", where, 1.0);
    if (s.beta_fast == 0) s.beta_fast = 32.0;
    if (s.beta_slow == 0) s.beta_slow = 1.0;
    s.truncate = get_bool(d, "truncate", where, true);
    s.mscale = get_double(d, "mscale", where, 0.0);
    s.mscale_all_dim = get_double(d, "mscale_all_dim", where, 0.0);
    s.attention_factor = get_double(d, "attention_factor", where, 0.0);
  } else {
    bad(where, name + ".rope_type",
        "is \"" + type + "\"; zt implements RoPE types default, linear, llama3 and yarn");
  }
  *scaling = s;
}

json rope_dict(const kernels::RopeScaling& r) {
  if (r.type == "linear") return {{"rope_type", "linear"}, {"factor", r.factor}};
  if (r.type == "llama3")
    return {{"rope_type", "llama3"},
            {"factor", r.factor},
            {"low_freq_factor", r.low_freq_factor},
            {"high_freq_factor", r.high_freq_factor},
            {"original_max_position_embeddings", r.original_context}};
  if (r.type == "yarn") {
    json y = {{"rope_type", "yarn"},
              {"factor", r.factor},
              {"beta_fast", r.beta_fast},
              {"beta_slow", r.beta_slow},
              {"truncate", r.truncate},
              {"original_max_position_embeddings", r.original_context}};
    for (const auto& [key, v] : {std::pair{"mscale", r.mscale}, {"mscale_all_dim", r.mscale_all_dim},
                                 {"attention_factor", r.attention_factor}})
      if (v > 0) y[key] = v;
    return y;
  }
  return {{"rope_type", "default"}};
}

std::string hint() { return kHint; }

}  // namespace hfj

namespace {

using namespace hfj;

// The config.json fields behind the model.* keys a refusal of validate() names, e.g.
// " (in config.json: model.experts_per_token is num_experts_per_tok, model.experts is
// num_local_experts)": the file's reader sees its own names. One table for every field
// read above; "" when the message names none.
std::string hf_fields_named(const std::string& message, Family::Moe moe, const json& j,
                            const std::string& family) {
  const bool local = moe == Family::kMixtral || moe == Family::kGptOss ||
                     (present(j, "num_local_experts"));
  std::vector<std::pair<std::string, std::string>> fields;  // model.<key>, config.json's key
  for (const model::ConfigField& f : model::config_fields())
    if (f.key && f.hf)
      fields.emplace_back(std::string("model.") + f.key,
                          std::string_view(f.hf) == "num_experts" && local ? "num_local_experts" : f.hf);
  std::string named;
  for (const auto& [key, field] : fields) {
    // The whole key: model.experts, not the start of model.experts_per_token.
    for (size_t at = message.find(key); at != std::string::npos; at = message.find(key, at + 1)) {
      const size_t end = at + key.size();
      if (end < message.size() && (std::isalnum(static_cast<unsigned char>(message[end])) || message[end] == '_'))
        continue;
      // The file holds the field, or zt took a default or derived it: say which.
      const bool in_file = present(j, field) ||
                           (std::string_view(field) == "rope_theta" && present(j, "rope_parameters") &&
                            j.at("rope_parameters").is_object() &&
                            present(j.at("rope_parameters"), "rope_theta"));
      named += std::string(named.empty() ? "" : ", ") + key + " is " + field +
               (in_file ? "" : std::string_view(field) == "layer_types"
                                   ? " (absent: derived from use_sliding_window, sliding_window "
                                     "and max_window_layers)"
                                   : " (absent: transformers' " + family + " default)");
      break;
    }
  }
  return named.empty() ? "" : " (in config.json: " + named + ")";
}

// The experts' keys: Mixtral's (MixtralConfig's defaults: 8 experts, 2 per token) or
// Qwen's (Qwen2MoeConfig's / Qwen3MoeConfig's defaults when absent).
void read_moe(const json& j, const std::string& where, Family::Moe kind, model::Config& m) {
  const auto size = [&](const char* key, int64_t max, int64_t fallback, int64_t min = 1) {
    const int64_t v = get_int(j, key, where, fallback);
    if (v < min || v > max)
      bad(where, key, held(j, key, m.family, std::to_string(v)) + "; it must be " +
                          std::to_string(min) + " .. " + std::to_string(max));
    return v;
  };
  const Family::Defaults& d = hf_defaults(m.family);
  if (kind == Family::kMixtral || kind == Family::kGptOss) {
    m.experts = size("num_local_experts", model::Config::kMaxExperts, d.experts);
    m.experts_per_token = size("num_experts_per_tok", model::Config::kMaxExperts, d.experts_per_token);
    if (kind == Family::kGptOss) {  // GptOssConfig's defaults
      m.swiglu_limit = get_double(j, "swiglu_limit", where, 7.0);
      m.swiglu_alpha = get_double(j, "swiglu_alpha", where, 1.702);
    }
  } else {
    // Qwen3MoeConfig writes num_local_experts (its attribute_map), the published config.json
    // files num_experts: either, the same when both.
    const bool local = present(j, "num_local_experts");
    m.experts = size(local ? "num_local_experts" : "num_experts", model::Config::kMaxExperts,
                     d.experts);
    if (local && present(j, "num_experts") &&
        get_int(j, "num_experts", where) != m.experts)
      bad(where, "num_experts", "is " + describe_json(j.at("num_experts")) +
                                    ", which disagrees with num_local_experts (" +
                                    std::to_string(m.experts) + "); give one, or the same in both");
    m.experts_per_token = size("num_experts_per_tok", model::Config::kMaxExperts, d.experts_per_token);
    m.moe_intermediate = size("moe_intermediate_size", model::Config::kMaxIntermediate,
                              d.moe_intermediate);
    const bool every = model::family(m.family).moe_every_layer;  // Config::validate_experts
    m.norm_topk_prob = get_bool(j, "norm_topk_prob", where, every);
    m.decoder_sparse_step = size("decoder_sparse_step", model::Config::kMaxLayers, 1);
    if (model::family(m.family).shared_expert)
      m.shared_expert_intermediate = size("shared_expert_intermediate_size",
                                          model::Config::kMaxIntermediate,
                                          d.shared_expert_intermediate);
    if (present(j, "mlp_only_layers")) {
      const json& a = j.at("mlp_only_layers");
      if (!a.is_array()) bad(where, "mlp_only_layers", "is " + describe_json(a) + ", not a list");
      for (const json& v : a) {
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= m.layers)
          bad(where, "mlp_only_layers", "holds " + describe_json(v) +
                                            "; it lists layer indices 0 .. num_hidden_layers - 1");
        m.mlp_only_layers.push_back(v.get<int64_t>());
      }
    }
    if (every) m.intermediate = m.moe_intermediate;
  }
  m.router_aux_loss_coef = get_double(j, "router_aux_loss_coef", where, 0.001);
  m.router_aux_loss = get_bool(j, "output_router_logits", where, false);
  if (kind != Family::kGptOss && get_double(j, "router_jitter_noise", where, 0.0) != 0.0)
    bad(where, "router_jitter_noise",
        "is " + describe_json(j.at("router_jitter_noise")) + ", not 0; zt's router has no jitter (transformers multiplies the inputs of the "
        "experts by noise in training); set it to 0");
}

void write_moe(const model::Config& cfg, Family::Moe kind, json& j) {
  j[kind == Family::kQwen ? "num_experts" : "num_local_experts"] = cfg.experts;
  j["num_experts_per_tok"] = cfg.experts_per_token;
  j["router_aux_loss_coef"] = cfg.router_aux_loss_coef;
  j["output_router_logits"] = cfg.router_aux_loss;
  if (kind == Family::kGptOss) {
    j["swiglu_limit"] = cfg.swiglu_limit;
    j["swiglu_alpha"] = cfg.swiglu_alpha;
    return;
  }
  if (kind == Family::kMixtral) {
    j["router_jitter_noise"] = 0.0;
    return;
  }
  j["moe_intermediate_size"] = cfg.expert_width();
  if (!model::family(cfg.family).moe_every_layer) {
    j["norm_topk_prob"] = cfg.norm_topk_prob;
    j["decoder_sparse_step"] = cfg.decoder_sparse_step;
    j["mlp_only_layers"] = cfg.mlp_only_layers;
  }
  if (cfg.shared_expert()) j["shared_expert_intermediate_size"] = cfg.shared_expert_intermediate;
}

// The plain keys (model::ConfigField::kHfPlain, kHfFamily): one rule per row's type, default
// and limits. The named pieces (read_rope, read_window, read_moe, read_layer_schedule and
// their writers) hold the other rows' keys.
void read_plain(const json& j, const std::string& where, const Family& fam, model::Config& m) {
  for (const model::ConfigField& f : model::config_fields()) {
    const char* key = model::plain_hf_key(f, fam);
    if (!key) continue;
    if (!present(j, key) && !f.hf_absent) bad(where, key, "is missing (zt has no default for it; set it)");
    const double absent = f.hf_absent ? f.hf_absent(fam, m) : 0;
    // Within the row's limits (absent: transformers' default, left to Config::validate).
    const auto limits = [&](double v) {
      const double lo = f.shape ? 1 : f.min;
      if (!present(j, key) || f.max <= lo) return;
      const std::string text = describe_json(j.at(key));
      if (v < lo || (f.min_exclusive && !f.shape && v == lo))
        bad(where, key, "is " + text + "; it must be " + (f.min_exclusive ? "> " : ">= ") +
                            strf("%.17g", lo));
      if (v > f.max) bad(where, key, "is " + text + ", above zt's limit " + strf("%.17g", f.max));
    };
    std::visit(
        [&](auto ref) {
          auto& v = ref(m);
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>) {
            v = get_int(j, key, where, static_cast<int64_t>(absent));
            limits(static_cast<double>(v));
            if (f.shape) {  // 0 when 0 means the same (head_dim: hidden / heads)
              const int64_t read = v;
              v = 0;
              if (f.shape(m) != read) v = read;
            }
          } else if constexpr (std::is_same_v<T, double>) {
            v = get_double(j, key, where, absent);
            limits(v);
          } else if constexpr (std::is_same_v<T, bool>) {
            v = get_bool(j, key, where, absent != 0);
          } else {
            throw std::logic_error(std::string("config field ") + key + ": kHfPlain holds numbers and bools");
          }
        },
        f.ref);
  }
}

void write_plain(const model::Config& cfg, const Family& fam, json& j) {
  for (const model::ConfigField& f : model::config_fields()) {
    const char* key = model::plain_hf_key(f, fam);
    if (key && f.shape) j[key] = f.shape(cfg);
    else if (key) std::visit([&](auto ref) { j[key] = ref(const_cast<model::Config&>(cfg)); }, f.ref);
  }
}

// transformers 5's rope_parameters (rope_theta and rope_type inside). Both present: they
// must agree.
void read_rope(const json& j, const std::string& where, model::Config& m) {
  // Qwen3.5's partial RoPE: rope_parameters' factor, else the top-level key, else 0.25.
  const model::Family& fam = model::family(m.family);
  model::Config* shares = fam.hybrid ? &m : nullptr;
  if (shares) m.partial_rotary_factor = get_double(j, "partial_rotary_factor", where, fam.hf.partial_rotary);
  std::optional<double> top_theta;
  if (present(j, "rope_theta")) top_theta = get_double(j, "rope_theta", where, 0.0);
  kernels::RopeScaling v4, v5;
  std::optional<double> v4_theta, v5_theta;
  if (present(j, "rope_scaling"))
    read_rope_dict(j.at("rope_scaling"), "rope_scaling", where, m.context, j, &v4, &v4_theta, shares);
  if (present(j, "rope_parameters")) {
    read_rope_dict(j.at("rope_parameters"), "rope_parameters", where, m.context, j, &v5,
                   &v5_theta, shares);
    if (present(j, "rope_scaling") && !(v4 == v5))
      bad(where, "rope_scaling", "(" + rope_scaling_text(v4) + ") disagrees with rope_parameters (" +
                                     rope_scaling_text(v5) + ")");
    if (top_theta && v5_theta && *top_theta != *v5_theta)
      bad(where, "rope_theta", "(" + describe_json(j.at("rope_theta")) +
                                   ") disagrees with rope_parameters.rope_theta (" +
                                   describe_json(j.at("rope_parameters").at("rope_theta")) + ")");
    m.rope_scaling = v5;
    m.rope_theta = v5_theta.value_or(top_theta.value_or(hf_defaults(m.family).rope_theta));
  } else {
    m.rope_scaling = v4;
    m.rope_theta = top_theta.value_or(hf_defaults(m.family).rope_theta);
  }
}

}  // namespace

using namespace hfj;

HfConfig parse_hf_config(const std::string& json_text, const std::string& where) {
  const json j = parse_json_strict(json_text, "config '" + where + "'", kHint);
  if (!j.is_object()) throw InputError("config '" + where + "' is not a JSON object", kHint);

  const std::string known = model::family_list(true);
  if (!j.contains("model_type")) bad(where, "model_type", "is missing (expected one of " + known + ")");
  const json& mt = j.at("model_type");
  const Family* fam = mt.is_string() ? model::find_family(mt.get<std::string>()) : nullptr;
  if (!fam) bad(where, "model_type", "is " + describe_json(mt) + "; zt imports " + known);
  if (present(j, "architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.size() != 1 || a[0] != fam->architecture)
      bad(where, "architectures", "is " + describe_json(a) + "; a \"" + fam->model_type +
                                      "\" model is [\"" + fam->architecture + "\"]");
  }
  if (fam->window != Family::kQwenLayers && fam->window != Family::kLayerTypes &&
      present(j, "layer_types"))
    bad(where, "layer_types",
        "is set (" + describe_json(j.at("layer_types")) + ": per-layer attention kinds, as "
        "Ministral's); a " + fam->model_type + " model's layers all attend alike in zt");
  if (fam->mlp_bias_key && get_bool(j, "mlp_bias", where, false))
    bad(where, "mlp_bias", "is true; zt's MLP projections have no bias");
  if (!fam->gelu_mlp && j.contains("hidden_act") && j.at("hidden_act") != "silu")
    bad(where, "hidden_act", "is " + describe_json(j.at("hidden_act")) + "; zt's MLP is SwiGLU (\"silu\")");
  // pretraining_tp > 1 only splits transformers 4's matmuls into slices (the same sums).
  if (get_int(j, "pretraining_tp", where, 1) < 1)
    bad(where, "pretraining_tp", "is " + describe_json(j.at("pretraining_tp")) + ", below 1");
  if (get_double(j, "attention_dropout", where, 0.0) != 0.0)
    bad(where, "attention_dropout", "is " + describe_json(j.at("attention_dropout")) +
                                        ", not 0; zt's attention has no dropout");
  // gpt-oss's MXFP4 experts are dequantized at import (mxfp4.hpp); nothing else quantized.
  if (present(j, "quantization_config")) {
    const json& q = j.at("quantization_config");
    const bool mxfp4 = fam->moe == Family::kGptOss && q.is_object() &&
                       q.value("quant_method", json()) == "mxfp4";
    if (!mxfp4)
      bad(where, "quantization_config",
          "is set; zt imports unquantized weights (float32, bfloat16, float16) and gpt-oss's "
          "MXFP4 experts only");
  }
  if (!fam->hybrid && j.contains("partial_rotary_factor") &&
      get_double(j, "partial_rotary_factor", where, 1.0) != 1.0)
    bad(where, "partial_rotary_factor", "is " + describe_json(j.at("partial_rotary_factor")) +
                                            ", not 1; zt rotates the whole head");

  HfConfig c;
  model::Config& m = c.model;
  m.name = "custom";
  m.family = fam->model_type;
  read_plain(j, where, *fam, m);  // the sizes first: the pieces below read them
  read_window(j, where, *fam, m);
  if (fam->rope_per_type)
    read_layer_schedule(j, where, m);  // RoPE per layer type
  else
    read_rope(j, where, m);
  if (fam->gemma_scalars) read_gemma_scalars(j, where, *fam, m);
  if (fam->moe != Family::kDense) read_moe(j, where, fam->moe, m);
  try {
    m.validate();
  } catch (const InputError& e) {
    throw InputError("config '" + where + "' describes a model zt refuses: " + e.message() +
                         hf_fields_named(e.message(), fam->moe, j, fam->model_type),
                     e.hint());
  }
  if (j.contains("bos_token_id") && j.at("bos_token_id").is_number_integer())
    c.bos_token_id = j.at("bos_token_id").get<int64_t>();
  if (j.contains("eos_token_id") && j.at("eos_token_id").is_number_integer())
    c.eos_token_id = j.at("eos_token_id").get<int64_t>();
  // transformers 4 writes torch_dtype, transformers 5 dtype.
  for (const char* k : {"dtype", "torch_dtype"})
    if (j.contains(k) && j.at(k).is_string()) {
      c.torch_dtype = j.at(k).get<std::string>();
      break;
    }
  return c;
}

HfConfig read_hf_config(const std::string& path) {
  return parse_hf_config(
      read_regular_file(path, "config",
                        "a Hugging Face model folder holds config.json (a file) beside its "
                        "safetensors files"),
      path);
}

std::string hf_config_json(const model::Config& cfg, const std::string& torch_dtype,
                           std::optional<int64_t> bos_token_id,
                           std::optional<int64_t> eos_token_id) {
  const Family* fam = model::find_family(cfg.family);
  if (!fam)
    throw InputError("model family '" + cfg.family + "' has no Hugging Face export", kHint);
  // A Llama with a sliding window is a Mistral (transformers' Llama has none).
  if (cfg.sliding_window > 0 && fam->with_window) fam = &model::family(fam->with_window);
  if (cfg.first_sliding_layer > 0 && cfg.sliding_window > 0 && fam->window != Family::kQwenLayers)
    throw InputError("a " + cfg.family + " model whose first " +
                         std::to_string(cfg.first_sliding_layer) +
                         " layers attend in full has no Hugging Face form",
                     "zt writes per-layer sliding windows as Qwen's (model.family = qwen2, qwen3)");
  check_schedule_exportable(cfg, *fam);
  if (cfg.sliding_window > 0 && fam->window == Family::kNoWindow)
    throw InputError("a " + cfg.family + " model with a sliding window has no Hugging Face form",
                     "zt writes a sliding window as Mistral's (model.family = mistral)");
  json j = json::object();
  j["architectures"] = {fam->architecture};
  j["model_type"] = fam->model_type;
  write_plain(cfg, *fam, j);
  // RoPE in both forms: transformers 5's rope_parameters (what it writes) and transformers
  // 4's rope_theta + rope_scaling (what it reads); transformers 5 reads either.
  const kernels::RopeScaling& r = cfg.rope_scaling;
  json params = rope_dict(r);
  const json scaling = r.type == "default" ? json(nullptr) : params;
  params["rope_theta"] = cfg.rope_theta;
  if (fam->hybrid) {  // Qwen3.5's partial and multimodal RoPE
    params["partial_rotary_factor"] = cfg.partial_rotary_factor;
    if (!cfg.mrope_section.empty()) params["mrope_section"] = cfg.mrope_section;
    if (cfg.mrope_interleaved) params["mrope_interleaved"] = true;
  }
  j["rope_parameters"] = params;
  j["rope_theta"] = cfg.rope_theta;
  j["rope_scaling"] = scaling;
  j["hidden_act"] = "silu";
  if (fam->mlp_bias_key) j["mlp_bias"] = false;
  write_window(cfg, *fam, j);
  if (fam->moe != Family::kDense) write_moe(cfg, fam->moe, j);
  if (fam->rope_per_type) write_layer_schedule(cfg, j);
  if (fam->gemma_scalars) write_gemma_scalars(cfg, *fam, j);
  j["attention_dropout"] = 0.0;
  j["torch_dtype"] = torch_dtype;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_id) j["eos_token_id"] = *eos_token_id;
  return json_dump(j, 2) + "\n";
}

}  // namespace zt::ckpt
