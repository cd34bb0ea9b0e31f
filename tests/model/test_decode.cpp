// Incremental decoding with a key/value cache (Model::decode) against the full forward
// (Model::logits_last over each prefix): prefill then one token at a time, several
// prefill lengths, grouped-query and tied-embedding models, in double (tight) and fp32;
// the unit uses (hooks) are logits_last's; cache misuse is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model_fixtures.hpp"
#include "zt/core/error.hpp"
#include "zt/model/model.hpp"

namespace zt::model {
namespace {

template <class R>
void check_decode(const Config& cfg, int64_t T, int64_t prefill, double tol) {
  const ParamLayout layout(cfg);
  Parameters<R> p(layout);
  testing::init_general(p, layout, 0.3, 7);  // logits far from uniform
  Model<R> m(cfg, 1, T);
  p.bind(m);
  const std::vector<int32_t> tokens = testing::random_tokens(T, cfg.vocab, 11);
  KvCache<R> cache(cfg, T);
  std::vector<R> full(static_cast<size_t>(cfg.vocab)), kv(full.size());
  m.decode(std::span<const int32_t>(tokens.data(), static_cast<size_t>(prefill)), cache, kv);
  EXPECT_EQ(cache.length, prefill);
  for (int64_t t = prefill; t <= T; ++t) {
    m.logits_last(std::span<const int32_t>(tokens.data(), static_cast<size_t>(t)), t, full);
    const double d = testing::max_rel_diff(kv, full);
    ASSERT_LE(d, tol) << "position " << t - 1 << " (prefill " << prefill << ")";
    if (t < T) m.decode(std::span<const int32_t>(&tokens[static_cast<size_t>(t)], 1), cache, kv);
  }
  EXPECT_EQ(cache.length, T);
}

Config longer(Config cfg) {
  cfg.context = 32;
  return cfg;
}

TEST(Decode, MatchesFullForwardInDouble) {
  for (const int64_t prefill : {1, 5, 24})
    check_decode<double>(longer(testing::small_config()), 24, prefill, 1e-12);
  check_decode<double>(longer(testing::small_config(/*tied=*/true)), 16, 3, 1e-12);
}

// The family pieces in the cached path: biases (Qwen2), q/k norms on the cache's keys and
// head_dim != hidden / heads (Qwen3).
TEST(Decode, QwenFamiliesMatchFullForwardInDouble) {
  check_decode<double>(longer(testing::small_qwen2()), 16, 5, 1e-12);
  check_decode<double>(longer(testing::small_qwen2(/*tied=*/true)), 16, 1, 1e-12);
  check_decode<double>(longer(testing::small_qwen3()), 16, 5, 1e-12);
}

// gpt-oss: the sinks and the window in the cached attention, yarn past its original context
// (3), the routed experts with biases, one token at a time and after a prefill.
TEST(Decode, GptOssMatchesFullForwardInDouble) {
  check_decode<double>(longer(testing::small_gpt_oss()), 16, 1, 1e-12);
  check_decode<double>(longer(testing::small_gpt_oss(/*tied=*/true)), 16, 5, 1e-12);
}

// Gemma 3 with the attention soft-cap: the cap in the cached attention (and the window, the
// RoPE per layer type) as in the full forward.
TEST(Decode, AttentionSoftcapMatchesFullForwardInDouble) {
  Config c = longer(testing::small_gemma());
  c.attn_logit_softcap = 0.5;
  check_decode<double>(c, 16, 1, 1e-12);
  check_decode<double>(c, 16, 5, 1e-12);
}

// Qwen3.5's hybrid (Gated DeltaNet blocks 0 and 2, full attention 1): the cache's conv
// inputs and recurrent state. Prefills of 1, 70 (past one chunk of 64) and 150 tokens (the
// chunked rule from the cache's state), then one token at a time (the recurrent rule) to
// 150: each token's logits equal the full forward's (chunked from zeros) in double.
Config hybrid() {
  Config c = testing::small_qwen35_hybrid();
  c.layers = 3;
  c.layer_types = "lfl";
  c.context = 160;
  return c;
}

TEST(Decode, GatedDeltaNetHybridMatchesFullForwardInDouble) {
  for (const int64_t prefill : {1, 70, 150}) check_decode<double>(hybrid(), 150, prefill, 1e-12);
  check_decode<double>(hybrid(), 20, 4, 1e-12);
}

// A cleared cache (length 0, as generate's window restart does) starts the Gated DeltaNet
// blocks from zeros again: the same tokens give the same logits.
TEST(Decode, GatedDeltaNetClearedCacheRestarts) {
  const Config cfg = hybrid();
  Parameters<double> p(ParamLayout{cfg});
  testing::init_general(p, ParamLayout{cfg}, 0.3, 7);
  Model<double> m(cfg, 1, 8);
  p.bind(m);
  const std::vector<int32_t> tokens = testing::random_tokens(8, cfg.vocab, 5);
  KvCache<double> cache(cfg, 8);
  std::vector<double> first(static_cast<size_t>(cfg.vocab)), again(first.size());
  m.decode(tokens, cache, first);
  cache.length = 0;
  m.decode(tokens, cache, again);
  EXPECT_EQ(first, again);
}

// The generation memory preflight counts KvCache::bytes: what the cache allocates, the
// keys and values of the attention blocks only and each Gated DeltaNet block's conv
// inputs [Cc, K - 1] and state [Hv, Dk, Dv], whatever the capacity.
TEST(Decode, CacheBytesCountTheGatedDeltaNetState) {
  const Config cfg = hybrid();
  for (const int64_t cap : {1, 37}) {
    const KvCache<float> cache(cfg, cap);
    const size_t held = sizeof(float) * (cache.k.size() + cache.v.size() + cache.conv.size() +
                                         cache.state.size());
    EXPECT_EQ(KvCache<float>::bytes(cfg, cap), held);
    const int64_t Cc = 2 * 1 * 4 + 2 * 3;  // q, k (1 key head of 4), v (2 value heads of 3)
    const int64_t want = 2 * 1 * cap * cfg.kv_dim() + 2 * (Cc * (3 - 1) + 2 * 4 * 3);
    EXPECT_EQ(KvCache<float>::bytes(cfg, cap), sizeof(float) * static_cast<size_t>(want));
  }
  const Config dense = testing::small_config();
  EXPECT_EQ(KvCache<double>::bytes(dense, 5),
            sizeof(double) * static_cast<size_t>(2 * dense.layers * 5 * dense.kv_dim()));
}

TEST(Decode, MatchesFullForwardInFloatOnTheTinyPreset) {
  Config cfg = Config::preset("tiny");
  ASSERT_LT(cfg.kv_heads, cfg.heads);  // grouped-query attention is exercised
  // The fp32 bound of one logit: rounding errors of a dot product of length K add as a
  // random walk, about sqrt(K) u (u = 2^-24); K = 512 (the feed-forward width, the longest),
  // and a logit's path holds about 20 products (4 layers x q, k, v, o, scores, values,
  // gate, up, down, less the ones of length 32, + the head): 20 sqrt(512) 2^-24 = 2.7e-5.
  // Measured: 1.28e-5 (AMD EPYC, AVX2). A wrong cache or position differs by order 1
  // (and MatchesFullForwardInDouble checks the same path at 1e-12).
  check_decode<float>(cfg, 40, 9, 20 * std::sqrt(512.0) * std::ldexp(1.0, -24));
}

TEST(Decode, UsesTheUnitsInLogitsLastOrder) {
  const Config cfg = testing::small_config(/*tied=*/true);
  Parameters<float> p(ParamLayout{cfg});
  p.init(InitOptions{});
  Model<float> m(cfg, 1, 8);
  p.bind(m);
  std::vector<int> uses;
  m.set_hooks(UnitHooks{[&](int u) { uses.push_back(u); }, {}, {}});
  const std::vector<int32_t> tokens = testing::random_tokens(6, cfg.vocab, 3);
  std::vector<float> out(static_cast<size_t>(cfg.vocab));
  m.logits_last(tokens, 6, out);
  const std::vector<int> full = uses;
  uses.clear();
  KvCache<float> cache(cfg, 8);
  m.decode(tokens, cache, out);
  EXPECT_EQ(uses, full);
  uses.clear();
  m.decode(std::span<const int32_t>(tokens.data(), 1), cache, out);
  EXPECT_EQ(uses, full);
}

TEST(Decode, CacheMisuseIsRefusedByName) {
  const Config cfg = testing::small_config();
  Parameters<float> p(ParamLayout{cfg});
  p.init(InitOptions{});
  Model<float> m(cfg, 1, 8);
  p.bind(m);
  std::vector<float> out(static_cast<size_t>(cfg.vocab));
  EXPECT_THROW(KvCache<float>(cfg, 0), InputError);
  EXPECT_THROW(KvCache<float>(cfg, cfg.context + 1), InputError);
  KvCache<float> cache(cfg, 4);
  const std::vector<int32_t> five = testing::random_tokens(5, cfg.vocab, 1);
  try {
    m.decode(five, cache, out);
    FAIL() << "5 positions went into a cache of 4";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("exceed the cache's 4"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.length, 0);
  Config other = cfg;
  other.layers += 1;
  KvCache<float> wrong(other, 4);
  EXPECT_THROW(m.decode(std::span<const int32_t>(five.data(), 1), wrong, out), InputError);
}

}  // namespace
}  // namespace zt::model
