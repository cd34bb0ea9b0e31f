#pragma once
// Models and parameters for the GPU model tests (test helper): the model families at tiny
// widths, and parameters whose norm weights and biases are drawn off their init (ones,
// zeros) so the families' pieces (docs/model.md) carry signal in a comparison; tiny
// Mixtral configs.
#include <random>
#include <string>

#include "zt/model/config.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/model.hpp"

namespace zt::kernels::cuda::testing {

// After init: tensors initialised to ones drawn 1 + N(0, 0.1), to zeros N(0, 0.3).
inline void draw_off_init(model::Parameters<float>& P, const model::ParamLayout& layout,
                          std::mt19937_64& rng) {
  for (const auto& t : layout.tensors()) {
    if (t.init != model::InitKind::kOnes && t.init != model::InitKind::kZeros) continue;
    const bool ones = t.init == model::InitKind::kOnes;
    std::normal_distribution<double> d(ones ? 1.0 : 0.0, ones ? 0.1 : 0.3);
    auto p = P.params(t.unit);
    for (int64_t i = 0; i < t.numel; ++i)
      p[static_cast<size_t>(t.offset + i)] = static_cast<float>(d(rng));
  }
}

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

}  // namespace zt::kernels::cuda::testing
