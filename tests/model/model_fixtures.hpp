#pragma once
// Shared set-up for the model tests (test helper): small configs, token batches, and
// parameters in "general position" (norm weights perturbed away from 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/model.hpp"

#include "../kernels/gradcheck.hpp"

namespace zt::testing {

// max |a - b| over max(max |b|, 1): logits compared across orders of summation.
template <class R>
double max_rel_diff(const std::vector<R>& a, const std::vector<R>& b) {
  double d = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return d / std::max(scale, 1.0);
}

// Same shape family as `tiny` (GQA, SwiGLU, untied head), small enough to check every
// coordinate by finite differences: 1,256 parameters.
inline model::Config small_config(bool tied = false) {
  return {.name = "small-test", .vocab = 16, .hidden = 8, .layers = 2, .heads = 2, .kv_heads = 1,
          .intermediate = 12, .context = 8, .tied_embeddings = tied};
}

// The small config as Qwen2 (q/k/v biases) and as Qwen3 (q/k norms, head_dim 6 with
// hidden / heads = 4, and attention_bias: q/k/v and o biases).
// The small config as Gemma 3 (gemma3_text): (1 + w) sandwich norms, GeGLU, scaled
// embeddings, q/k norms, head_dim 6, a sliding layer (window 2, its own RoPE base) then a
// full one (linear-scaled RoPE), query_pre_attn_scalar 5, the final soft-cap 1.5.
inline model::Config small_gemma(bool tied = false) {
  model::Config c = small_config(tied);
  c.family = "gemma3_text";
  c.head_dim_ = 6;
  c.layer_types = "sf";
  c.sliding_window = 2;
  c.rope_local_theta = 100.0;
  c.rope_scaling = {.type = "linear", .factor = 2.0};
  c.query_pre_attn_scalar = 5.0;
  c.final_logit_softcap = 1.5;
  return c;
}
// The small config as Qwen3.5's full-attention layers (qwen3_5_text): the output gate
// (q_proj [H 2D, C]), (1 + w) norms and q/k norms, head_dim 8 with partial RoPE 0.5 (4 of
// 8 dims rotate), attention biases.
inline model::Config small_qwen35(bool tied = false) {
  model::Config c = small_config(tied);
  c.family = "qwen3_5_text";
  c.head_dim_ = 8;
  c.partial_rotary_factor = 0.5;
  c.attention_bias = true;
  c.layer_types = "ff";
  return c;
}
// `c` with layer 0 a Gated DeltaNet layer (key heads of key_dim, value heads of value_dim,
// the conv's kernel), layer 1 full attention.
inline model::Config as_hybrid(model::Config c, int64_t key_heads, int64_t key_dim,
                               int64_t value_heads, int64_t value_dim, int64_t kernel) {
  c.layer_types = "lf";
  std::tie(c.linear_key_heads, c.linear_key_dim) = std::pair(key_heads, key_dim);
  std::tie(c.linear_value_heads, c.linear_value_dim) = std::pair(value_heads, value_dim);
  c.linear_conv_kernel = kernel;
  return c;
}
// small_qwen35 as a hybrid: layer 0 a Gated DeltaNet layer (1 key head of 4, 2 value heads
// of 3, conv kernel 3), layer 1 full attention.
inline model::Config small_qwen35_hybrid(bool tied = false) {
  return as_hybrid(small_qwen35(tied), 1, 4, 2, 3, 3);
}
// The small config as gpt-oss: attention biases and sinks, a sliding layer (window 2)
// then a full one, yarn RoPE (factor 4 over an original context of 3), the router with its
// bias (top 2 of 4, softmax over the chosen logits), the experts (width 6) with biases and
// the clamped SwiGLU (limit 0.7: some gate and up values clamp).
inline model::Config small_gpt_oss(bool tied = false) {
  model::Config c = small_config(tied);
  c.family = "gpt_oss";
  c.attention_bias = true;
  c.layer_types = "sf";
  c.sliding_window = 2;
  c.rope_scaling = {.type = "yarn", .factor = 4.0, .original_context = 3, .truncate = false};
  c.intermediate = 6;
  c.experts = 4;
  c.experts_per_token = 2;
  c.swiglu_limit = 1.2;
  return c;
}
inline model::Config small_qwen2(bool tied = false) {
  model::Config c = small_config(tied);
  c.family = "qwen2";
  return c;
}
inline model::Config small_qwen3(bool tied = false) {
  model::Config c = small_config(tied);
  c.family = "qwen3";
  c.head_dim_ = 6;
  c.attention_bias = true;
  return c;
}

// `c` as a Mixtral: experts of width `inter`, k per token, the load-balancing loss in the
// loss (router_aux_loss) with coefficient `coef` when `aux`.
inline model::Config as_mixtral(model::Config c, int64_t experts, int64_t k, int64_t inter,
                                bool aux, double coef) {
  c.family = "mixtral";
  c.intermediate = inter;
  c.experts = experts;
  c.experts_per_token = k;
  c.router_aux_loss = aux;
  c.router_aux_loss_coef = coef;
  return c;
}

// The small config as a Mixtral: 4 experts of width 6 per block, 2 per token; the
// load-balancing loss in the loss with a large coefficient (0.3) so its gradient shows.
inline model::Config small_mixtral(bool tied = false, bool aux = true) {
  return as_mixtral(small_config(tied), 4, 2, 6, aux, 0.3);
}

// `c` as one of Qwen's MoE families, 3 layers: 4 experts of width `width` (the dense MLP
// keeps c.intermediate), 2 per token, not renormalised (norm_topk_prob false), the shared
// expert of width `shared` (qwen2_moe; 0: none), the layers in `dense` dense
// (mlp_only_layers); the aux loss at 0.3 when `aux`.
inline model::Config as_qwen_moe(model::Config c, const char* family, bool aux, int64_t width,
                                 int64_t shared, std::vector<int64_t> dense) {
  c = as_mixtral(c, 4, 2, c.intermediate, aux, 0.3);
  c.family = family;
  c.layers = 3;
  c.moe_intermediate = width;
  c.shared_expert_intermediate = shared;
  c.norm_topk_prob = false;
  c.mlp_only_layers = std::move(dense);
  return c;
}
// The small config so: qwen3_moe (Qwen3's q/k norms, head_dim 6, attention_bias; experts
// of width 5, layer 1 dense) and qwen2_moe (q/k/v biases, experts of width 5, the shared
// expert of width 7 and its gate, layer 0 dense).
inline model::Config small_qwen3_moe(bool tied = false, bool aux = true) {
  return as_qwen_moe(small_qwen3(tied), "qwen3_moe", aux, 5, 0, {1});
}
inline model::Config small_qwen2_moe(bool tied = false, bool aux = true) {
  model::Config c = as_qwen_moe(small_config(tied), "qwen2_moe", aux, 5, 7, {0});
  c.attention_bias = true;  // HF's qkv_bias
  return c;
}
// small_qwen35_hybrid as qwen3_5_moe_text (layers l, f): 4 experts of width 5, top 2
// renormalised, the shared expert of width 7 and its gate in both layers; the aux loss.
inline model::Config small_qwen35_moe(bool tied = false) {
  model::Config c = small_qwen35_hybrid(tied);
  c = as_qwen_moe(c, "qwen3_5_moe_text", true, 5, 7, {});
  c.layers = 2;
  c.intermediate = 5;
  c.norm_topk_prob = true;
  return c;
}

// cfg.validate() throws zt::InputError whose message names `field`.
inline void expect_invalid(const model::Config& cfg, const std::string& field) {
  try {
    cfg.validate();
    ADD_FAILURE() << "no error for bad " << field;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
}

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& t : v) t = d(rng);
  return v;
}

// Norm weights (initialised to ones) set to 1 + N(0, sd) and biases (initialised to
// zeros) to zeros_scale x N(0, sd), so they carry signal in a comparison.
template <class R>
void draw_off_init(model::Parameters<R>& P, const model::ParamLayout& layout,
                   std::mt19937_64& rng, double sd, double zeros_scale) {
  std::normal_distribution<double> d(0.0, sd);
  for (const auto& t : layout.tensors()) {
    if (t.init != model::InitKind::kOnes && t.init != model::InitKind::kZeros) continue;
    auto p = P.params(t.unit);
    const bool ones = t.init == model::InitKind::kOnes;
    for (int64_t i = 0; i < t.numel; ++i)
      p[static_cast<size_t>(t.offset + i)] =
          static_cast<R>(ones ? 1.0 + d(rng) : zeros_scale * d(rng));
  }
}

// Deterministic init with the given std, then norm weights set to 1 + 0.1 * N(0, 1) and
// biases (zero-initialised) to 0.1 * std * N(0, 1) (draw_off_init).
template <class R>
void init_general(model::Parameters<R>& P, const model::ParamLayout& layout, double std,
                  uint64_t seed) {
  model::InitOptions opt;
  opt.seed = seed;
  opt.std = std;
  P.init(opt);
  std::mt19937_64 rng(seed + 1);
  draw_off_init(P, layout, rng, 0.1, std);
}

// Every coordinate of P's model: its gradient (P.grads, after loss_and_grad) against
// five-point central differences of f() (gradcheck.hpp) with step h; the error figures.
template <class F>
ErrStats every_coordinate(const model::ParamLayout& layout, model::Parameters<double>& P, F&& f, double h,
                          double floor) {
  ErrStats all;
  for (const auto& t : layout.tensors()) {
    auto p = P.params(t.unit);
    auto g = P.grads(t.unit);
    for (int64_t i = 0; i < t.numel; ++i) {
      const size_t at = static_cast<size_t>(t.offset + i);
      all.add(g[at], central_diff5(f, &p[at], h), floor);
    }
  }
  return all;
}

// Resolves the lora.* keys set by `sets` against `model`; returns the InputError's text and
// hint, "what | hint" ("" when none was thrown).
inline std::string resolve_error(const std::vector<std::string>& sets, const model::Config& model) {
  config::Schema s;
  model::add_finetune_keys(s);
  try {
    model::resolve_lora(config::load(s, "", sets), model);
  } catch (const InputError& e) {
    return std::string(e.what()) + " | " + e.hint();
  }
  return "";
}

// LoRA on the eight projections with the given rank and dropout, alpha 3.
inline model::LoraConfig lora_all(int64_t rank, double dropout) {
  model::LoraConfig l;
  l.method = model::FinetuneMethod::kLora;
  l.rank = rank;
  l.alpha = 3.0;
  l.dropout = dropout;
  l.targets = model::kProjectionTargets;
  return l;
}

// The parameter spans of each unit of P (a QloraBase's units).
inline std::vector<std::span<const float>> unit_spans(const model::Parameters<float>& P) {
  std::vector<std::span<const float>> units;  // [units]
  for (int u = 0; u < P.num_units(); ++u) units.push_back(P.params(u));
  return units;
}

// Recompute gives the same loss and gradients bit for bit (fp32, B 2 x T 8, grad scale
// 0.5, weights at std 0.3); `check` then sees the model without recompute (its router
// statistics).
template <class Check>
void expect_recompute_bitwise(const model::Config& cfg, Check check) {
  model::ParamLayout layout(cfg);
  model::Parameters<float> a(layout), b(layout);
  a.init({.seed = 9, .std = 0.3});
  b.init({.seed = 9, .std = 0.3});
  model::Model<float> ma(cfg), mb(cfg);
  a.bind(ma);
  b.bind(mb);
  a.zero_grads();
  b.zero_grads();
  const auto tok = random_tokens(16, cfg.vocab, 6);
  const auto tgt = random_tokens(16, cfg.vocab, 7);
  const double la = ma.loss_and_grad(tok, tgt, 2, 8, false, 0.5);
  const double lb = mb.loss_and_grad(tok, tgt, 2, 8, true, 0.5);
  EXPECT_EQ(la, lb) << cfg.family;
  for (int u = 0; u < a.num_units(); ++u)
    for (size_t i = 0; i < a.grads(u).size(); ++i)
      ASSERT_EQ(a.grads(u)[i], b.grads(u)[i]) << cfg.family << " unit " << u << " " << i;
  check(ma);
}

}  // namespace zt::testing
