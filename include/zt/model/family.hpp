#pragma once
// The model families: one row per Hugging Face model_type, the model side and the
// config.json side in one place (src/model/family.cpp; docs/model.md "Model families").
// A row is what the family adds to the Llama block (torchtitan style), read by the CPU
// and GPU models (through Config::qkv_bias() ...), the converter (hf_config.cpp,
// hf_names.cpp), the estimate and the presets. Adding a family that recombines these
// pieces is one row (plus its presets, tests and docs).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zt::model {

struct Family {
  const char* model_type = "";    // Hugging Face model_type (Config::family)
  const char* architecture = "";  // config.json's architectures[0]
  // The attention biases: kFromFlag: q/k/v and o by attention_bias (HF attention_bias);
  // kQkvOnly: q/k/v always, no o (attention_bias must stay false); kQkvFromFlag: q/k/v by
  // attention_bias (HF's qkv_bias), no o; kNone: none (attention_bias must stay false).
  enum Bias : uint8_t { kFromFlag, kQkvOnly, kQkvFromFlag, kNone } bias = kFromFlag;
  // Why attention_bias = true is refused (kQkvOnly, kNone).
  const char* no_bias_flag = "";
  bool qk_norm = false;  // per-head RMSNorm of q and k before RoPE
  // Qwen3.5's output gate: q_proj emits [query | gate] per head (2 D rows each), and the
  // attention's output is multiplied by sigmoid(gate) before o_proj.
  bool output_gate = false;
  // The MLP: kDense the SwiGLU; kMixtral the experts (Mixtral's config.json keys and
  // tensor names: block_sparse_moe.experts.E.w1/w3/w2); kQwen the experts with Qwen's
  // fields (moe_intermediate, norm_topk_prob, decoder_sparse_step, mlp_only_layers) and
  // tensor names (mlp.experts.E.gate_proj/up_proj/down_proj).
  // kGptOss the experts with gpt-oss's keys and names (mlp.router, mlp.experts.gate_up_proj
  // [E, C, 2I] interleaved, down_proj [E, I, C], their biases: hf_names.cpp).
  enum Moe : uint8_t { kDense, kMixtral, kQwen, kGptOss } moe = kDense;
  bool shared_expert = false;  // the MoE MLP has Qwen2-MoE's shared expert
  // kQwen as Qwen3-Next's block (qwen3_5_moe_text): every layer routed, the top-k weights
  // always renormalised; config.json has no intermediate_size, norm_topk_prob,
  // decoder_sparse_step or mlp_only_layers. Its files name the experts as Qwen2-MoE's (what
  // transformers 5.24's save_pretrained writes; the fused form is read as well).
  bool moe_every_layer = false;
  // gpt-oss's MoE: the router has a bias, the k weights are a softmax over the k chosen
  // logits, the experts have biases (gate_up [E, 2I], down [E, C]) and the clamped SwiGLU
  // (Config::swiglu_limit, swiglu_alpha).
  bool router_bias = false;
  bool topk_softmax = false;
  bool expert_bias = false;
  // A learned sink logit per query head in every layer's attention (gpt-oss; self_attn.sinks).
  bool sinks = false;
  // Gemma's block: RMSNorm weights as (norm_offset + w); post-attention and post-feed-forward
  // norms (the sandwich); GeGLU with tanh-GELU; embeddings times sqrt(hidden).
  double norm_offset = 0.0;
  bool sandwich = false;
  bool gelu_mlp = false;
  bool embed_scale = false;

  // config.json: the key read into attention_bias (nullptr: none), mlp_bias (must be false).
  const char* bias_key = nullptr;
  bool mlp_bias_key = false;
  // The sliding-window keys: kNoWindow none; kMistral sliding_window (null: full), every
  // layer; kQwenLayers use_sliding_window, sliding_window, max_window_layers, layer_types
  // (full layers, then sliding); kQwenAll use_sliding_window + sliding_window, every layer;
  // kLayerTypes layer_types (any pattern; absent: sliding_window_pattern, transformers 4's
  // Gemma 3), sliding_window, rope_local_base_freq (hf_schedule.cpp).
  enum Window : uint8_t { kNoWindow, kMistral, kQwenLayers, kQwenAll, kLayerTypes } window = kNoWindow;
  // kLayerTypes: the schedule mixes linear_attention and full_attention layers (Qwen3.5);
  // without layer_types every full_attention_interval-th layer is full (Defaults's
  // sliding_pattern), the others linear.
  bool hybrid = false;
  // kLayerTypes: a RoPE per layer type (hf_schedule.cpp; Gemma 3); false: one RoPE
  // (rope_parameters / rope_scaling) for every layer (Gemma 2, gpt-oss).
  bool rope_per_type = false;
  // config.json holds Gemma's scalars (hf_schedule.cpp): query_pre_attn_scalar,
  // final_logit_softcapping, hidden_activation, use_bidirectional_attention.
  bool gemma_scalars = false;
  // config.json's attn_logit_softcapping caps the attention scores (Gemma 2). false in a
  // family with gemma_scalars: transformers ignores the key (Gemma 3), zt refuses it set.
  bool attn_softcap = false;
  // kQwenLayers without layer_types: every other layer below max_window_layers slides,
  // from layer 0 (transformers 5's Qwen2MoeConfig), instead of the layers from it on.
  bool window_alternates = false;
  // Exported as this model_type when the model has a sliding window and this family's
  // config.json cannot say so (a llama with a window is a mistral); nullptr: refused.
  const char* with_window = nullptr;

  // What an absent (or null) config.json key takes: transformers' own default of the
  // family's config class (transformers 5.24, LlamaConfig() ... Qwen3MoeConfig()). The
  // architecture's sizes have none: their absence is refused by name.
  struct Defaults {
    std::optional<int64_t> kv_heads;  // num_key_value_heads; nullopt: num_attention_heads
    int64_t context = 0;              // max_position_embeddings
    double rope_theta = 10000.0;
    double norm_eps = 1e-6;           // rms_norm_eps
    std::optional<int64_t> head_dim;  // nullopt: hidden_size / num_attention_heads
    double partial_rotary = 1.0;      // partial_rotary_factor (read only where hybrid)
    bool attention_bias = false;      // bias_key's
    bool tied_embeddings = false;     // tie_word_embeddings
    int64_t sliding_window = 0;       // key absent: mistral; qwen with use_sliding_window
    int64_t sliding_pattern = 6;      // kLayerTypes without layer_types: every n-th layer full
    double final_logit_softcap = 0;   // gemma_scalars: final_logit_softcapping (0: null)
    double attn_logit_softcap = 0;    // attn_softcap: attn_logit_softcapping (0: null)
    int64_t max_window_layers = 0;    // kQwenLayers
    int64_t experts = 0, experts_per_token = 0, moe_intermediate = 0,
            shared_expert_intermediate = 0;
  } hf;
};

// The row of `model_type`, or nullptr.
const Family* find_family(const std::string& model_type);
// The row of `model_type`; throws zt::InputError naming the known ones.
const Family& family(const std::string& model_type);
std::vector<std::string> family_names();
// "llama, mistral, ..." (quoted: "\"llama\", ...").
std::string family_list(bool quoted = false);

}  // namespace zt::model
