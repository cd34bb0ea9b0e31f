// The checkpoint format's names, the model config as JSON, and shape checks.
#include "zt/ckpt/format.hpp"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>

#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"

namespace zt::ckpt {

std::string param_path(std::string_view n) { return "/params/" + std::string(n); }
std::string exp_avg_path(std::string_view n) { return "/optim/exp_avg/" + std::string(n); }
std::string exp_avg_sq_path(std::string_view n) { return "/optim/exp_avg_sq/" + std::string(n); }

std::string config_to_json(const model::Config& c) {
  nlohmann::json j = {{"name", c.name},
                            {"vocab", c.vocab},
                            {"hidden", c.hidden},
                            {"layers", c.layers},
                            {"heads", c.heads},
                            {"kv_heads", c.kv_heads},
                            {"intermediate", c.intermediate},
                            {"context", c.context},
                            {"tied_embeddings", c.tied_embeddings},
                            {"rope_theta", c.rope_theta},
                            {"norm_eps", c.norm_eps}};
  // Only when set, so checkpoints of Llama models keep the attribute they always had.
  if (c.family != "llama") j["family"] = c.family;
  if (c.head_dim_ != 0) j["head_dim"] = c.head_dim_;
  if (c.attention_bias) j["attention_bias"] = true;
  if (c.sliding_window > 0) j["sliding_window"] = c.sliding_window;
  if (c.moe()) {
    j["experts"] = c.experts;
    j["experts_per_token"] = c.experts_per_token;
    j["router_aux_loss_coef"] = c.router_aux_loss_coef;
    j["router_aux_loss"] = c.router_aux_loss;
    // Qwen's (only when not Mixtral's defaults).
    if (c.moe_intermediate != 0) j["moe_intermediate"] = c.moe_intermediate;
    if (!c.norm_topk_prob) j["norm_topk_prob"] = false;
    if (c.shared_expert_intermediate != 0)
      j["shared_expert_intermediate"] = c.shared_expert_intermediate;
    if (c.decoder_sparse_step != 1) j["decoder_sparse_step"] = c.decoder_sparse_step;
    if (!c.mlp_only_layers.empty()) j["mlp_only_layers"] = c.mlp_only_layers;
  }
  if (c.first_sliding_layer > 0) j["first_sliding_layer"] = c.first_sliding_layer;
  const kernels::RopeScaling& r = c.rope_scaling;
  if (r.type != "default")
    j["rope_scaling"] = {{"type", r.type},
                         {"factor", r.factor},
                         {"low_freq_factor", r.low_freq_factor},
                         {"high_freq_factor", r.high_freq_factor},
                         {"original_context", r.original_context}};
  return json_dump(j);
}

model::Config config_from_json(const std::string& text, const std::string& file) {
  const char* hint = "the checkpoint's model_config attribute is damaged; write it again";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("checkpoint '" + file + "': attribute model_config is not JSON (" +
                         e.what() + ")",
                     hint);
  }
  model::Config c;
  try {
    c.name = j.at("name").get<std::string>();
    c.vocab = j.at("vocab").get<int64_t>();
    c.hidden = j.at("hidden").get<int64_t>();
    c.layers = j.at("layers").get<int64_t>();
    c.heads = j.at("heads").get<int64_t>();
    c.kv_heads = j.at("kv_heads").get<int64_t>();
    c.intermediate = j.at("intermediate").get<int64_t>();
    c.context = j.at("context").get<int64_t>();
    c.tied_embeddings = j.at("tied_embeddings").get<bool>();
    c.rope_theta = j.at("rope_theta").get<double>();
    c.norm_eps = j.at("norm_eps").get<double>();
    c.family = j.value("family", std::string("llama"));
    c.head_dim_ = j.value("head_dim", int64_t{0});
    c.attention_bias = j.value("attention_bias", false);
    c.sliding_window = j.value("sliding_window", int64_t{0});
    c.experts = j.value("experts", int64_t{0});
    c.experts_per_token = j.value("experts_per_token", int64_t{0});
    c.router_aux_loss_coef = j.value("router_aux_loss_coef", c.router_aux_loss_coef);
    c.router_aux_loss = j.value("router_aux_loss", false);
    c.moe_intermediate = j.value("moe_intermediate", int64_t{0});
    c.norm_topk_prob = j.value("norm_topk_prob", true);
    c.shared_expert_intermediate = j.value("shared_expert_intermediate", int64_t{0});
    c.decoder_sparse_step = j.value("decoder_sparse_step", int64_t{1});
    c.mlp_only_layers = j.value("mlp_only_layers", std::vector<int64_t>{});
    c.first_sliding_layer = j.value("first_sliding_layer", int64_t{0});
    if (j.contains("rope_scaling")) {
      const nlohmann::json& r = j.at("rope_scaling");
      c.rope_scaling = {r.at("type").get<std::string>(), r.at("factor").get<double>(),
                        r.at("low_freq_factor").get<double>(),
                        r.at("high_freq_factor").get<double>(),
                        r.at("original_context").get<int64_t>()};
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError("checkpoint '" + file + "': attribute model_config: " + e.what(), hint);
  }
  try {
    c.validate();
  } catch (const InputError& e) {
    throw InputError("checkpoint '" + file + "': its model_config is invalid: " + e.message(), hint);
  }
  return c;
}

std::string rope_scaling_text(const kernels::RopeScaling& r) {
  if (r.type == "default") return "none";
  if (r.type == "linear") return strf("linear (factor %g)", r.factor);
  return strf("%s (factor %g, low_freq_factor %g, high_freq_factor %g, "
              "original_max_position_embeddings %lld)",
              r.type.c_str(), r.factor, r.low_freq_factor, r.high_freq_factor,
              static_cast<long long>(r.original_context));
}

namespace {

// The model.* keys of a checkpoint's shape: [key, saved, run] (bools as 0/1).
std::vector<std::pair<const char*, std::pair<int64_t, int64_t>>> shape_keys(const model::Config& saved,
                                                                        const model::Config& run) {
  return {
      // The sizes a user sets first; head_dim (derived from them unless set) after them, so
      // a different hidden is named as such, not as the head_dim it implies.
      {"vocab", {saved.vocab, run.vocab}},
      {"hidden", {saved.hidden, run.hidden}},
      {"layers", {saved.layers, run.layers}},
      {"heads", {saved.heads, run.heads}},
      {"kv_heads", {saved.kv_heads, run.kv_heads}},
      {"intermediate", {saved.intermediate, run.intermediate}},
      {"tied_embeddings", {saved.tied_embeddings ? 1 : 0, run.tied_embeddings ? 1 : 0}},
      {"head_dim", {saved.head_dim(), run.head_dim()}},
      {"attention_bias", {saved.attention_bias ? 1 : 0, run.attention_bias ? 1 : 0}},
      {"experts", {saved.experts, run.experts}},
      {"experts_per_token", {saved.experts_per_token, run.experts_per_token}},
      {"moe_intermediate", {saved.expert_width(), run.expert_width()}},
      {"shared_expert_intermediate",
       {saved.shared_expert_intermediate, run.shared_expert_intermediate}},
      {"decoder_sparse_step", {saved.decoder_sparse_step, run.decoder_sparse_step}}};
}

}  // namespace

std::string keys_to_match(const model::Config& saved, const model::Config& run) {
  // Made with a preset, unchanged: that preset is the whole answer.
  const std::vector<std::string> presets = model::Config::preset_names();
  if (std::find(presets.begin(), presets.end(), saved.name) != presets.end()) {
    const model::Config p = model::Config::preset(saved.name);
    bool same = p.family == saved.family && p.mlp_only_layers == saved.mlp_only_layers;
    for (const auto& [key, v] : shape_keys(saved, p)) same = same && v.first == v.second;
    if (same) return "--set model.preset=" + saved.name;
  }
  std::string flags;
  if (saved.family != run.family) flags += " --set model.family=" + saved.family;
  for (const auto& [key, v] : shape_keys(saved, run)) {
    if (v.first == v.second) continue;
    const bool flag = std::string(key) == "tied_embeddings" || std::string(key) == "attention_bias";
    flags += strf(" --set model.%s=%s", key,
                  flag ? (v.first ? "true" : "false") : std::to_string(v.first).c_str());
  }
  if (saved.mlp_only_layers != run.mlp_only_layers) {
    std::string list;
    for (const int64_t l : saved.mlp_only_layers) list += strf("%s%lld", list.empty() ? "" : ",", static_cast<long long>(l));
    flags += strf(" --set model.mlp_only_layers=%s", list.empty() ? "''" : list.c_str());
  }
  if (!flags.empty()) flags.erase(0, 1);
  return flags;
}

std::vector<std::string> check_same_shape(const model::Config& saved, const model::Config& run,
                                          const std::string& file) {
  const std::string hint = "load it as it was saved: " + keys_to_match(saved, run) +
                           " (its model_config attribute lists every field: h5dump -a "
                           "model_config FILE)";
  const auto refuse = [&](const char* field, long long s, long long r) {
    throw InputError(strf("checkpoint '%s' holds a model of another shape: model.%s is %lld in "
                          "the checkpoint and %lld in this run",
                          file.c_str(), field, s, r),
                     hint);
  };
  if (saved.family != run.family)
    throw InputError("checkpoint '" + file + "' holds a model of another family: model.family is " +
                         saved.family + " in the checkpoint and " + run.family + " in this run",
                     hint);
  const auto ints = shape_keys(saved, run);
  for (const auto& [field, v] : ints)
    if (v.first != v.second) refuse(field, v.first, v.second);
  for (int64_t l = 0; l < saved.layers; ++l)  // the same layers dense (mlp_only_layers)
    if (saved.moe_layer(l) != run.moe_layer(l))
      throw InputError(strf("checkpoint '%s' holds a model of another shape: layer %lld has %s in "
                            "the checkpoint and %s in this run",
                            file.c_str(), static_cast<long long>(l),
                            saved.moe_layer(l) ? "the experts" : "the dense MLP",
                            run.moe_layer(l) ? "the experts" : "the dense MLP"),
                       hint);
  std::vector<std::string> warnings;
  if (saved.context != run.context)
    warnings.push_back(strf("checkpoint '%s': model.context %lld, this run %lld", file.c_str(),
                            static_cast<long long>(saved.context),
                            static_cast<long long>(run.context)));
  if (saved.rope_theta != run.rope_theta)
    warnings.push_back(strf("checkpoint '%s': model.rope_theta %g, this run %g", file.c_str(),
                            saved.rope_theta, run.rope_theta));
  if (!(saved.rope_scaling == run.rope_scaling))
    warnings.push_back(strf("checkpoint '%s': model.rope_scaling %s, this run %s", file.c_str(),
                            rope_scaling_text(saved.rope_scaling).c_str(),
                            rope_scaling_text(run.rope_scaling).c_str()));
  if (saved.sliding_window != run.sliding_window)
    warnings.push_back(strf("checkpoint '%s': model.sliding_window %lld, this run %lld",
                            file.c_str(), static_cast<long long>(saved.sliding_window),
                            static_cast<long long>(run.sliding_window)));
  if (saved.router_aux_loss != run.router_aux_loss ||
      saved.router_aux_loss_coef != run.router_aux_loss_coef)
    warnings.push_back(strf("checkpoint '%s': model.router_aux_loss %s (coef %g), this run %s "
                            "(coef %g)",
                            file.c_str(), saved.router_aux_loss ? "true" : "false",
                            saved.router_aux_loss_coef, run.router_aux_loss ? "true" : "false",
                            run.router_aux_loss_coef));
  if (saved.norm_topk_prob != run.norm_topk_prob)
    warnings.push_back(strf("checkpoint '%s': model.norm_topk_prob %s, this run %s", file.c_str(),
                            saved.norm_topk_prob ? "true" : "false",
                            run.norm_topk_prob ? "true" : "false"));
  if (saved.first_sliding_layer != run.first_sliding_layer)
    warnings.push_back(strf("checkpoint '%s': model.first_sliding_layer %lld, this run %lld",
                            file.c_str(), static_cast<long long>(saved.first_sliding_layer),
                            static_cast<long long>(run.first_sliding_layer)));
  if (saved.norm_eps != run.norm_eps)
    warnings.push_back(strf("checkpoint '%s': model.norm_eps %g, this run %g", file.c_str(),
                            saved.norm_eps, run.norm_eps));
  return warnings;
}

uint64_t sum64_u64(std::span<const uint64_t> x, uint64_t first) {
  uint64_t s = 0;
  for (size_t k = 0; k < x.size(); ++k) s += mix64(mix64(first + k) ^ x[k]);
  return s;
}

}  // namespace zt::ckpt
