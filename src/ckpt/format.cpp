// The checkpoint format's names, the model config as JSON, and shape checks.
#include "zt/ckpt/format.hpp"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>

#include "zt/core/error.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/hash.hpp"
#include "zt/core/log.hpp"
#include "zt/model/config_fields.hpp"

namespace zt::ckpt {

std::string param_path(std::string_view n) { return "/params/" + std::string(n); }
std::string exp_avg_path(std::string_view n) { return "/optim/exp_avg/" + std::string(n); }
std::string exp_avg_sq_path(std::string_view n) { return "/optim/exp_avg_sq/" + std::string(n); }

namespace {

using model::ConfigField;

// The JSON object of `attr` in j ("rope_scaling.type": j["rope_scaling"], "type").
std::pair<nlohmann::json*, std::string> attr_slot(nlohmann::json& j, const char* attr) {
  const std::string_view a(attr);
  const size_t dot = a.find('.');
  if (dot == std::string_view::npos) return {&j, std::string(a)};
  return {&j[std::string(a.substr(0, dot))], std::string(a.substr(dot + 1))};
}

bool saved(const ConfigField& f, const model::Config& c) {
  switch (f.save) {
    case ConfigField::kAlways: return true;
    case ConfigField::kWithExperts: return c.moe();
    case ConfigField::kWithRope: return c.rope_scaling.type != "default";
    default: return !model::same_value(f, c, model::Config{});
  }
}

}  // namespace

std::string config_to_json(const model::Config& c) {
  // Each field only when ConfigField::save says, so checkpoints of Llama models keep the
  // attributes they always had.
  nlohmann::json j = nlohmann::json::object();
  for (const ConfigField& f : model::config_fields()) {
    if (!saved(f, c)) continue;
    // Not a structured binding: the lambda captures it (clang before 16 cannot capture one).
    const std::pair<nlohmann::json*, std::string> slot = attr_slot(j, f.attr);
    std::visit([&](auto ref) { (*slot.first)[slot.second] = ref(const_cast<model::Config&>(c)); },
               f.ref);
  }
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
    for (const ConfigField& f : model::config_fields()) {
      const std::pair<nlohmann::json*, std::string> slot = attr_slot(j, f.attr);  // captured below
      nlohmann::json* const obj = slot.first;
      const std::string& key = slot.second;
      // Required: the fields always written, and every field of a present object.
      const bool required = f.save == ConfigField::kAlways || obj != &j;
      if (obj->is_null() || (!required && !obj->contains(key))) continue;
      std::visit([&](auto ref) {
        auto& v = ref(c);
        v = obj->at(key).get<std::decay_t<decltype(v)>>();
      }, f.ref);
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

std::string keys_to_match(const model::Config& saved, const model::Config& run) {
  const auto differs = [](const ConfigField& f, const model::Config& a, const model::Config& b) {
    return (f.resume == ConfigField::kShape || f.resume == ConfigField::kLayers) &&
           !model::same_field(f, a, b);
  };
  // Made with a preset, unchanged: that preset is the whole answer.
  const std::vector<std::string> presets = model::Config::preset_names();
  if (std::find(presets.begin(), presets.end(), saved.name) != presets.end()) {
    const model::Config p = model::Config::preset(saved.name);
    bool same = true;
    for (const ConfigField& f : model::config_fields()) same = same && !differs(f, saved, p);
    if (same) return "--set model.preset=" + saved.name;
  }
  std::string flags;
  for (const ConfigField& f : model::config_fields()) {
    if (!differs(f, saved, run)) continue;
    // A derived size (head_dim, the experts' width) set alike in both differs through the
    // fields it follows, which are listed; setting it would be refused on some families.
    if (f.shape && model::field_text(f, saved) == model::field_text(f, run)) continue;
    const std::string v = f.shape ? std::to_string(f.shape(saved)) : model::field_text(f, saved);
    flags += strf(" --set model.%s=%s", f.key, v.empty() ? "''" : v.c_str());
  }
  if (!flags.empty()) flags.erase(0, 1);
  return flags;
}

std::vector<std::string> check_same_shape(const model::Config& saved, const model::Config& run,
                                          const std::string& file) {
  const std::string hint = "load it as it was saved: " + keys_to_match(saved, run) +
                           " (its model_config attribute lists every field: h5dump -a "
                           "model_config FILE)";
  const auto text = [](const ConfigField& f, const model::Config& c) {
    return f.shape ? std::to_string(f.shape(c)) : model::field_text(f, c);
  };
  for (const ConfigField& f : model::config_fields())
    if (f.resume == ConfigField::kShape && !model::same_field(f, saved, run))
      throw InputError(strf("checkpoint '%s' holds a model of another %s: model.%s is %s in the "
                            "checkpoint and %s in this run",
                            file.c_str(), f.refused_as, f.key, text(f, saved).c_str(),
                            text(f, run).c_str()),
                       hint);
  for (int64_t l = 0; l < saved.layers; ++l)  // the same layers dense (mlp_only_layers)
    if (saved.moe_layer(l) != run.moe_layer(l))
      throw InputError(strf("checkpoint '%s' holds a model of another shape: layer %lld has %s in "
                            "the checkpoint and %s in this run",
                            file.c_str(), static_cast<long long>(l),
                            saved.moe_layer(l) ? "the experts" : "the dense MLP",
                            run.moe_layer(l) ? "the experts" : "the dense MLP"),
                       hint);
  std::vector<std::string> warnings;
  for (const ConfigField& f : model::config_fields())
    if (f.resume == ConfigField::kWarn && !model::same_field(f, saved, run))
      warnings.push_back(strf("checkpoint '%s': model.%s %s, this run %s", file.c_str(), f.key,
                              text(f, saved).c_str(), text(f, run).c_str()));
  return warnings;
}

uint64_t sum64_u64(std::span<const uint64_t> x, uint64_t first) {
  uint64_t s = 0;
  for (size_t k = 0; k < x.size(); ++k) s += mix64(mix64(first + k) ^ x[k]);
  return s;
}

}  // namespace zt::ckpt
