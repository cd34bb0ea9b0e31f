#pragma once
// Hugging Face config.json <-> zt::model::Config, for model_type llama, mistral, qwen2,
// qwen3 and mixtral
// (the family table in src/model/family.cpp; docs/model.md "Model families").
//
//   config.json key          zt field                default when the key is absent
//   vocab_size               vocab                   (required)
//   hidden_size              hidden                  (required)
//   num_hidden_layers        layers                  (required)
//   num_attention_heads      heads                   (required)
//   num_key_value_heads      kv_heads                the family's transformers default
//   intermediate_size        intermediate            (required)
//   max_position_embeddings  context                 the family's transformers default
//   rope_theta               rope_theta              the family's (10000; mixtral 1e6)
//   rms_norm_eps             norm_eps                the family's (1e-6; mixtral 1e-5)
//   (every absent field: its family's transformers default, Family::hf in family.cpp)
//   tie_word_embeddings      tied_embeddings         false
//   model_type               family                  (required)
//   sliding_window (mistral) sliding_window          null: 0 (full causal)
//   use_sliding_window, sliding_window, max_window_layers / layer_types (qwen2, qwen3)
//                            sliding_window, first_sliding_layer (transformers 5's rule:
//                            the window only with use_sliding_window; layer_types, else
//                            layers >= max_window_layers (default 28), slide)
//
//   model_type               family                  (required: llama, qwen2, qwen3)
//   head_dim                 head_dim_               hidden/heads (qwen3: 128)
//   attention_bias           attention_bias          false (llama, qwen3; qwen2: q/k/v always)
//
//   model_type mixtral (also reads sliding_window):
//   num_local_experts        experts                 8 (as MixtralConfig)
//   num_experts_per_tok      experts_per_token       2
//   router_aux_loss_coef     router_aux_loss_coef    0.001
//   output_router_logits     router_aux_loss         false
//   router_jitter_noise      (must be 0)
//
// What zt's model cannot represent is refused with zt::InputError naming the file and the
// key: a model_type other than the families' (llama, mistral, qwen2, qwen3, mixtral), an
// unknown rope_scaling type, mlp_bias true, hidden_act other than "silu", a layer_types
// with a full layer after a sliding one or a kind other than full/sliding_attention, or
// layer_types on a family without it (docs/model.md).
#include <cstdint>
#include <optional>
#include <string>

#include "zt/model/config.hpp"

namespace zt::ckpt {

struct HfConfig {
  model::Config model;                 // validated
  std::optional<int64_t> bos_token_id; // kept for export, when config.json has them
  std::optional<int64_t> eos_token_id;
  std::string torch_dtype;             // "bfloat16", "float32", ... or "" when absent
};

// Parses config.json text; `where` names the file in errors.
HfConfig parse_hf_config(const std::string& json_text, const std::string& where);
HfConfig read_hf_config(const std::string& path);  // missing file: zt::InputError

// config.json text in cfg.family's model_type (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM, ...; a "llama" with a sliding window is written as "mistral")
// (pretty-printed, 2 spaces). torch_dtype is
// transformers' name: "float32", "bfloat16" or "float16".
std::string hf_config_json(const model::Config& cfg, const std::string& torch_dtype,
                           std::optional<int64_t> bos_token_id = std::nullopt,
                           std::optional<int64_t> eos_token_id = std::nullopt);

}  // namespace zt::ckpt
