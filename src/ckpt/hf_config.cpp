// Hugging Face Llama config.json <-> zt::model::Config (see include/zt/ckpt/hf_config.hpp).
#include "zt/ckpt/hf_config.hpp"

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "zt/core/files.hpp"
#include "zt/core/json.hpp"
#include "zt/core/error.hpp"

namespace zt::ckpt {
namespace {

using json = nlohmann::json;

constexpr const char* kHint =
    "zt imports Llama-architecture models (LlamaForCausalLM: RMSNorm, RoPE without scaling, "
    "SwiGLU, no biases); docs/checkpoint-format.md lists the config.json keys it maps";

[[noreturn]] void bad(const std::string& where, const std::string& key, const std::string& what) {
  throw InputError("config '" + where + "': '" + key + "' " + what, kHint);
}

int64_t get_int(const json& j, const std::string& key, const std::string& where,
                std::optional<int64_t> fallback = std::nullopt) {
  if (!j.contains(key) || j.at(key).is_null()) {
    if (fallback) return *fallback;
    bad(where, key, "is missing");
  }
  const json& v = j.at(key);
  if (!v.is_number_integer()) bad(where, key, "is " + describe_json(v) + ", not an integer");
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    bad(where, key, "is too large");
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

}  // namespace

HfConfig parse_hf_config(const std::string& json_text, const std::string& where) {
  const json j = parse_json_strict(json_text, "config '" + where + "'", kHint);
  if (!j.is_object()) throw InputError("config '" + where + "' is not a JSON object", kHint);

  if (!j.contains("model_type")) bad(where, "model_type", "is missing (expected \"llama\")");
  if (j.at("model_type") != "llama")
    bad(where, "model_type", "is " + describe_json(j.at("model_type")) + "; zt imports \"llama\" only");
  if (j.contains("architectures")) {
    const json& a = j.at("architectures");
    if (!a.is_array() || a.size() != 1 || a[0] != "LlamaForCausalLM")
      bad(where, "architectures", "is " + describe_json(a) + "; zt imports [\"LlamaForCausalLM\"] only");
  }
  if (j.contains("rope_scaling") && !j.at("rope_scaling").is_null())
    bad(where, "rope_scaling",
        "is " + describe_json(j.at("rope_scaling")) + "; zt's RoPE has no scaling (only rope_theta)");
  if (get_bool(j, "attention_bias", where, false))
    bad(where, "attention_bias", "is true; zt's attention projections have no bias");
  if (get_bool(j, "mlp_bias", where, false))
    bad(where, "mlp_bias", "is true; zt's MLP projections have no bias");
  if (j.contains("hidden_act") && j.at("hidden_act") != "silu")
    bad(where, "hidden_act", "is " + describe_json(j.at("hidden_act")) + "; zt's MLP is SwiGLU (\"silu\")");

  HfConfig c;
  model::Config& m = c.model;
  m.name = "custom";
  m.vocab = get_int(j, "vocab_size", where);
  m.hidden = get_int(j, "hidden_size", where);
  m.layers = get_int(j, "num_hidden_layers", where);
  m.heads = get_int(j, "num_attention_heads", where);
  m.kv_heads = get_int(j, "num_key_value_heads", where, m.heads);
  m.intermediate = get_int(j, "intermediate_size", where);
  m.context = get_int(j, "max_position_embeddings", where);
  m.rope_theta = get_double(j, "rope_theta", where, 10000.0);
  m.norm_eps = get_double(j, "rms_norm_eps", where, 1e-6);
  m.tied_embeddings = get_bool(j, "tie_word_embeddings", where, false);
  if (j.contains("head_dim") && !j.at("head_dim").is_null() && m.heads > 0 &&
      get_int(j, "head_dim", where) != m.hidden / m.heads)
    bad(where, "head_dim",
        "is " + describe_json(j.at("head_dim")) + " but hidden_size / num_attention_heads is " +
            std::to_string(m.hidden / m.heads) + "; zt's head_dim is always the quotient");
  try {
    m.validate();
  } catch (const InputError& e) {
    throw InputError("config '" + where + "' describes a model zt refuses: " + e.message(),
                     e.hint());
  }
  if (j.contains("bos_token_id") && j.at("bos_token_id").is_number_integer())
    c.bos_token_id = j.at("bos_token_id").get<int64_t>();
  if (j.contains("eos_token_id") && j.at("eos_token_id").is_number_integer())
    c.eos_token_id = j.at("eos_token_id").get<int64_t>();
  if (j.contains("torch_dtype") && j.at("torch_dtype").is_string())
    c.torch_dtype = j.at("torch_dtype").get<std::string>();
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
  json j = json::object();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["vocab_size"] = cfg.vocab;
  j["hidden_size"] = cfg.hidden;
  j["intermediate_size"] = cfg.intermediate;
  j["num_hidden_layers"] = cfg.layers;
  j["num_attention_heads"] = cfg.heads;
  j["num_key_value_heads"] = cfg.kv_heads;
  j["head_dim"] = cfg.head_dim();
  j["max_position_embeddings"] = cfg.context;
  j["rms_norm_eps"] = cfg.norm_eps;
  j["rope_theta"] = cfg.rope_theta;
  j["rope_scaling"] = nullptr;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["mlp_bias"] = false;
  j["tie_word_embeddings"] = cfg.tied_embeddings;
  j["torch_dtype"] = torch_dtype;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  if (bos_token_id) j["bos_token_id"] = *bos_token_id;
  if (eos_token_id) j["eos_token_id"] = *eos_token_id;
  return j.dump(2) + "\n";
}

}  // namespace zt::ckpt
