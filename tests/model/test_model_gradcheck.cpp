// Finite-difference gradient checks of the whole model, in double precision.
//  - small config (same family as tiny, 1,256 parameters), untied and tied: EVERY
//    coordinate;
//  - the real `tiny` preset on a short sequence (B 1, T 6): 6 random coordinates of
//    every tensor (234 coordinates).
// Five-point central differences with h = 1e-3 on the mean loss; relative error
// |a - b| / max(|a|, |b|, 1e-6); bound 1e-6. Weights are drawn with a larger std than
// training uses (0.3 small, 0.1 tiny) and norm weights are perturbed, so that gradients
// are O(1e-3..1) and every path carries signal; a few targets are ignored (-1).
// Packed instruction data: per-token positions restarting at example boundaries (RoPE
// and attention reset) with most targets masked, every coordinate of the small config;
// and the packed loss and gradient equal those of each example run alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "zt/core/error.hpp"

#include "../kernels/gradcheck.hpp"
#include "model_fixtures.hpp"

namespace zt::model {
namespace {

constexpr double kH = 1e-3;
constexpr double kFloor = 1e-6;
constexpr double kTol = 1e-6;

// positions: empty, or [B, T] (packed examples); masked: targets set to -1 (empty: two).
void gradcheck(const Config& cfg, int64_t B, int64_t T, double std, int per_tensor,
               bool recompute, const std::string& tag, const std::vector<int32_t>& positions = {},
               const std::vector<int>& masked = {}, double h = kH) {
  ParamLayout layout(cfg);
  Parameters<double> P(layout);
  testing::init_general(P, layout, std, 7);
  Model<double> m(cfg);
  P.bind(m);
  auto tok = testing::random_tokens(B * T, cfg.vocab, 8);
  auto tgt = testing::random_tokens(B * T, cfg.vocab, 9);
  if (masked.empty()) {
    tgt[0] = -1;
    if (B * T > 3) tgt[3] = -1;
  }
  for (const int i : masked) tgt[static_cast<size_t>(i)] = -1;
  P.zero_grads();
  m.loss_and_grad(tok, tgt, B, T, recompute, 1.0, positions);
  // Mixture of experts: the loss is piecewise smooth, with a jump wherever a row's top-k
  // changes; a coordinate whose stencil crosses one (the routing's counts change) is not
  // differentiable there and is left out, counted (at most 1% of them).
  const std::vector<double> routing = m.router_stats().tokens;
  bool crossed = false;
  auto f = [&] {
    const double l = m.loss(tok, tgt, B, T, positions);
    crossed = crossed || m.router_stats().tokens != routing;
    return l;
  };
  int64_t checked = 0, left_out = 0;

  std::mt19937_64 rng(11);
  testing::ErrStats all;
  for (const auto& t : layout.tensors()) {
    std::vector<int64_t> idx;
    if (per_tensor <= 0 || per_tensor >= t.numel) {
      for (int64_t i = 0; i < t.numel; ++i) idx.push_back(i);
    } else {
      std::uniform_int_distribution<int64_t> d(0, t.numel - 1);
      for (int i = 0; i < per_tensor; ++i) idx.push_back(d(rng));
    }
    testing::ErrStats s;
    auto p = P.params(t.unit);
    auto g = P.grads(t.unit);
    for (int64_t i : idx) {
      const size_t at = static_cast<size_t>(t.offset + i);
      crossed = false;
      const double numeric = testing::central_diff5(f, &p[at], h);
      ++checked;
      if (crossed) {
        ++left_out;
        continue;
      }
      s.add(g[at], numeric, kFloor);
      all.add(g[at], numeric, kFloor);
    }
    EXPECT_LT(s.max_rel, kTol) << tag << " " << t.name << " max abs err " << s.max_abs;
  }
  all.print(tag);
  EXPECT_LT(all.max_rel, kTol);
  if (left_out > 0)
    std::printf("[gradcheck] %s: %lld of %lld coordinates left out (the routing changes within "
                "+-2h)\n", tag.c_str(), static_cast<long long>(left_out),
                static_cast<long long>(checked));
  EXPECT_LE(100 * left_out, checked) << tag;
}

TEST(ModelGradcheck, SmallEveryCoordinate) {
  gradcheck(testing::small_config(), 2, 5, 0.3, 0, false, "model small (all coords)");
}
TEST(ModelGradcheck, SmallTiedEveryCoordinate) {
  gradcheck(testing::small_config(true), 2, 5, 0.3, 0, false, "model small tied (all coords)");
}
TEST(ModelGradcheck, SmallRecomputeEveryCoordinate) {
  gradcheck(testing::small_config(), 2, 5, 0.3, 0, true, "model small recompute (all coords)");
}
// The family pieces: Qwen2's q/k/v biases (untied, and tied with recompute); Qwen3's
// per-head q/k norms, head_dim 6 != hidden / heads 4 and attention_bias (q/k/v/o biases).
TEST(ModelGradcheck, Qwen2BiasesEveryCoordinate) {
  gradcheck(testing::small_qwen2(), 2, 5, 0.3, 0, false, "model small qwen2 (all coords)");
  gradcheck(testing::small_qwen2(true), 2, 5, 0.3, 0, true,
            "model small qwen2 tied recompute (all coords)");
}
TEST(ModelGradcheck, Qwen3QkNormEveryCoordinate) {
  gradcheck(testing::small_qwen3(), 2, 5, 0.3, 0, false, "model small qwen3 (all coords)");
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 2, 0, /**/ 0, 1, 0, 1, 2, 3, 4};
  gradcheck(testing::small_qwen3(), 2, 7, 0.3, 0, true,
            "model small qwen3 packed+masked recompute (all coords)", pos, {0, 1, 3, 5, 6});
}
// Gemma 3's block (small_gemma): the (1 + w) sandwich norms, GeGLU, the embedding scale,
// query_pre_attn_scalar, a RoPE per layer type and the final soft-cap; untied, and tied
// with recompute (the sandwich's down projection recomputed).
TEST(ModelGradcheck, GemmaEveryCoordinate) {
  gradcheck(testing::small_gemma(), 2, 5, 0.3, 0, false, "model small gemma3 (all coords)");
  gradcheck(testing::small_gemma(true), 2, 5, 0.3, 0, true,
            "model small gemma3 tied recompute (all coords)");
}
// The attention soft-cap (model.attn_logit_softcap, Gemma 2's) in the model's forward and
// backward, recompute included; 0.5 bends the scores of small_gemma's init. The step is
// 2.5e-4: the capped scores' high derivatives make the five-point stencil's O(h^4) error
// 6e-6 at h = 1e-3 (measured; 3e-9 at 2.5e-4, as h^4 predicts: no gradient error).
TEST(ModelGradcheck, AttentionSoftcapEveryCoordinate) {
  model::Config c = testing::small_gemma();
  c.attn_logit_softcap = 0.5;
  gradcheck(c, 2, 5, 0.3, 0, false, "model small gemma3 attn softcap (all coords)", {}, {},
            2.5e-4);
  gradcheck(c, 2, 5, 0.3, 0, true, "model small gemma3 attn softcap recompute (all coords)", {},
            {}, 2.5e-4);
}
// Qwen3.5's full-attention layers (small_qwen35): the output gate, partial RoPE, (1 + w)
// q/k norms; untied, and tied with recompute over packed examples.
TEST(ModelGradcheck, Qwen35GatedAttentionEveryCoordinate) {
  gradcheck(testing::small_qwen35(), 2, 5, 0.3, 0, false, "model small qwen3_5 (all coords)");
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, /**/ 0, 1, 2, 3, 4};
  gradcheck(testing::small_qwen35(true), 2, 5, 0.3, 0, true,
            "model small qwen3_5 tied packed recompute (all coords)", pos);
}
// Qwen3.5's Gated DeltaNet layer (small_qwen35_hybrid: a linear layer, then a full one):
// in_proj_qkv, z, b, a, the conv, A_log, dt_bias, the gated norm, out_proj; untied, and
// tied with recompute. Step 2e-4: q and k are L2-normalised over 4 dims, whose high
// derivatives make the stencil's h^4 error 3e-5 at h = 1e-3 (4e-8 at 2e-4, measured).
TEST(ModelGradcheck, Qwen35GatedDeltaNetEveryCoordinate) {
  gradcheck(testing::small_qwen35_hybrid(), 2, 5, 0.3, 0, false,
            "model small qwen3_5 hybrid (all coords)", {}, {}, 2e-4);
  gradcheck(testing::small_qwen35_hybrid(true), 2, 5, 0.3, 0, true,
            "model small qwen3_5 hybrid tied recompute (all coords)", {}, {}, 2e-4);
}
// Packed examples on it (3 + 3 + 1 and 2 + 5 tokens): the conv and the rule restart at
// each example's first token, forward and backward (recompute included).
TEST(ModelGradcheck, Qwen35GatedDeltaNetPackedEveryCoordinate) {
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 2, 0, /**/ 0, 1, 0, 1, 2, 3, 4};
  gradcheck(testing::small_qwen35_hybrid(), 2, 7, 0.3, 0, false,
            "model small qwen3_5 hybrid packed+masked (all coords)", pos, {0, 1, 3, 5, 6}, 2e-4);
  gradcheck(testing::small_qwen35_hybrid(true), 2, 7, 0.3, 0, true,
            "model small qwen3_5 hybrid tied packed recompute (all coords)", pos, {}, 2e-4);
}
// qwen3_5_moe (small_qwen35_moe): a Gated DeltaNet and a full layer, each with the routed
// experts (top 2 of 4 renormalised), the shared expert and its sigmoid gate, the aux loss;
// untied, and tied with recompute.
TEST(ModelGradcheck, Qwen35MoeEveryCoordinate) {
  gradcheck(testing::small_qwen35_moe(), 2, 5, 0.3, 0, false,
            "model small qwen3_5_moe (all coords)", {}, {}, 2e-4);
  gradcheck(testing::small_qwen35_moe(true), 2, 5, 0.3, 0, true,
            "model small qwen3_5_moe tied recompute (all coords)", {}, {}, 2e-4);
}
// gpt-oss's block (small_gpt_oss): the sinks, yarn, attention biases, the router's bias and
// top-k softmax, the experts' biases and the clamped SwiGLU; untied, and tied with recompute.
TEST(ModelGradcheck, GptOssEveryCoordinate) {
  gradcheck(testing::small_gpt_oss(), 2, 5, 0.3, 0, false, "model small gpt_oss (all coords)");
  gradcheck(testing::small_gpt_oss(true), 2, 5, 0.3, 0, true,
            "model small gpt_oss tied recompute (all coords)");
}
// Mixtral's MoE MLP: the router (softmax, top 2 of 4, renormalised), the experts
// (gate_up [E, 2I, C], down [E, C, I]) and the load-balancing loss in the loss; untied
// with the aux loss, tied with recompute and without it.
TEST(ModelGradcheck, MixtralEveryCoordinate) {
  gradcheck(testing::small_mixtral(), 2, 5, 0.3, 0, false, "model small mixtral aux (all coords)");
  gradcheck(testing::small_mixtral(true, false), 2, 5, 0.3, 0, true,
            "model small mixtral tied recompute (all coords)");
}
// Qwen's MoE families: the router without renormalisation (norm_topk_prob false) and with
// it, experts narrower than the dense MLP, dense layers among MoE ones (mlp_only_layers,
// decoder_sparse_step), Qwen3's q/k norms; Qwen2-MoE's shared expert and its sigmoid gate.
TEST(ModelGradcheck, Qwen3MoeEveryCoordinate) {
  gradcheck(testing::small_qwen3_moe(), 2, 5, 0.3, 0, false,
            "model small qwen3_moe raw dense1 aux (all coords)");
  Config c = testing::small_qwen3_moe(true, false);
  c.mlp_only_layers.clear();
  c.decoder_sparse_step = 2;  // layer 1 only
  c.norm_topk_prob = true;
  gradcheck(c, 2, 5, 0.3, 0, true, "model small qwen3_moe step2 renorm tied recompute (all coords)");
}
TEST(ModelGradcheck, Qwen2MoeSharedExpertEveryCoordinate) {
  gradcheck(testing::small_qwen2_moe(), 2, 5, 0.3, 0, false,
            "model small qwen2_moe shared dense0 aux (all coords)");
  gradcheck(testing::small_qwen2_moe(true, false), 2, 5, 0.3, 0, true,
            "model small qwen2_moe tied recompute (all coords)");
}
// Two rows of packed examples (3 + 3 + 1 and 2 + 5 tokens), the prompt-like half of the
// targets masked: the masked mean loss and the position / attention resets, backward.
TEST(ModelGradcheck, SmallPackedMaskedEveryCoordinate) {
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 2, 0, /**/ 0, 1, 0, 1, 2, 3, 4};
  gradcheck(testing::small_config(), 2, 7, 0.3, 0, false, "model small packed+masked (all coords)",
            pos, {0, 1, 3, 5, 6, 7, 9, 10});
}
TEST(ModelGradcheck, SmallPackedMaskedRecomputeEveryCoordinate) {
  const std::vector<int32_t> pos = {0, 1, 2, 0, 1, 2, 0, /**/ 0, 1, 0, 1, 2, 3, 4};
  gradcheck(testing::small_config(true), 2, 7, 0.3, 0, true,
            "model small tied packed+masked recompute (all coords)", pos, {0, 1, 3, 5, 6, 7, 9, 10});
}

// A packed row equals its examples run alone: the sum of the per-target losses and the
// gradient of that sum are those of three separate forward/backward calls (positions
// restart and no token attends across an example boundary). Double precision.
// The small config (or c) in double with weights drawn at std 0.3 (seed 5), bound to a model.
struct SmallModel {
  Config cfg = testing::small_config();
  ParamLayout layout{cfg};
  Parameters<double> P{layout};
  Model<double> m{cfg};
  explicit SmallModel(const Config& c = testing::small_config())
      : cfg(c), layout(c), P(layout), m(c) {
    testing::init_general(P, layout, 0.3, 5);
    P.bind(m);
  }
};

void packed_equals_alone(const Config& config) {
  SmallModel sm(config);
  const Config& cfg = sm.cfg;
  Parameters<double>& P = sm.P;
  Model<double>& m = sm.m;
  const std::vector<int64_t> lens = {3, 3, 2};  // examples, packed into T = 8 (the context)
  const int64_t T = 8;
  auto tok = testing::random_tokens(T, cfg.vocab, 31);
  auto tgt = testing::random_tokens(T, cfg.vocab, 32);
  tgt[0] = tgt[1] = tgt[3] = tgt[6] = -1;  // "prompts"
  std::vector<int32_t> pos;
  for (const int64_t n : lens)
    for (int64_t t = 0; t < n; ++t) pos.push_back(static_cast<int32_t>(t));
  auto count = [](const std::vector<int32_t>& t) {
    int64_t c = 0;
    for (const int32_t x : t) c += x >= 0;
    return c;
  };
  // packed: loss and gradient of the sum (mean x count)
  P.zero_grads();
  const int64_t n_all = count(tgt);
  const double packed = m.loss_and_grad(tok, tgt, 1, T, false, static_cast<double>(n_all), pos) *
                        static_cast<double>(n_all);
  std::vector<std::vector<double>> g_packed;
  for (int u = 0; u < P.num_units(); ++u)
    g_packed.emplace_back(P.grads(u).begin(), P.grads(u).end());
  // alone: each example from position 0, gradients of their sums added up
  P.zero_grads();
  double alone = 0;
  int64_t at = 0;
  for (const int64_t n : lens) {
    const std::vector<int32_t> t1(tok.begin() + at, tok.begin() + at + n);
    const std::vector<int32_t> g1(tgt.begin() + at, tgt.begin() + at + n);
    const double c = static_cast<double>(count(g1));
    alone += m.loss_and_grad(t1, g1, 1, n, false, c) * c;
    at += n;
  }
  EXPECT_NEAR(packed, alone, 1e-12 * std::fabs(alone));
  double worst = 0;
  for (int u = 0; u < P.num_units(); ++u)
    for (size_t i = 0; i < g_packed[static_cast<size_t>(u)].size(); ++i)
      worst = std::max(worst, std::fabs(g_packed[static_cast<size_t>(u)][i] - P.grads(u)[i]));
  EXPECT_LT(worst, 1e-12);
  // and without the positions the packed row is NOT the examples alone (the test can fail)
  const double plain = m.loss(tok, tgt, 1, T) * static_cast<double>(n_all);
  EXPECT_GT(std::fabs(plain - alone), 1e-6);
  std::printf("packed %.15f, alone %.15f, plain causal %.15f; max |grad diff| %.2e\n", packed,
              alone, plain, worst);
}

TEST(ModelPacked, PackedRowEqualsExamplesRunAlone) { packed_equals_alone(testing::small_config()); }
// Qwen3.5's hybrid: the Gated DeltaNet layer's conv and recurrent state restart at each
// example (its kernels run one example at a time).
TEST(ModelPacked, GatedDeltaNetPackedRowEqualsExamplesRunAlone) {
  packed_equals_alone(testing::small_qwen35_hybrid());
}

TEST(ModelPacked, BadPositionsAreRefused) {
  SmallModel sm;
  Model<double>& m = sm.m;
  const auto tok = testing::random_tokens(4, sm.cfg.vocab, 1);
  EXPECT_THROW(m.loss(tok, tok, 1, 4, std::vector<int32_t>{0, 1, 3, 4}), InputError);  // a jump
  EXPECT_THROW(m.loss(tok, tok, 1, 4, std::vector<int32_t>{1, 2, 3, 4}), InputError);  // no start
  EXPECT_THROW(m.loss(tok, tok, 1, 4, std::vector<int32_t>{0, 1}), InputError);        // size
}

// A row objective (Model::set_row_objective) over rows with context targets (t <= -2,
// the token -2 - t: ORPO's prompt NLL): value = sum_b a_b logp_b + c_b ctx_b + logp_0
// logp_1 / 4 (not linear, so dlogp depends on the forward); the model's gradient of it
// against central differences of the same value computed from row_logps' 2B sums.
TEST(ModelGradcheck, RowObjectiveWithContextTargetsEveryCoordinate) {
  const Config cfg = testing::small_config();
  const int64_t B = 2, T = 5;
  ParamLayout layout(cfg);
  Parameters<double> P(layout);
  testing::init_general(P, layout, 0.3, 7);
  Model<double> m(cfg);
  P.bind(m);
  const auto tok = testing::random_tokens(B * T, cfg.vocab, 8);
  auto tgt = testing::random_tokens(B * T, cfg.vocab, 9);
  for (const int i : {0, 1, 6}) tgt[static_cast<size_t>(i)] = -2 - tgt[static_cast<size_t>(i)];  // context
  tgt[5] = -1;  // ignored
  const double a[2] = {0.7, -1.3}, c[2] = {-0.4, 0.9};
  auto value = [&](std::span<const double> lp, std::span<double> d) {
    EXPECT_EQ(lp.size(), 4u);
    d[0] = a[0] + lp[1] / 4;
    d[1] = a[1] + lp[0] / 4;
    d[2] = c[0];
    d[3] = c[1];
    return a[0] * lp[0] + a[1] * lp[1] + c[0] * lp[2] + c[1] * lp[3] + lp[0] * lp[1] / 4;
  };
  m.set_row_objective([&](std::span<const double> lp, std::span<const int64_t> n, std::span<double> d) {
    EXPECT_EQ(n[0], 3);  // row 0: 3 own targets, 2 context
    EXPECT_EQ(n[2], 2);
    EXPECT_EQ(n[1], 3);  // row 1: 3 own, 1 context, 1 ignored
    EXPECT_EQ(n[3], 1);
    return value(lp, d);
  });
  P.zero_grads();
  const double v = m.loss_and_grad(tok, tgt, B, T);
  auto f = [&] {
    std::vector<double> lp(4), d(4);
    std::vector<int64_t> n(4);
    m.row_logps(tok, tgt, B, T, {}, lp, n);
    return value(lp, d);
  };
  EXPECT_NEAR(v, f(), 1e-12);
  const testing::ErrStats all = testing::every_coordinate(layout, P, f, kH, kFloor);
  all.print("row objective with context targets (all coords)");
  EXPECT_LT(all.max_rel, kTol);
}

TEST(ModelGradcheck, TinySubset) {
  gradcheck(Config::preset("tiny"), 1, 6, 0.1, 6, false, "model tiny B1 T6 (6 per tensor)");
}

}  // namespace
}  // namespace zt::model
