#pragma once
// The shape of the built-in Llama-style decoder: sizes, presets, validation, parameter
// and FLOP counts. Nothing here allocates tensors; see layout.hpp for where each
// parameter lives and model.hpp for the forward/backward.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zt/kernels/rope.hpp"

namespace zt::model {

struct Config {
  std::string name = "custom";  // preset name, or "custom"
  std::string family = "llama";  // the HF model_type written back on export (family table: docs/model.md)
  int64_t vocab = 256;          // tokens in the vocabulary (V)
  int64_t hidden = 128;         // model width (C)
  int64_t layers = 4;           // transformer blocks (L)
  int64_t heads = 4;            // query heads (H)
  int64_t head_dim_ = 0;        // D when set (Qwen3, Mistral Nemo); 0: hidden / heads. Read head_dim()
  int64_t kv_heads = 2;         // key/value heads (G); heads % kv_heads == 0 (GQA)
  int64_t intermediate = 512;   // SwiGLU inner width (I)
  int64_t context = 256;        // longest sequence the model accepts (RoPE table size)
  bool tied_embeddings = false; // lm_head shares model.embed_tokens.weight
  double rope_theta = 10000.0;  // RoPE base
  kernels::RopeScaling rope_scaling;  // RoPE frequency scaling (default: none)
  // Partial RoPE (transformers' partial_rotary_factor; Qwen3.5: 0.25): the first
  // rotary_dim() = int(head_dim * factor) dims of each head rotate, the rest pass.
  double partial_rotary_factor = 1.0;
  // Qwen3.5's multimodal RoPE (rope_parameters' mrope_section, mrope_interleaved): which
  // frequencies take the height and width positions of image tokens. zt reads text, whose
  // three positions are equal, so the rotation is the plain RoPE's; kept for export.
  std::vector<int64_t> mrope_section;
  bool mrope_interleaved = false;
  double norm_eps = 1e-5;       // RMSNorm epsilon
  // HF's attention_bias: biases on q/k/v and o (llama, qwen3); qwen2 has q/k/v biases
  // always and no o bias, so it keeps this false. See qkv_bias(), o_bias().
  bool attention_bias = false;
  int64_t sliding_window = 0;  // attend to at most this many previous positions incl. self (0 = full causal)
  // Mixture of experts (family mixtral; docs/model.md "Mixture of experts"): each block's
  // MLP is a router (mlp.gate, [E, C]) and E SwiGLU experts of width `intermediate`, k of
  // them per token (zt/kernels/moe.hpp). experts == 0: the dense MLP (every other family).
  int64_t experts = 0;            // E (transformers' num_local_experts)
  int64_t experts_per_token = 0;  // k (num_experts_per_tok), 1 .. E
  // The load-balancing loss: added to the loss times this coefficient when
  // router_aux_loss is true (transformers' output_router_logits; its default is false,
  // so a MixtralForCausalLM's loss is the cross-entropy alone unless it is set).
  double router_aux_loss_coef = 0.001;  // transformers' MixtralConfig default
  bool router_aux_loss = false;
  // Qwen's mixture of experts (families qwen2_moe, qwen3_moe; docs/model.md "Mixture of
  // experts"). Mixtral leaves them at these defaults.
  int64_t moe_intermediate = 0;  // the experts' width (moe_intermediate_size); 0: intermediate
  bool norm_topk_prob = true;    // renormalise the k chosen probabilities (Mixtral always does)
  // qwen2_moe's shared expert: a SwiGLU of this width on every token, times
  // sigmoid(shared_expert_gate x), added to the routed sum (0: none; the other families).
  int64_t shared_expert_intermediate = 0;
  // Layer l has the MoE MLP when (l + 1) % decoder_sparse_step == 0 and l is not in
  // mlp_only_layers; the others the dense SwiGLU of width `intermediate` (transformers'
  // Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer).
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // The per-layer attention schedule (docs/model.md "Families: architectures"): layer_types
  // holds one letter per layer, 's' sliding (attends with sliding_window, rotates with the
  // sliding layers' RoPE) or 'f' full (causal, rope_theta + rope_scaling); 'l' (Qwen3.5's
  // linear_attention) is refused by name. Empty: the layers from first_sliding_layer on
  // slide when sliding_window > 0 (Qwen's max_window_layers; 0: every layer, Mistral's).
  std::string layer_types;
  int64_t first_sliding_layer = 0;
  // Qwen3.5's Gated DeltaNet layers (layer_types 'l', family row `hybrid`; docs/model.md):
  // key and value heads and head dims, the causal conv1d's kernel (transformers'
  // linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
  // linear_value_head_dim, linear_conv_kernel_dim).
  int64_t linear_key_heads = 16, linear_value_heads = 32;
  int64_t linear_key_dim = 128, linear_value_dim = 128;
  int64_t linear_conv_kernel = 4;
  bool linear(int64_t l) const {
    return !layer_types.empty() && layer_types[static_cast<size_t>(l)] == 'l';
  }
  bool linear_layers() const { return layer_types.find('l') != std::string::npos; }
  // Some layer attends (sliding or full; every layer when layer_types is empty).
  bool attention_layers() const {
    return layer_types.empty() || layer_types.find_first_not_of('l') != std::string::npos;
  }
  // The conv's channels [q | k | v]: 2 Hk Dk + Hv Dv.
  int64_t linear_conv_dim() const {
    return 2 * linear_key_heads * linear_key_dim + linear_value_heads * linear_value_dim;
  }
  // A Gated DeltaNet mixer's parameters (in_proj_qkv, z, b, a, conv1d, A_log, dt_bias,
  // norm, out_proj); validate_linear(): its sizes (config_linear.cpp).
  int64_t num_linear_mixer_params() const;
  void validate_linear() const;
  // The RoPE of the sliding layers: base rope_local_theta without scaling (Gemma 3's
  // rope_local_base_freq); 0: the full layers' RoPE (rope_theta, rope_scaling).
  double rope_local_theta = 0.0;
  bool sliding(int64_t l) const {
    return layer_types.empty() ? sliding_window > 0 && l >= first_sliding_layer
                               : layer_types[static_cast<size_t>(l)] == 's';
  }
  // The window layer l attends with (0: full causal), and whether it rotates with the
  // sliding layers' own RoPE (rope_local_theta).
  int64_t window(int64_t l) const { return sliding(l) ? sliding_window : 0; }
  bool local_rope(int64_t l) const { return rope_local_theta > 0 && sliding(l); }
  // Gemma's attention and head (the other families leave them 0): scores scaled by
  // query_pre_attn_scalar^-0.5 instead of head_dim^-0.5 (0: head_dim); the final logits
  // soft-capped as cap tanh(logits / cap) (0: none); the attention's scaled scores z
  // soft-capped as cap tanh(z / cap) before the mask and softmax (Gemma 2's
  // attn_logit_softcapping; 0: none).
  double query_pre_attn_scalar = 0.0;
  double final_logit_softcap = 0.0;
  double attn_logit_softcap = 0.0;
  // gpt-oss's experts (family row expert_bias): h = (clamp(up, -limit, limit) + 1) * g
  // sigmoid(alpha g) with g = min(gate, limit) (transformers' GptOssExperts); 0: SwiGLU.
  double swiglu_limit = 0.0;
  double swiglu_alpha = 1.702;
  // The factor q is multiplied by before attention's head_dim^-0.5: 1 unless
  // query_pre_attn_scalar is set.
  double query_scale() const;

  // Presets (shapes as in the published Hugging Face config.json of each model):
  //   tiny            byte vocab 256, hidden 128, 4 layers, 4 heads, 2 KV heads,
  //                   intermediate 512, context 256: 1,049,728 parameters
  //   tinyllama-1.1b  TinyLlama/TinyLlama-1.1B: 2048 / 22 / 32 heads / 4 KV / 5632 / 32000 / 2048
  //   open-llama-3b   openlm-research/open_llama_3b: 3200 / 26 / 32 / 32 / 8640 / 32000 / 2048
  //   llama-7b        LLaMA-1 7B (huggyllama/llama-7b): 4096 / 32 / 32 / 32 / 11008 / 32000 / 2048
  //   llama-13b       LLaMA-1 13B (huggyllama/llama-13b): 5120 / 40 / 40 / 40 / 13824 / 32000 / 2048
  //   llama-3.1-8b    meta-llama/Llama-3.1-8B: 4096 / 32 / 32 / 8 / 14336 / 128256 / 131072,
  //                   rope_theta 500000, llama3 scaling (8, 1, 4, 8192): 8,030,261,248
  //   llama-3.1-70b   meta-llama/Llama-3.1-70B: 8192 / 80 / 64 / 8 / 28672 / 128256 / 131072,
  //                   same RoPE: 70,553,706,496
  //   llama-3.2-1b    meta-llama/Llama-3.2-1B: 2048 / 16 / 32 / 8 / 8192 / 128256 / 131072,
  //                   tied, llama3 scaling (32, 1, 4, 8192): 1,235,814,400
  //   llama-3.2-3b    meta-llama/Llama-3.2-3B: 3072 / 28 / 24 / 8 / 8192 / 128256 / 131072,
  //                   tied, same RoPE: 3,212,749,824
  //   mistral-7b      mistralai/Mistral-7B-v0.1: 4096 / 32 / 32 / 8 / 14336 / 32000 / 32768,
  //                   rope_theta 10000, sliding_window 4096: 7,241,732,096
  //   mixtral-8x7b    mistralai/Mixtral-8x7B-v0.1: 4096 / 32 / 32 / 8 / 14336 / 32000 / 32768,
  //                   8 experts, 2 per token, rope_theta 1e6, router_aux_loss_coef 0.02:
  //                   46,702,792,704 (12,879,925,248 active per token)
  //   qwen3-30b-a3b   Qwen/Qwen3-30B-A3B (qwen3_moe): 2048 / 48 / 32 / 4 / 6144 / 151936 /
  //                   40960, head_dim 128, 128 experts of 768, 8 per token, renormalised
  //   qwen1.5-moe-a2.7b Qwen/Qwen1.5-MoE-A2.7B (qwen2_moe): 2048 / 24 / 16 / 16 / 5632 /
  //                   151936 / 8192, q/k/v biases, 60 experts of 1408, 4 per token, shared
  //                   expert 5632
  //   gemma-3-1b      google/gemma-3-1b-pt (gemma3_text): 1152 / 26 / 4 / 1 / 6912 / 262144 /
  //                   32768, head_dim 256, tied, 5 sliding (512, theta 1e4) : 1 full (1e6),
  //                   query_pre_attn_scalar 256: 999,885,952
  //   gemma-3-4b/12b/27b google/gemma-3-*-pt's text_config: 2560 / 34 / 8 / 4 / 10240,
  //                   3840 / 48 / 16 / 8 / 15360, 5376 / 62 / 32 / 16 / 21504 (head_dim 128,
  //                   scalar 168); vocab 262208, window 1024, full layers linear x8:
  //                   3,880,263,168 / 11,766,034,176 / 27,009,346,304
  //   gemma-2-2b      google/gemma-2-2b (gemma2): 2304 / 26 / 8 / 4 / 9216 / 256000 / 8192,
  //                   head_dim 256, tied, sliding (4096) and full alternating, soft-caps 50
  //                   (attention) and 30 (logits): 2,614,341,888
  //   gpt-oss-20b     openai/gpt-oss-20b (gpt_oss): 2880 / 24 / 64 / 8 / 2880 / 201088 /
  //                   131072, head_dim 64, sliding 128 and full alternating, yarn (32 over
  //                   4096), 32 experts with biases, 4 per token, swiglu_limit 7, attention
  //                   biases and sinks: 20,914,757,184 (4,187,440,704 active; 3.61B without
  //                   the input embedding, OpenAI's count)
  //   gpt-oss-120b    openai/gpt-oss-120b: as 20b with 36 layers and 128 experts:
  //                   116,829,156,672 (5,711,982,912 active; 5.13B OpenAI's)
  //   qwen3.5-*       Qwen/Qwen3.5-*'s text_config (qwen3_5_text): vocab 248320, context
  //                   262144, head_dim 256, 3 Gated DeltaNet layers to 1 full, 16 linear key
  //                   heads, linear dims 128, conv 4, rope_theta 1e7, partial RoPE 0.25, mrope
  //                   11/11/10 interleaved; hidden / layers / heads / KV / intermediate /
  //                   linear value heads, the text model's count (no vision tower, no MTP):
  //     qwen3.5-0.8b  1024 / 24 / 8 / 2 / 3584 / 16, tied: 752,393,024
  //     qwen3.5-4b    2560 / 32 / 16 / 4 / 9216 / 32, tied: 4,205,751,296
  //     qwen3.5-9b    4096 / 32 / 16 / 4 / 12288 / 32: 8,953,803,264
  //     qwen3.5-27b   5120 / 64 / 24 / 4 / 17408 / 48: 26,895,998,464
  //     qwen3.5-35b-a3b  (qwen3_5_moe_text) 2048 / 40 / 16 / 2 / - / 32, 256 experts of 512,
  //                   8 per token, shared expert 512: 34,660,610,688 (3,454,988,928 active);
  //     qwen3.6-35b-a3b  Qwen/Qwen3.6-35B-A3B: the same text model
  //                   Where the shapes come from (fetched 2026-12-07; two sources each): the
  //                   Megatron model scripts of THUDM/slime and radixark/miles
  //                   (scripts/models/qwen3.5-{0.8B,4B,9B,27B,35B-A3B}.sh: hidden, layers,
  //                   heads, KV heads, intermediate, vocab, tying; qwen36-35B-A3B.sh: "the same
  //                   topology" as 3.5), and copies of the config.json text_config in public
  //                   code (0.8B: 16 / 16 linear heads; 4B: 16 / 32; 9B: 16 / 32; 27B: 16 / 48;
  //                   35B-A3B: 16 / 32 in the Megatron scripts). Qwen3.5-2B is left out: no
  //                   copy of its config.json was found.
  // Throws zt::InputError for an unknown name (the message lists the known ones).
  static Config preset(std::string_view name);

  // Upper bounds of the sizes (the same for `zt train`'s model.* keys and imported
  // config.json files; checked before anything is allocated).
  static constexpr int64_t kMaxHidden = 1 << 20;
  static constexpr int64_t kMaxLayers = 1 << 16;
  static constexpr int64_t kMaxHeads = 1 << 16;
  static constexpr int64_t kMaxIntermediate = 1 << 22;
  static constexpr int64_t kMaxContext = 1 << 24;
  static constexpr int64_t kMaxExperts = 1 << 12;
  // The GPU model's router holds a row's E probabilities in one warp (at most 32 each):
  // kernels::cuda::kMoeMaxExperts, static_asserted equal in src/model/cuda/device_moe.cpp.
  static constexpr int64_t kMaxDeviceExperts = 1 << 10;
  // The largest head dim of the GPU model's attention (the largest of
  // kernels::cuda::attention_head_dims; the GPU model refuses the others by name).
  static constexpr int64_t kMaxDeviceHeadDim = 256;
  // The GPU model's Gated DeltaNet kernels: key and value head dims up to
  // kMaxDeviceDeltaDim (Qwen3.5's: 128), conv kernels up to kMaxDeviceConvKernel (Qwen3.5's:
  // 4) (kernels::cuda::kDeltaMaxDim, kDeltaMaxConvK; static_asserted in device_linear.cpp).
  static constexpr int64_t kMaxDeviceDeltaDim = 128;
  static constexpr int64_t kMaxDeviceConvKernel = 8;
  static std::vector<std::string> preset_names();

  // Throws zt::InputError naming the first bad field ("model.hidden", "model.heads", ...)
  // with a hint: non-positive sizes, hidden % heads != 0, heads % kv_heads != 0,
  // odd head_dim (RoPE rotates pairs), rope_theta <= 0, norm_eps <= 0, sizes above the
  // bounds below, a rope_scaling of another type or with out-of-range factors.
  void validate() const;
  void validate_rope_scaling() const;  // the part of validate() for rope_scaling
  // The part for the attention schedule (layer_types, rope_local_theta) and Gemma's
  // scalars (query_pre_attn_scalar, the soft-caps).
  void validate_schedule() const;
  // The part for the experts: experts > 0 exactly for the MoE families, 1 <=
  // experts_per_token <= experts <= kMaxExperts, router_aux_loss_coef finite >= 0, the
  // Qwen MoE fields only where the family has them.
  void validate_experts() const;
  // Throws InputError naming the field when the GPU model cannot run the config: more
  // experts than its router takes (kMaxDeviceExperts; the CPU model takes kMaxExperts).
  // Every family runs on the GPU (Qwen's MoE blocks too: src/model/cuda/device_moe.cpp).
  // The engine's device space calls it before building a DeviceModel.
  // check_block = false: only the sizes (zt estimate reports device_model_gap() instead).
  void validate_for_device(bool check_block = true) const;
  // What the GPU model lacks to run this config ("" when it runs it): every family's block
  // runs (Qwen3.5's Gated DeltaNet layers too); a head dim above kMaxDeviceHeadDim (256,
  // Gemma 3 1b-12b's) has no CUDA attention kernel (the GPU model names the head dims
  // between that it lacks), a Gated DeltaNet head dim above kMaxDeviceDeltaDim or conv
  // kernel above kMaxDeviceConvKernel no Gated DeltaNet kernel.
  std::string device_model_gap() const;

  // The architecture pieces of the family (family table, config.cpp):
  //   family   q/k/v bias       o bias           q/k RMSNorm (per head, [D], before RoPE)
  //   llama    attention_bias   attention_bias   no
  //   qwen2    always           no               no
  //   qwen3    attention_bias   attention_bias   yes
  //   mixtral  no               no               no   (the MoE MLP: experts > 0)
  //   qwen2_moe attention_bias (HF qkv_bias) no     no   (MoE + shared expert, dense layers)
  //   qwen3_moe attention_bias   attention_bias   yes  (MoE, dense layers)
  static std::vector<std::string> family_names();
  bool qkv_bias() const;
  bool o_bias() const;
  bool qk_norm() const;
  bool output_gate() const;  // q_proj emits [query | gate] per head (Qwen3.5; family row)
  // Gemma's block (family row): the RMSNorm weight offset (1: (1 + w); 0: w), the sandwich
  // (post-attention and post-feed-forward norms), the tanh-GELU GeGLU MLP instead of
  // SwiGLU, the embeddings multiplied by sqrt(hidden).
  double norm_offset() const;
  bool sandwich_norms() const;
  bool gelu_mlp() const;
  bool embed_scale() const;
  bool attention_sinks() const;  // self_attn.sinks [H] per layer (family row)
  bool router_bias() const;      // mlp.router.bias [E]
  bool topk_softmax() const;     // the k weights: softmax over the k chosen logits
  bool expert_bias() const;      // the experts' biases [E, 2I], [E, C]
  // One expert's bias elements (2 I + C with expert_bias(), else 0).
  int64_t expert_bias_width() const { return expert_bias() ? 2 * expert_width() + hidden : 0; }
  bool moe() const { return experts > 0; }
  bool moe_layer(int64_t l) const;  // layer l's MLP is the experts (moe() and the rules above)
  int64_t moe_layer_count() const;
  bool dense_layers() const { return moe_layer_count() < layers; }  // some layer has the dense MLP
  int64_t expert_width() const { return moe_intermediate > 0 ? moe_intermediate : intermediate; }
  bool shared_expert() const { return shared_expert_intermediate > 0; }

  int64_t head_dim() const { return head_dim_ > 0 ? head_dim_ : hidden / heads; }  // D
  int64_t q_dim() const { return heads * head_dim(); }   // H*D (== hidden unless head_dim_ is set)
  int64_t q_proj_dim() const { return output_gate() ? 2 * q_dim() : q_dim(); }  // q_proj's rows
  // The rotated dims of a head (transformers' int(head_dim * partial_rotary_factor)).
  int64_t rotary_dim() const {
    return static_cast<int64_t>(static_cast<double>(head_dim()) * partial_rotary_factor);
  }
  int64_t kv_dim() const { return kv_heads * head_dim(); }

  // Parameter counts (elements). num_params() = every trainable element, counted once
  // (with tied embeddings the shared matrix counts once).
  int64_t num_params() const;
  int64_t num_embedding_params() const;  // vocab * hidden (the input embedding table)
  int64_t num_block_params(int64_t l) const;  // transformer block l
  // The parameters one token uses: num_params() less the (E - k) experts of every block
  // it is not routed to (== num_params() without experts).
  int64_t num_active_params() const;
  // The N of the FLOP formula: num_params() minus the input-embedding table when the
  // embeddings are untied (a lookup does no matmul). With tied embeddings the shared
  // matrix is the LM head's matmul weight, so it stays in. Norm weights (a few
  // thousand elements) are included; they change N by < 0.01%. With experts, only the k
  // experts a token is routed to count (the active parameters: MFU from active FLOPs).
  int64_t num_matmul_params() const;

  // Training FLOPs per token, PaLM convention (Chowdhery et al. 2022, appendix B):
  //   6 * N + 12 * L * H * Q * T
  // N = num_matmul_params(): the non-embedding parameters (all parameters except the
  // input-embedding lookup table; the LM head counts), as the formula is usually applied
  // (e.g. torchtitan subtracts the nn.Embedding table from the parameter count), L layers, H heads, Q head_dim,
  // T = seq (the attention term counts the full T x T score matrix, not the causal half).
  // 6N = 2N forward + 4N backward. Norms/elementwise work is not counted. A Gated DeltaNet
  // layer (Qwen3.5's linear_attention) has no T x T term: it counts its chunked rule and
  // conv instead, constant in T (config.cpp).
  double flops_per_token(int64_t seq) const;
};

}  // namespace zt::model
