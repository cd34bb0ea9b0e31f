// The mixtral family in the model: the preset's published counts, validation of the MoE
// families' keys (mixtral's, qwen2_moe's and qwen3_moe's, one table), the aux loss joining
// the loss as transformers' MixtralForCausalLM adds it (router_aux_loss_coef x
// load_balancing_loss_func, only with output_router_logits), the router statistics,
// recompute bit for bit, and training on the CPU. (Finite differences:
// ModelGradcheck.MixtralEveryCoordinate; against transformers: ckpt.hf.peer_transformers_mixtral.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>

#include "zt/core/error.hpp"
#include "zt/kernels/moe.hpp"
#include "zt/model/optimizer.hpp"
#include "model_fixtures.hpp"

namespace zt::model {
namespace {

TEST(Mixtral, PresetPublishedCounts) {
  const Config c = Config::preset("mixtral-8x7b");
  EXPECT_EQ(c.family, "mixtral");
  EXPECT_EQ(c.num_params(), 46'702'792'704);         // "46.7B"
  EXPECT_EQ(c.num_active_params(), 12'879'925'248);  // "12.9B" active per token
  EXPECT_EQ(ParamLayout(Config::preset("tiny")).config().num_active_params(),
            Config::preset("tiny").num_params());
  // FLOPs from the active parameters: 6 (N_active - embedding) + attention.
  const double want = 6.0 * static_cast<double>(c.num_active_params() - c.vocab * c.hidden) +
                      12.0 * 32 * 32 * 128 * 4096;
  EXPECT_DOUBLE_EQ(c.flops_per_token(4096), want);
}

using testing::expect_invalid;

// The MoE families' keys (mixtral, qwen2_moe, qwen3_moe) in one table: a valid config, one
// change, and the text Config::validate's refusal must name.
TEST(MoeKeys, Validated) {
  const Config mixtral = testing::small_mixtral(), q2 = testing::small_qwen2_moe(),
               q3 = testing::small_qwen3_moe(), dense = testing::small_config();
  for (const Config& c : {mixtral, q2, q3}) EXPECT_NO_THROW(c.validate()) << c.family;
  struct Case {
    const Config& base;
    std::function<void(Config&)> change;
    const char* names;
  };
  const Case cases[] = {
      {mixtral, [](Config& c) { c.experts = 0; }, "model.experts"},
      {mixtral, [](Config& c) { c.experts = Config::kMaxExperts + 1; }, "model.experts"},
      {dense, [](Config& c) { c.experts = 4; }, "model.experts"},  // llama has no experts
      {mixtral, [](Config& c) { c.experts_per_token = 5; }, "model.experts_per_token"},
      {mixtral, [](Config& c) { c.experts_per_token = 0; }, "model.experts_per_token"},
      {mixtral, [](Config& c) { c.router_aux_loss_coef = -1; }, "model.router_aux_loss_coef"},
      {mixtral, [](Config& c) { c.attention_bias = true; }, "model.attention_bias"},
      // Qwen's keys are refused for Mixtral, by name
      {mixtral, [](Config& c) { c.norm_topk_prob = false; }, "model.norm_topk_prob"},
      {mixtral, [](Config& c) { c.moe_intermediate = 4; }, "model.moe_intermediate"},
      {mixtral, [](Config& c) { c.mlp_only_layers = {0}; }, "model.mlp_only_layers"},
      // qwen2_moe always has a shared expert, qwen3_moe none
      {q2, [](Config& c) { c.shared_expert_intermediate = 0; }, "model.shared_expert_intermediate"},
      {q3, [](Config& c) { c.shared_expert_intermediate = 4; }, "model.shared_expert_intermediate"},
      {q3, [](Config& c) { c.mlp_only_layers = {3}; }, "model.mlp_only_layers"},
      {q3, [](Config& c) { c.mlp_only_layers = {0, 1, 2}; }, "no layer"},  // no MoE layer left
      {q3, [](Config& c) { c.decoder_sparse_step = 0; }, "model.decoder_sparse_step"},
  };
  for (const Case& k : cases) {
    Config c = k.base;
    k.change(c);
    SCOPED_TRACE(c.family + ": " + k.names);
    expect_invalid(c, k.names);
  }
}

struct Bound {
  Config cfg;
  ParamLayout layout;
  Parameters<double> P;
  Model<double> m;
  explicit Bound(const Config& c) : cfg(c), layout(c), P(layout), m(c) {
    testing::init_general(P, layout, 0.3, 3);
    P.bind(m);
  }
};

// loss = cross-entropy + coef x aux with router_aux_loss (transformers' output_router_logits),
// the cross-entropy alone without; aux as load_balancing_loss_func from the statistics.
TEST(Mixtral, AuxLossJoinsTheLossAsTransformers) {
  const int64_t B = 2, T = 7;
  const auto tok = testing::random_tokens(B * T, 16, 4);
  const auto tgt = testing::random_tokens(B * T, 16, 5);
  Bound off(testing::small_mixtral(false, false));
  Bound on(testing::small_mixtral(false, true));
  const double ce = off.m.loss(tok, tgt, B, T);
  const double with = on.m.loss(tok, tgt, B, T);
  const RouterStats& r = on.m.router_stats();
  ASSERT_EQ(r.tokens.size(), 4u);
  EXPECT_EQ(r.rows, static_cast<double>(B * T * 2));  // rows x layers
  EXPECT_EQ(std::accumulate(r.tokens.begin(), r.tokens.end(), 0.0), r.rows * 2);  // k each
  EXPECT_NEAR(with, ce + 0.3 * r.aux, 1e-14);
  EXPECT_GT(r.aux, 1.0 - 1e-12);  // E sum T_e P_e / R^2 >= 1 for k = 2 (1 when balanced)
  EXPECT_GE(r.imbalance(), 1.0);
  // loss_and_grad returns the same value, and off's stats say the same routing
  on.P.zero_grads();
  EXPECT_NEAR(on.m.loss_and_grad(tok, tgt, B, T), with, 1e-14);
  EXPECT_EQ(off.m.router_stats().tokens, r.tokens);
  std::printf("[mixtral] ce %.9f  aux %.9f  loss %.9f  tokens/expert %g %g %g %g  imbalance %.3f\n",
              ce, r.aux, with, r.tokens[0], r.tokens[1], r.tokens[2], r.tokens[3], r.imbalance());
}

// Recompute: the same loss and gradients bit for bit (fp32), aux loss on.
TEST(Mixtral, RecomputeBitwise) {
  testing::expect_recompute_bitwise(testing::small_mixtral(), [](const Model<float>&) {});
}

// A tiny Mixtral learns on the CPU: AdamW steps on a fixed batch cut the loss.
TEST(Mixtral, Trains) {
  const Config cfg = testing::as_mixtral(Config::preset("tiny"), 4, 2, 128, true, 0.02);
  ParamLayout layout(cfg);
  Parameters<float> P(layout);
  P.init({.seed = 1});
  Model<float> m(cfg);
  P.bind(m);
  const auto tok = testing::random_tokens(4 * 32, cfg.vocab, 1);
  std::vector<int32_t> tgt(tok.begin() + 1, tok.end());
  tgt.push_back(0);
  AdamWConfig opt;
  opt.lr = 3e-3;
  std::vector<std::vector<float>> mo, vo;
  for (int u = 0; u < layout.num_units(); ++u) {
    mo.emplace_back(P.params(u).size(), 0.f);
    vo.emplace_back(P.params(u).size(), 0.f);
  }
  double first = 0, last = 0;
  for (int step = 1; step <= 15; ++step) {
    P.zero_grads();
    last = m.loss_and_grad(tok, tgt, 4, 32);
    if (step == 1) first = last;
    for (int u = 0; u < layout.num_units(); ++u)
      adamw_unit_slice<float>(layout, u, 0, P.params(u), P.grads(u), mo[static_cast<size_t>(u)],
                              vo[static_cast<size_t>(u)], opt, step);
  }
  std::printf("[mixtral training] 15 AdamW steps: loss %.4f -> %.4f, imbalance %.3f\n", first, last,
              m.router_stats().imbalance());
  EXPECT_LT(last, 0.7 * first);
}

}  // namespace
}  // namespace zt::model
