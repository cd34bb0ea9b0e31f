// The per-layer attention schedule and RoPE in model::Config (config.hpp): the checks of
// model.layer_types, the Gemma scalars and soft-caps, partial and multimodal RoPE, and
// rope_scaling.
#include <algorithm>
#include <cmath>
#include <utility>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/config.hpp"
#include "zt/model/family.hpp"

namespace zt::model {

void Config::validate_schedule() const {
  const char* hint = "model.layer_types holds one letter per layer: s (sliding_attention: "
                     "model.sliding_window) or f (full_attention), e.g. sssssf for Gemma 3's 5:1; "
                     "empty: the model.first_sliding_layer rule";
  if (!layer_types.empty()) {
    if (static_cast<int64_t>(layer_types.size()) != layers)
      throw InputError(strf("model.layer_types has %zu letters for %lld layers", layer_types.size(),
                            static_cast<long long>(layers)),
                       hint);
    if (first_sliding_layer != 0)
      throw InputError("model.layer_types and model.first_sliding_layer are both set",
                       "give one schedule: layer_types (any pattern) or first_sliding_layer.");
    for (size_t i = 0; i < layer_types.size(); ++i) {
      const char t = layer_types[i];
      if (t == 'l' && model::family(family).hybrid) continue;  // validate_linear()
      if (t == 'l')
        throw InputError(strf("model.layer_types: layer %zu is linear_attention (a Gated DeltaNet "
                              "layer) in model.family = %s",
                              i, family.c_str()),
                         "Gated DeltaNet layers are Qwen3.5's: set model.family = qwen3_5_text "
                         "(or qwen3_5_moe_text), or make every layer s or f.");
      if (t != 's' && t != 'f')
        throw InputError(strf("model.layer_types: layer %zu is '%c'", i, t), hint);
    }
    validate_linear();
    if (layer_types.find('s') != std::string::npos && sliding_window <= 0)
      throw InputError("model.layer_types names sliding layers while model.sliding_window is 0",
                       "set model.sliding_window (Gemma 3: 512), or make every layer f.");
  }
  const auto non_negative = [](double v, const char* field, const char* what) {
    if (!(v >= 0) || !std::isfinite(v))
      throw InputError(strf("model.%s = %g: must be a finite number >= 0", field, v), what);
  };
  non_negative(rope_local_theta, "rope_local_theta",
               "the sliding layers' RoPE base (Gemma 3: 10000); 0: the full layers' RoPE.");
  non_negative(query_pre_attn_scalar, "query_pre_attn_scalar",
               "scores are scaled by query_pre_attn_scalar^-0.5 (Gemma 3 1B: 256); 0: head_dim.");
  non_negative(final_logit_softcap, "final_logit_softcap",
               "logits are capped as cap tanh(logits / cap) (Gemma 2: 30); 0: none.");
  non_negative(attn_logit_softcap, "attn_logit_softcap",
               "attention scores are capped as cap tanh(score / cap) (Gemma 2: 50); 0: none.");
}

void Config::validate_rope_scaling() const {
  const kernels::RopeScaling& s = rope_scaling;
  const char* hint = "rope_scaling types: default, linear (factor), llama3 (factor, "
                     "low_freq_factor, high_freq_factor, original_max_position_embeddings), yarn "
                     "(factor, beta_fast, beta_slow, original_max_position_embeddings); see "
                     "docs/model.md";
  const auto positive = [&](double v, const char* field) {
    if (!(v > 0) || !std::isfinite(v))
      throw InputError(strf("model.rope_scaling.%s = %g: must be a finite number > 0", field, v),
                       hint);
  };
  if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1) || rotary_dim() < 2 ||
      rotary_dim() % 2 != 0)
    throw InputError(strf("model.partial_rotary_factor = %g gives %lld rotated dims of head_dim "
                          "%lld: it must be in (0, 1] and rotate an even number >= 2",
                          partial_rotary_factor, static_cast<long long>(rotary_dim()),
                          static_cast<long long>(head_dim())),
                     "RoPE rotates pairs; Qwen3.5 uses 0.25 of head_dim 256 (64 dims); 1: all.");
  if (!mrope_section.empty() &&
      (mrope_section.size() != 3 || *std::min_element(mrope_section.begin(), mrope_section.end()) < 0))
    throw InputError(strf("model.mrope_section holds %zu values: it takes 3 counts >= 0 (time, "
                          "height, width)", mrope_section.size()),
                     "Qwen3.5 uses 11,11,10; empty: no multimodal RoPE.");
  if (s.type == "default") return;
  if (s.type != "linear" && s.type != "llama3" && s.type != "yarn")
    throw InputError("model.rope_scaling type '" + s.type + "' is not one zt implements", hint);
  positive(s.factor, "factor");
  if (s.type == "linear") return;
  if (s.type == "yarn") {
    positive(s.beta_fast, "beta_fast");
    positive(s.beta_slow, "beta_slow");
    for (const auto& [v, f] : {std::pair{s.mscale, "mscale"}, {s.mscale_all_dim, "mscale_all_dim"},
                               {s.attention_factor, "attention_factor"}})
      if (!(v >= 0) || !std::isfinite(v))
        throw InputError(strf("model.rope_scaling.%s = %g: must be a finite number >= 0 (0: "
                              "absent)", f, v), hint);
  }
  positive(s.low_freq_factor, "low_freq_factor");
  positive(s.high_freq_factor, "high_freq_factor");
  if (!(s.high_freq_factor > s.low_freq_factor))
    throw InputError(strf("model.rope_scaling: high_freq_factor %g must be above "
                          "low_freq_factor %g",
                          s.high_freq_factor, s.low_freq_factor),
                     hint);
  if (s.original_context <= 0)
    throw InputError(strf("model.rope_scaling.original_max_position_embeddings = %lld: must be "
                          "> 0",
                          static_cast<long long>(s.original_context)),
                     hint);
}

}  // namespace zt::model
