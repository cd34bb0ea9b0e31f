#pragma once
// A naive double-precision Llama forward (test helper), built from the plain-loop
// references in tests/kernels/reference.hpp and looking every weight up BY NAME
// (ParamLayout::find), so it shares neither the kernels nor the offset wiring of
// src/model. Used as the independent reference for Model's loss and logits.
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../kernels/reference.hpp"
#include "zt/core/log.hpp"
#include "zt/model/layout.hpp"

namespace zt::testing {

class NaiveLlama {
 public:
  NaiveLlama(const model::ParamLayout& layout, const std::vector<std::vector<double>>& units)
      : L_(layout), u_(units) {}

  // logits [B*T, V]
  std::vector<double> logits(std::span<const int32_t> tokens, int64_t B, int64_t T) const {
    const auto& c = L_.config();
    const int64_t N = B * T, C = c.hidden, D = c.head_dim();
    std::vector<double> x(static_cast<size_t>(N * C));
    const double* E = w("model.embed_tokens.weight");
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < C; ++j) x[n * C + j] = E[tokens[n] * C + j];
    for (int l = 0; l < c.layers; ++l) {
      const std::string p = strf("model.layers.%d.", l);
      auto xn = ref::rmsnorm(x, w(p + "input_layernorm.weight"), N, C, c.norm_eps);
      auto q = ref::linear(xn, w(p + "self_attn.q_proj.weight"), N, C, c.heads * D);
      auto k = ref::linear(xn, w(p + "self_attn.k_proj.weight"), N, C, c.kv_heads * D);
      auto v = ref::linear(xn, w(p + "self_attn.v_proj.weight"), N, C, c.kv_heads * D);
      add_bias(q, p + "self_attn.q_proj.bias");  // when the layout has them (by name)
      add_bias(k, p + "self_attn.k_proj.bias");
      add_bias(v, p + "self_attn.v_proj.bias");
      if (L_.try_find(p + "self_attn.q_norm.weight")) {  // Qwen3: per head, before RoPE
        q = ref::rmsnorm(q, w(p + "self_attn.q_norm.weight"), N * c.heads, D, c.norm_eps);
        k = ref::rmsnorm(k, w(p + "self_attn.k_norm.weight"), N * c.kv_heads, D, c.norm_eps);
      }
      q = ref::rope(q, B, T, c.heads, D, c.rope_theta);
      k = ref::rope(k, B, T, c.kv_heads, D, c.rope_theta);
      auto att = ref::attention(q, k, v, B, T, c.heads, c.kv_heads, D);
      auto ao = ref::linear(att, w(p + "self_attn.o_proj.weight"), N, c.heads * D, C);
      add_bias(ao, p + "self_attn.o_proj.bias");
      for (size_t i = 0; i < x.size(); ++i) x[i] += ao[i];
      auto xn2 = ref::rmsnorm(x, w(p + "post_attention_layernorm.weight"), N, C, c.norm_eps);
      auto g = ref::linear(xn2, w(p + "mlp.gate_proj.weight"), N, C, c.intermediate);
      auto u = ref::linear(xn2, w(p + "mlp.up_proj.weight"), N, C, c.intermediate);
      auto mo = ref::linear(ref::swiglu(g, u), w(p + "mlp.down_proj.weight"), N, c.intermediate, C);
      for (size_t i = 0; i < x.size(); ++i) x[i] += mo[i];
    }
    auto xf = ref::rmsnorm(x, w("model.norm.weight"), N, C, c.norm_eps);
    const double* head = c.tied_embeddings ? E : w("lm_head.weight");
    return ref::linear(xf, head, N, C, c.vocab);
  }

  double loss(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
              int64_t T) const {
    const auto lg = logits(tokens, B, T);
    std::vector<int32_t> tg(targets.begin(), targets.end());
    int64_t count = 0;
    for (int32_t t : tg) count += t >= 0;
    return ref::cross_entropy_sum(lg, tg, B * T, L_.config().vocab) / static_cast<double>(count);
  }

 private:
  // y [N, n] += b [n] when the layout has a tensor named `name`.
  void add_bias(std::vector<double>& y, const std::string& name) const {
    const model::TensorInfo* t = L_.try_find(name);
    if (!t) return;
    const double* b = w(name);
    for (size_t i = 0; i < y.size(); ++i) y[i] += b[i % static_cast<size_t>(t->numel)];
  }
  const double* w(const std::string& name) const {
    const auto& t = L_.find(name);
    return u_[static_cast<size_t>(t.unit)].data() + t.offset;
  }
  const model::ParamLayout& L_;
  const std::vector<std::vector<double>>& u_;
};

}  // namespace zt::testing
