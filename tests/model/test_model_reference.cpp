// Model<double> forward against the naive, by-name reference model (naive_llama.hpp):
// the loss and the last-position logits agree to double rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include "model_fixtures.hpp"
#include "zt/core/error.hpp"
#include "naive_llama.hpp"

namespace zt::model {
namespace {

std::vector<std::vector<double>> copy_units(Parameters<double>& P) {
  std::vector<std::vector<double>> u;
  for (int i = 0; i < P.num_units(); ++i) u.emplace_back(P.params(i).begin(), P.params(i).end());
  return u;
}

void check_against_naive(const Config& cfg, int64_t B, int64_t T, uint64_t seed) {
  ParamLayout layout(cfg);
  Parameters<double> P(layout);
  testing::init_general(P, layout, 0.3, seed);
  Model<double> m(cfg);
  P.bind(m);
  auto tok = testing::random_tokens(B * T, cfg.vocab, seed + 10);
  auto tgt = testing::random_tokens(B * T, cfg.vocab, seed + 11);
  tgt[1] = -1;  // an ignored position
  const auto units = copy_units(P);
  testing::NaiveLlama naive(layout, units);
  const double want = naive.loss(tok, tgt, B, T);
  const double got = m.loss(tok, tgt, B, T);
  std::printf("[reference] %-12s B%lld T%lld loss zt %.15f naive %.15f\n", cfg.name.c_str(),
              static_cast<long long>(B), static_cast<long long>(T), got, want);
  EXPECT_NEAR(got, want, 1e-12 * std::abs(want));
  // loss_and_grad returns the same loss as loss()
  P.zero_grads();
  EXPECT_EQ(m.loss_and_grad(tok, tgt, B, T), got);

  // logits of the last position of sequence 0
  std::vector<double> last(static_cast<size_t>(cfg.vocab));
  std::span<const int32_t> seq0(tok.data(), static_cast<size_t>(T));
  m.logits_last(seq0, T, last);
  const auto all = naive.logits(seq0, 1, T);
  double err = 0, scale = 0;
  for (int64_t j = 0; j < cfg.vocab; ++j) {
    err = std::max(err, std::abs(last[j] - all[(T - 1) * cfg.vocab + j]));
    scale = std::max(scale, std::abs(all[(T - 1) * cfg.vocab + j]));
  }
  EXPECT_LT(err, 1e-12 * scale);
}

TEST(ModelReference, SmallMatchesNaive) { check_against_naive(testing::small_config(), 2, 5, 1); }
TEST(ModelReference, SmallTiedMatchesNaive) {
  check_against_naive(testing::small_config(true), 2, 5, 2);
}
TEST(ModelReference, Qwen2BiasesMatchNaive) {
  check_against_naive(testing::small_qwen2(), 2, 5, 4);
  check_against_naive(testing::small_qwen2(true), 2, 5, 5);
}
TEST(ModelReference, Qwen3QkNormHeadDimMatchesNaive) {
  check_against_naive(testing::small_qwen3(), 2, 5, 6);
}
TEST(ModelReference, TinyMatchesNaive) { check_against_naive(Config::preset("tiny"), 2, 7, 3); }

TEST(ModelReference, InitialLossMatchesNaiveAndIsNearLogVocab) {
  // The fp32 model at the default 0.02 init against the naive double reference on the
  // same parameters: loss and last-position logits. A loss near ln(vocab) alone proves
  // little (all-zero logits give exactly ln 256), so the logits must also spread as
  // the init predicts: logit ~ N(0, s^2), s^2 = 0.02^2 * hidden (the final norm output
  // has unit RMS), and E[loss] ~ ln(vocab) + s^2 / 2 = 5.545 + 0.026 (independent of
  // the code).
  Config cfg = Config::preset("tiny");
  ParamLayout layout(cfg);
  Parameters<float> P(layout);
  P.init(InitOptions{});
  Model<float> m(cfg);
  P.bind(m);
  const int64_t B = 4, T = 64;
  auto tok = testing::random_tokens(B * T, cfg.vocab, 5);
  auto tgt = testing::random_tokens(B * T, cfg.vocab, 6);
  const double l = m.loss(tok, tgt, B, T);
  std::vector<std::vector<double>> units;
  for (int i = 0; i < P.num_units(); ++i) units.emplace_back(P.params(i).begin(), P.params(i).end());
  testing::NaiveLlama naive(layout, units);
  const double want = naive.loss(tok, tgt, B, T);
  std::printf("[reference] tiny initial loss zt %.7f naive %.7f, ln(256) = %.5f\n", l, want, std::log(256.0));
  EXPECT_NEAR(l, want, 1e-5 * want);  // fp32 against double

  std::vector<float> last(static_cast<size_t>(cfg.vocab));
  std::span<const int32_t> seq0(tok.data(), static_cast<size_t>(T));
  m.logits_last(seq0, T, last);
  const auto ref = naive.logits(seq0, 1, T);
  double err = 0, scale = 0, sum = 0, sum2 = 0;
  for (int64_t j = 0; j < cfg.vocab; ++j) {
    const double r = ref[static_cast<size_t>((T - 1) * cfg.vocab + j)];
    err = std::max(err, std::abs(static_cast<double>(last[static_cast<size_t>(j)]) - r));
    scale = std::max(scale, std::abs(r));
    sum += r;
    sum2 += r * r;
  }
  EXPECT_LE(err, 1e-4 * scale) << "last-position logits differ from the naive reference";
  const double mean = sum / static_cast<double>(cfg.vocab);
  const double sd = std::sqrt(sum2 / static_cast<double>(cfg.vocab) - mean * mean);
  const double s = 0.02 * std::sqrt(static_cast<double>(cfg.hidden));
  std::printf("[reference] tiny initial logits: sd %.4f (init predicts %.4f)\n", sd, s);
  EXPECT_GT(sd, 0.5 * s) << "the logits barely vary: the model is not using its parameters";
  EXPECT_LT(sd, 2.0 * s);
  EXPECT_NEAR(l, std::log(256.0) + 0.5 * s * s, 0.05);
}

TEST(ModelReference, BadInputsThrow) {
  Config cfg = testing::small_config();
  ParamLayout layout(cfg);
  Parameters<double> P(layout);
  Model<double> m(cfg);
  std::vector<int32_t> tok(10, 1);
  EXPECT_THROW(m.loss(tok, tok, 2, 5), Error);  // nothing bound yet
  P.bind(m);
  EXPECT_THROW(m.loss(tok, tok, 1, 10), InputError);  // longer than context 8
  EXPECT_THROW(m.loss(tok, tok, 2, 4), InputError);   // 10 ids for B*T = 8
  std::vector<int32_t> bad(10, 16);
  EXPECT_THROW(m.loss(bad, tok, 2, 5), InputError);   // token == vocab
  std::vector<double> wrong(3);
  EXPECT_THROW(m.bind_unit(0, wrong, {}), InputError);
  EXPECT_THROW(m.bind_unit(99, wrong, {}), InputError);
  // eval-only binding (no grads): loss works, loss_and_grad refuses
  Model<double> eval(cfg);
  for (int u = 0; u < P.num_units(); ++u) eval.bind_unit(u, P.params(u), {});
  EXPECT_NO_THROW(eval.loss(tok, tok, 2, 5));
  EXPECT_THROW(eval.loss_and_grad(tok, tok, 2, 5), Error);
}

}  // namespace
}  // namespace zt::model
