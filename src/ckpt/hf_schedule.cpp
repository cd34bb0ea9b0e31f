// config.json's sliding-window keys and per-layer attention schedule (Mistral's, Qwen's,
// transformers' layer_types) and Gemma 3's fields (see hf_json.hpp).
#include <cmath>
#include <string>

#include "hf_json.hpp"
#include "zt/core/error.hpp"
#include "zt/core/json.hpp"
#include "zt/core/log.hpp"
#include "zt/model/family.hpp"

namespace zt::ckpt {

using namespace hfj;

namespace {

// transformers' layer type names <-> the letters of model::Config::layer_types; a hybrid
// family (Qwen3.5) has linear_attention and full_attention layers, the others sliding and
// full ones.
char type_letter(const json& t, const std::string& where, bool hybrid) {
  if (t == "full_attention") return 'f';
  if (t == (hybrid ? "linear_attention" : "sliding_attention")) return hybrid ? 'l' : 's';
  if (t == "linear_attention")
    bad(where, "layer_types", "holds \"linear_attention\" (Qwen3.5's linear attention, Gated "
                              "DeltaNet), which only the qwen3_5_text and qwen3_5_moe_text families have");
  bad(where, "layer_types", "holds " + describe_json(t) + "; zt knows \"full_attention\" and " +
                                (hybrid ? "\"linear_attention\"" : "\"sliding_attention\"") +
                                " in this family");
}

const char* type_name(char letter) {
  return letter == 'l' ? "linear_attention" : letter == 's' ? "sliding_attention" : "full_attention";
}

// Qwen's sliding window, as transformers 5's Qwen2Config/Qwen3Config: sliding_window counts
// only while use_sliding_window is true; layer i slides when layer_types[i] is
// "sliding_attention", which by default (no layer_types: transformers 4's form) is
// i >= max_window_layers. zt represents full layers followed by sliding ones.
void read_qwen_window(const json& j, const std::string& where, model::Config& m) {
  const bool use = get_bool(j, "use_sliding_window", where, false);
  const int64_t default_window = hf_defaults(m.family).sliding_window;
  const bool has_window = use && !(j.contains("sliding_window") && j.at("sliding_window").is_null());
  if (has_window) {
    const int64_t w = get_int(j, "sliding_window", where, default_window);
    if (w < 1 || w > model::Config::kMaxContext)
      bad(where, "sliding_window", held(j, "sliding_window", m.family, std::to_string(w)) +
                                       "; it must be 1 .. " + std::to_string(model::Config::kMaxContext));
    m.sliding_window = w;
  }
  std::vector<bool> sliding(static_cast<size_t>(m.layers));
  // Named in refusals as the file holds it: the key, or how zt derived it.
  std::string layer_types = "layer_types";
  if (present(j, "layer_types")) {
    const json& lt = j.at("layer_types");
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != m.layers)
      bad(where, "layer_types", "is " + describe_json(lt) + ", not a list of num_hidden_layers (" +
                                    std::to_string(m.layers) + ") names");
    for (size_t i = 0; i < lt.size(); ++i) {
      if (lt[i] != "full_attention" && lt[i] != "sliding_attention")
        bad(where, "layer_types", "holds " + describe_json(lt[i]) +
                                      "; zt knows \"full_attention\" and \"sliding_attention\"");
      sliding[i] = lt[i] == "sliding_attention";
    }
  } else {
    const int64_t mwl = get_int(j, "max_window_layers", where, hf_defaults(m.family).max_window_layers);
    // transformers 5's Qwen2MoeConfig: every other layer below max_window_layers slides.
    const bool moe = model::family(m.family).window_alternates;
    layer_types = "layer_types (absent from the file: derived, as transformers does, from "
                  "use_sliding_window true, sliding_window " + std::to_string(m.sliding_window) +
                  " and max_window_layers " + std::to_string(mwl) +
                  (present(j, "max_window_layers") ? "" : " (absent: transformers' default)") +
                  (moe ? ": qwen2_moe slides every other layer below max_window_layers, from layer 0)"
                       : ": layers from max_window_layers on slide)");
    for (int64_t i = 0; i < m.layers; ++i)
      sliding[static_cast<size_t>(i)] = has_window && (moe ? (i + 1) % 2 == 1 && i < mwl : i >= mwl);
  }
  int64_t first = m.layers;
  for (int64_t i = 0; i < m.layers; ++i)
    if (sliding[static_cast<size_t>(i)]) { first = i; break; }
  for (int64_t i = first; i < m.layers; ++i)
    if (!sliding[static_cast<size_t>(i)])
      bad(where, layer_types, "has a full-attention layer " + std::to_string(i) +
                                    " after sliding layer " + std::to_string(first) +
                                    "; zt represents full layers followed by sliding ones only");
  if (first < m.layers && !has_window)
    bad(where, "layer_types",
        "names sliding layers while use_sliding_window " +
            (use ? std::string("is true but sliding_window is null")
                 : held(j, "use_sliding_window", m.family, "false")) +
            "; set use_sliding_window true and sliding_window, or make every layer full_attention");
  if (first == m.layers) m.sliding_window = 0;  // no layer slides: full causal everywhere
  m.first_sliding_layer = m.sliding_window > 0 ? first : 0;
}

}  // namespace

static void read_layer_types(const json& j, const std::string& where, model::Config& m) {
  const model::Family& fam = model::family(m.family);
  const model::Family::Defaults& d = fam.hf;
  std::string types;
  if (present(j, "layer_types")) {
    const json& lt = j.at("layer_types");
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != m.layers)
      bad(where, "layer_types", "is " + describe_json(lt) + ", not a list of num_hidden_layers (" +
                                    std::to_string(m.layers) + ") names");
    for (const json& t : lt) types += type_letter(t, where, fam.hybrid);
  } else {  // every pattern-th layer full, from layer pattern - 1: Qwen3.5
    // (full_attention_interval, the others linear) and transformers 4's Gemma 3
    // (sliding_window_pattern); the other families' classes ignore Gemma's keys and take
    // their own pattern.
    const char* key = fam.hybrid                             ? "full_attention_interval"
                      : present(j, "sliding_window_pattern") ? "sliding_window_pattern"
                                                             : "_sliding_window_pattern";
    const int64_t pattern = fam.hybrid || fam.rope_per_type ? get_int(j, key, where, d.sliding_pattern)
                                                            : d.sliding_pattern;
    if (pattern < 1) bad(where, key, "is " + std::to_string(pattern) + "; it must be >= 1");
    for (int64_t i = 0; i < m.layers; ++i)
      types += (i + 1) % pattern != 0 ? (fam.hybrid ? 'l' : 's') : 'f';
  }
  m.layer_types = types;
  if (types.find('s') != std::string::npos) {
    const int64_t w = get_int(j, "sliding_window", where, d.sliding_window);
    if (w < 1 || w > model::Config::kMaxContext)
      bad(where, "sliding_window", held(j, "sliding_window", m.family, std::to_string(w)) +
                                       "; it must be 1 .. " + std::to_string(model::Config::kMaxContext));
    m.sliding_window = w;
  }
}

void read_layer_schedule(const json& j, const std::string& where, model::Config& m) {
  const model::Family::Defaults& d = hf_defaults(m.family);
  // The RoPE per layer type: transformers 5's rope_parameters.{full,sliding}_attention,
  // else transformers 4's rope_theta + rope_scaling (full) and rope_local_base_freq.
  std::optional<double> full_theta, local_theta;
  kernels::RopeScaling full, local;
  const bool v5 = present(j, "rope_parameters");
  if (v5) {
    const json& rp = j.at("rope_parameters");
    if (!rp.is_object() || !rp.contains("full_attention") || !rp.contains("sliding_attention"))
      bad(where, "rope_parameters", "is " + describe_json(rp) + ", not one RoPE per layer type "
                                    "(full_attention, sliding_attention)");
    for (const auto& [key, v] : rp.items())
      if (key != "full_attention" && key != "sliding_attention")
        bad(where, "rope_parameters." + key, "is not a layer type zt knows");
    read_rope_dict(rp.at("full_attention"), "rope_parameters.full_attention", where, m.context, j,
                   &full, &full_theta);
    read_rope_dict(rp.at("sliding_attention"), "rope_parameters.sliding_attention", where,
                   m.context, j, &local, &local_theta);
  } else if (present(j, "rope_scaling")) {
    read_rope_dict(j.at("rope_scaling"), "rope_scaling", where, m.context, j, &full, &full_theta);
  }
  const auto agree = [&](const char* key, std::optional<double>& theta, const char* v5_name) {
    if (!present(j, key)) return;
    const double top = get_double(j, key, where, 0.0);
    if (theta && *theta != top)
      bad(where, key, "(" + describe_json(j.at(key)) + ") disagrees with " + v5_name + " (" +
                          std::to_string(*theta) + ")");
    theta = top;
  };
  agree("rope_theta", full_theta, "rope_parameters.full_attention.rope_theta");
  agree("rope_local_base_freq", local_theta, "rope_parameters.sliding_attention.rope_theta");
  if (local.type != "default")
    bad(where, v5 ? "rope_parameters.sliding_attention.rope_type" : "rope_scaling",
        "is \"" + local.type + "\"; zt's sliding layers rotate without scaling (Gemma 3's)");
  m.rope_scaling = full;
  m.rope_theta = full_theta.value_or(d.rope_theta);
  m.rope_local_theta = local_theta.value_or(10000.0);  // Gemma3TextConfig's default_theta
}

// A soft-cap key: absent, the family's default; null, none (0); else a number > 0
// (transformers divides by it).
static double read_cap(const json& j, const char* key, const std::string& where, double absent) {
  if (!j.contains(key)) return absent;
  const double cap = get_double(j, key, where, 0.0);
  if (!j.at(key).is_null() && !(cap > 0))
    bad(where, key, "is " + describe_json(j.at(key)) + "; it must be > 0, or null for no cap");
  return cap;
}

void read_gemma_scalars(const json& j, const std::string& where, const model::Family& fam,
                        model::Config& m) {
  if (get_bool(j, "use_bidirectional_attention", where, false))
    bad(where, "use_bidirectional_attention", "is true; zt's attention is causal");
  if (j.contains("hidden_activation") && j.at("hidden_activation") != "gelu_pytorch_tanh")
    bad(where, "hidden_activation", "is " + describe_json(j.at("hidden_activation")) +
                                        "; zt's Gemma MLP is GeGLU with \"gelu_pytorch_tanh\"");
  m.query_pre_attn_scalar = get_double(j, "query_pre_attn_scalar", where, 256.0);
  if (!(m.query_pre_attn_scalar > 0))
    bad(where, "query_pre_attn_scalar", "is " + describe_json(j.at("query_pre_attn_scalar")) +
                                            "; it must be > 0");
  m.final_logit_softcap = read_cap(j, "final_logit_softcapping", where, fam.hf.final_logit_softcap);
  if (fam.attn_softcap) {
    m.attn_logit_softcap = read_cap(j, "attn_logit_softcapping", where, fam.hf.attn_logit_softcap);
    return;
  }
  // transformers 5.24's Gemma3Attention never passes the cap to its attention (Gemma 2's
  // does): the model transformers runs has none, and zt's import of the key would cap.
  if (get_double(j, "attn_logit_softcapping", where, 0.0) != 0.0)
    bad(where, "attn_logit_softcapping",
        "is " + describe_json(j.at("attn_logit_softcapping")) + "; transformers' " +
            fam.architecture + " does not apply it (set it null: transformers' logits do not "
            "change), so zt would run another model than transformers does");
}

static void write_layer_types(const model::Config& cfg, json& j) {
  json types = json::array();
  for (int64_t i = 0; i < cfg.layers; ++i)
    types.push_back(cfg.layer_types.empty() ? type_name(cfg.sliding(i) ? 's' : 'f')
                                            : type_name(cfg.layer_types[static_cast<size_t>(i)]));
  j["layer_types"] = types;
  if (!model::family(cfg.family).hybrid)
    j["sliding_window"] = cfg.sliding_window > 0 ? json(cfg.sliding_window) : json(nullptr);
}

void write_layer_schedule(const model::Config& cfg, json& j) {
  // Both RoPE forms (as hf_config_json's): the sliding layers' own base, unscaled, or the
  // full layers' RoPE (rope_local_theta 0).
  json full = rope_dict(cfg.rope_scaling);
  full["rope_theta"] = cfg.rope_theta;
  json local = cfg.rope_local_theta > 0 ? rope_dict({}) : full;
  local["rope_theta"] = cfg.rope_local_theta > 0 ? cfg.rope_local_theta : cfg.rope_theta;
  j["rope_parameters"] = {{"full_attention", full}, {"sliding_attention", local}};
  j["rope_local_base_freq"] = local["rope_theta"];
}

void write_gemma_scalars(const model::Config& cfg, const model::Family& fam, json& j) {
  j.erase("hidden_act");
  j["hidden_activation"] = "gelu_pytorch_tanh";
  // An integer where it is one (transformers 5's Gemma3TextConfig requires an int).
  const double q = cfg.query_pre_attn_scalar > 0 ? cfg.query_pre_attn_scalar
                                                 : static_cast<double>(cfg.head_dim());
  j["query_pre_attn_scalar"] = q == std::floor(q) && q < 9e15 ? json(static_cast<int64_t>(q)) : json(q);
  const auto cap = [](double c) { return c > 0 ? json(c) : json(nullptr); };
  j["final_logit_softcapping"] = cap(cfg.final_logit_softcap);
  // Without fam.attn_softcap, check_schedule_exportable refused a capped model.
  j["attn_logit_softcapping"] = cap(fam.attn_softcap ? cfg.attn_logit_softcap : 0.0);
  j["use_bidirectional_attention"] = false;
}

void read_window(const json& j, const std::string& where, const model::Family& fam,
                 model::Config& m) {
  using F = model::Family;
  const int64_t fallback = fam.hf.sliding_window;
  const bool null = j.contains("sliding_window") && j.at("sliding_window").is_null();
  const auto size = [&] {  // as read_qwen_window's
    const int64_t w = get_int(j, "sliding_window", where, fallback);
    if (w < 1 || w > model::Config::kMaxContext)
      bad(where, "sliding_window", held(j, "sliding_window", m.family, std::to_string(w)) +
                                       "; it must be 1 .. " + std::to_string(model::Config::kMaxContext));
    return w;
  };
  if (fam.window == F::kLayerTypes) read_layer_types(j, where, m);
  if (fam.window == F::kQwenLayers) read_qwen_window(j, where, m);
  if (fam.window == F::kMistral && !null && (j.contains("sliding_window") || fallback > 0))
    m.sliding_window = size();
  if (fam.window == F::kQwenAll && get_bool(j, "use_sliding_window", where, false) && !null)
    m.sliding_window = size();
}

void write_window(const model::Config& cfg, const model::Family& fam, json& j) {
  using F = model::Family;
  const json window = cfg.sliding_window > 0 ? json(cfg.sliding_window) : json(nullptr);
  if (fam.window == F::kLayerTypes) write_layer_types(cfg, j);
  if (fam.window == F::kMistral) j["sliding_window"] = window;
  if (fam.window == F::kQwenAll || fam.window == F::kQwenLayers) {
    j["use_sliding_window"] = cfg.sliding_window > 0;
    j["sliding_window"] = window;
  }
  if (fam.window == F::kQwenLayers) {
    // transformers 5 derives layer_types from these three (sliding from max_window_layers on).
    j["max_window_layers"] = cfg.sliding_window > 0 ? cfg.first_sliding_layer : cfg.layers;
    json types = json::array();
    for (int64_t i = 0; i < cfg.layers; ++i)
      types.push_back(cfg.window(i) > 0 ? "sliding_attention" : "full_attention");
    j["layer_types"] = types;
  }
}

void check_schedule_exportable(const model::Config& cfg, const model::Family& fam) {
  if (cfg.attn_logit_softcap > 0 && fam.gemma_scalars && !fam.attn_softcap)
    throw InputError("a model with model.attn_logit_softcap = " + strf("%g", cfg.attn_logit_softcap) +
                         " has no Hugging Face form zt writes as " + cfg.family +
                         ": transformers' " + fam.architecture + " ignores attn_logit_softcapping",
                     "keep the checkpoint in zt's format (zt generate, zt train), set "
                     "model.family = gemma2 (Gemma 2 applies the cap), or train without it "
                     "(model.attn_logit_softcap = 0) to export.");
  if (fam.rope_per_type && cfg.rope_local_theta == 0 && cfg.rope_scaling.type != "default")
    throw InputError("a " + cfg.family + " model whose sliding layers share a scaled RoPE has no "
                     "transformers 4 form (rope_local_base_freq is unscaled)",
                     "set model.rope_local_theta (Gemma 3: 10000).");
  // Each field the family's config.json has no key for (one rule for every family).
  const auto refuse = [&](bool set, const char* what, const char* where) {
    if (set)
      throw InputError("a " + cfg.family + " model with " + what + " has no Hugging Face form",
                       std::string("zt writes it for ") + where + ".");
  };
  refuse(!cfg.layer_types.empty() && fam.window != model::Family::kQwenLayers &&
             fam.window != model::Family::kLayerTypes,
         "model.layer_types", "families with layer_types (model.family = gemma3_text, gemma2)");
  refuse(cfg.rope_local_theta > 0 && !fam.rope_per_type, "model.rope_local_theta",
         "families with a RoPE per layer type (model.family = gemma3_text)");
  refuse(cfg.query_pre_attn_scalar > 0 && !fam.gemma_scalars, "model.query_pre_attn_scalar",
         "Gemma's families (model.family = gemma3_text, gemma2)");
  refuse(cfg.final_logit_softcap > 0 && !fam.gemma_scalars, "model.final_logit_softcap",
         "Gemma's families (model.family = gemma3_text, gemma2)");
  refuse(cfg.attn_logit_softcap > 0 && !fam.attn_softcap, "model.attn_logit_softcap",
         "Gemma 2 (model.family = gemma2)");
}

}  // namespace zt::ckpt
