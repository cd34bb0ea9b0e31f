#pragma once
// Models for the GPU model tests (test helper): the model families at tiny widths. Their
// parameters' norm weights and biases are drawn off their init (ones, zeros) by
// model_fixtures.hpp's draw_off_init, so the families' pieces (docs/model.md) carry signal; tiny
// Mixtral, Qwen2-MoE, Qwen3-MoE, gpt-oss and Qwen3.5 configs.
#include <string>

#include "model/model_fixtures.hpp"
#include "zt/model/config.hpp"
#include "zt/model/family.hpp"

namespace zt::kernels::cuda::testing {

using zt::testing::draw_off_init;

// Tiny widths (hidden 64, 4 heads of 16, 2 kv heads, 2 layers, vocab 256) as a model
// family (docs/model.md); head_dim 0: hidden / heads.
inline model::Config tiny_family(const std::string& family, int64_t head_dim,
                                 bool attention_bias) {
  model::Config c = model::Config::preset("tiny");
  c.name = "tiny " + family;
  c.family = family;
  c.hidden = 64;
  c.layers = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.intermediate = 128;
  c.context = 64;
  c.head_dim_ = head_dim;
  c.attention_bias = attention_bias;
  return c;
}

// tiny_family("mixtral") with E experts, k per token and the load-balancing loss in the
// loss (router_aux_loss, coef 0.02: Mixtral 8x7B's), as the CPU model's Mixtral tests.
inline model::Config tiny_mixtral(int64_t experts, int64_t per_token) {
  model::Config c = tiny_family("mixtral", 0, false);
  c.experts = experts;
  c.experts_per_token = per_token;
  c.router_aux_loss = true;
  c.router_aux_loss_coef = 0.02;
  return c;
}

// Qwen's MoE families at the tiny widths (docs/model.md, "Qwen2-MoE and Qwen3-MoE"), E
// experts k per token, the experts 48 wide (moe_intermediate != intermediate 128), the
// top-k not renormalised (norm_topk_prob false, Qwen's default), the load-balancing loss in
// the loss, one dense layer among the MoE ones (mlp_only_layers {dense_layer}):
//   qwen3_moe: q/k norms, head_dim 32, attention_bias
//   qwen2_moe: q/k/v biases and the shared expert (40 wide) with its sigmoid gate
inline model::Config tiny_qwen_moe(const std::string& family, int64_t experts, int64_t per_token,
                                   int64_t dense_layer) {
  const bool q3 = !model::family(family).shared_expert;  // qwen3_moe (qwen2_moe has the shared expert)
  model::Config c = tiny_family(family, q3 ? 32 : 0, true);
  c.experts = experts;
  c.experts_per_token = per_token;
  c.moe_intermediate = 48;
  c.norm_topk_prob = false;
  c.mlp_only_layers = {dense_layer};
  if (!q3) c.shared_expert_intermediate = 40;
  c.router_aux_loss = true;
  c.router_aux_loss_coef = 0.02;
  return c;
}

// gpt_oss at the tiny widths: q/k/v/o biases, sinks, layers s f (window 5), yarn (factor 4
// over 16), the router's bias and the softmax over the top k of E logits, the experts 32
// wide with biases and the clamped SwiGLU (limit 0.4: with the biases drawn off their init,
// draw_off_init with sd 0.1 and zeros_scale 3, gate and up values clamp).
inline model::Config tiny_gpt_oss(int64_t experts, int64_t per_token) {
  model::Config c = tiny_family("gpt_oss", 0, true);
  c.layer_types = "sf";
  c.sliding_window = 5;
  c.rope_theta = 150000.0;
  c.rope_scaling = {.type = "yarn", .factor = 4.0, .original_context = 16, .truncate = false};
  c.intermediate = 32;
  c.experts = experts;
  c.experts_per_token = per_token;
  c.swiglu_limit = 0.4;
  return c;
}

// qwen3_5_text at the tiny widths (4 heads of 16), layers l l l f: three Gated DeltaNet
// layers (2 key heads and 4 value heads of 16, conv kernel 4), then full attention with
// the output gate, q/k norms and partial RoPE 0.25 (4 of 16 dims rotate); context 256.
inline model::Config tiny_qwen35(bool tied) {
  model::Config c = zt::testing::as_hybrid(tiny_family("qwen3_5_text", 16, false), 2, 16, 4, 16, 4);
  c.layers = 4;
  c.layer_types = "lllf";
  c.context = 256;
  c.partial_rotary_factor = 0.25;
  c.tied_embeddings = tied;
  return c;
}

// tiny_qwen35 as qwen3_5_moe_text: E experts of width 48, k per token renormalised, the
// shared expert (40 wide) and its sigmoid gate in every layer, the aux loss in the loss.
inline model::Config tiny_qwen35_moe(int64_t experts, int64_t per_token) {
  model::Config c = tiny_qwen35(false);
  c.family = "qwen3_5_moe_text";
  c.experts = experts;
  c.experts_per_token = per_token;
  c.intermediate = c.moe_intermediate = 48;  // (the family has no dense MLP: equal widths)
  c.shared_expert_intermediate = 40;
  c.norm_topk_prob = true;
  c.router_aux_loss = true;
  c.router_aux_loss_coef = 0.02;
  return c;
}

}  // namespace zt::kernels::cuda::testing
