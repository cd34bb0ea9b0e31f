// The family table (include/zt/model/family.hpp): one row per model_type.
#include "zt/model/family.hpp"

#include "zt/core/error.hpp"

namespace zt::model {
namespace {

using F = Family;

const Family kFamilies[] = {
    {.model_type = "llama", .architecture = "LlamaForCausalLM", .bias = F::kFromFlag,
     .bias_key = "attention_bias", .mlp_bias_key = true, .with_window = "mistral",
     .hf = {.context = 2048}},
    // The Llama block; its sliding window is a Config field.
    {.model_type = "mistral", .architecture = "MistralForCausalLM", .bias = F::kFromFlag,
     .window = F::kMistral, .hf = {.kv_heads = 8, .context = 131072, .sliding_window = 4096}},
    {.model_type = "qwen2", .architecture = "Qwen2ForCausalLM", .bias = F::kQkvOnly,
     .no_bias_flag = "Qwen2 has q/k/v biases always and no o bias (transformers' Qwen2Attention "
                     "ignores attention_bias); leave model.attention_bias false.",
     .window = F::kQwenLayers,
     .hf = {.kv_heads = 32, .context = 32768, .sliding_window = 4096, .max_window_layers = 28}},
    {.model_type = "qwen3", .architecture = "Qwen3ForCausalLM", .bias = F::kFromFlag,
     .qk_norm = true, .bias_key = "attention_bias", .window = F::kQwenLayers,
     .hf = {.kv_heads = 32, .context = 32768, .head_dim = 128, .sliding_window = 4096,
            .max_window_layers = 28}},
    // Mistral's block with the MoE MLP.
    {.model_type = "mixtral", .architecture = "MixtralForCausalLM", .bias = F::kNone,
     .no_bias_flag = "Mixtral's attention has no biases (MixtralConfig has no attention_bias); "
                     "leave it false.",
     .moe = F::kMixtral, .window = F::kMistral,
     .hf = {.kv_heads = 8, .context = 131072, .rope_theta = 1e6, .norm_eps = 1e-5, .experts = 8,
            .experts_per_token = 2}},
    // Qwen2 + experts + shared expert; q/k/v biases by HF's qkv_bias.
    {.model_type = "qwen2_moe", .architecture = "Qwen2MoeForCausalLM", .bias = F::kQkvFromFlag,
     .moe = F::kQwen, .shared_expert = true, .bias_key = "qkv_bias", .window = F::kQwenLayers,
     .window_alternates = true,
     .hf = {.kv_heads = 16, .context = 32768, .attention_bias = true, .sliding_window = 4096,
            .max_window_layers = 28, .experts = 60, .experts_per_token = 4,
            .moe_intermediate = 1408, .shared_expert_intermediate = 5632}},
    // Qwen3 + experts.
    {.model_type = "qwen3_moe", .architecture = "Qwen3MoeForCausalLM", .bias = F::kFromFlag,
     .qk_norm = true, .moe = F::kQwen, .bias_key = "attention_bias", .window = F::kQwenAll,
     .hf = {.kv_heads = 4, .context = 32768, .sliding_window = 4096, .experts = 128,
            .experts_per_token = 8, .moe_intermediate = 768}},
    // Gemma 3's text model: (1 + w) norms, the sandwich, GeGLU, scaled embeddings, q/k
    // norms; layer_types with a RoPE per type (hf_schedule.cpp).
    {.model_type = "gemma3_text", .architecture = "Gemma3ForCausalLM", .bias = F::kFromFlag,
     .qk_norm = true, .norm_offset = 1.0, .sandwich = true, .gelu_mlp = true,
     .embed_scale = true, .bias_key = "attention_bias", .window = F::kLayerTypes,
     .rope_per_type = true, .gemma_scalars = true,
     .hf = {.kv_heads = 4, .context = 131072, .rope_theta = 1e6, .head_dim = 256,
            .tied_embeddings = true, .sliding_window = 4096}},
    // Gemma 2: Gemma 3's block without q/k norms, one RoPE for every layer, sliding and full
    // layers alternating, the attention and final soft-caps.
    {.model_type = "gemma2", .architecture = "Gemma2ForCausalLM", .bias = F::kFromFlag,
     .norm_offset = 1.0, .sandwich = true, .gelu_mlp = true, .embed_scale = true,
     .bias_key = "attention_bias", .window = F::kLayerTypes, .gemma_scalars = true,
     .attn_softcap = true,
     .hf = {.kv_heads = 4, .context = 8192, .head_dim = 256, .tied_embeddings = true,
            .sliding_window = 4096,
            .sliding_pattern = 2, .final_logit_softcap = 30.0, .attn_logit_softcap = 50.0}},
    // gpt-oss: attention biases and sinks, alternating sliding/full layers, yarn RoPE, the
    // experts with biases and the clamped SwiGLU.
    {.model_type = "gpt_oss", .architecture = "GptOssForCausalLM", .bias = F::kFromFlag,
     .moe = F::kGptOss, .router_bias = true, .topk_softmax = true, .expert_bias = true,
     .sinks = true, .bias_key = "attention_bias", .window = F::kLayerTypes,
     .hf = {.kv_heads = 8, .context = 131072, .rope_theta = 150000.0, .norm_eps = 1e-5,
            .head_dim = 64, .attention_bias = true, .sliding_window = 128, .sliding_pattern = 2,
            .experts = 128, .experts_per_token = 4}},
    // Qwen3.5's text model: (1 + w) norms, q/k norms, the attention's output gate, partial
    // RoPE; layer_types mixes Gated DeltaNet (linear_attention) and full layers.
    {.model_type = "qwen3_5_text", .architecture = "Qwen3_5ForCausalLM", .bias = F::kFromFlag,
     .qk_norm = true, .output_gate = true, .norm_offset = 1.0, .bias_key = "attention_bias",
     .window = F::kLayerTypes, .hybrid = true,
     .hf = {.kv_heads = 4, .context = 32768, .head_dim = 256, .partial_rotary = 0.25,
            .sliding_pattern = 4}},
    // Qwen3.5's MoE text model: qwen3_5_text's layers with Qwen3-Next's experts and the
    // shared expert with its sigmoid gate (Qwen3_5MoeSparseMoeBlock).
    {.model_type = "qwen3_5_moe_text", .architecture = "Qwen3_5MoeForCausalLM",
     .bias = F::kFromFlag, .qk_norm = true, .output_gate = true, .moe = F::kQwen,
     .shared_expert = true, .moe_every_layer = true, .norm_offset = 1.0,
     .bias_key = "attention_bias", .window = F::kLayerTypes, .hybrid = true,
     .hf = {.kv_heads = 2, .context = 32768, .head_dim = 256, .partial_rotary = 0.25,
            .sliding_pattern = 4, .experts = 256, .experts_per_token = 8, .moe_intermediate = 512,
            .shared_expert_intermediate = 512}},
};

}  // namespace

const Family* find_family(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

const Family& family(const std::string& model_type) {
  if (const Family* f = find_family(model_type)) return *f;
  throw InputError("model.family = '" + model_type + "' is not a family zt implements",
                   "families (Hugging Face model_type): " + family_list() +
                       "; docs/model.md has the table.");
}

std::vector<std::string> family_names() {
  std::vector<std::string> out;
  for (const Family& f : kFamilies) out.emplace_back(f.model_type);
  return out;
}

std::string family_list(bool quoted) {
  std::string out;
  for (const Family& f : kFamilies) {
    if (!out.empty()) out += ", ";
    if (quoted) out += '"';
    out += f.model_type;
    if (quoted) out += '"';
  }
  return out;
}

}  // namespace zt::model
