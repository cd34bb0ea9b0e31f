// kto_value (finetune.objective = kto, preference.hpp): its derivative in each row's
// log-prob against central finite differences in double, its value and metrics at a hand
// case, and the whole model's gradient of it (every coordinate of the small config, in
// double) against central differences of the value over Model::row_logps. The engine path
// is compared with TRL's KTOTrainer in tests/ckpt/hf/kto_peer_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "zt/train/preference.hpp"

#include "../model/model_fixtures.hpp"

namespace zt::train {
namespace {

const KtoConfig kCfg{0.7, 1.0, 1.6};  // beta, desirable_weight, undesirable_weight: unequal

double value_at(const std::vector<double>& logp, const std::vector<double>& ref, const std::vector<uint8_t>& labels,
                double kl, std::vector<double>* dlogp = nullptr) {
  std::vector<double> d(logp.size());
  const std::vector<int64_t> n(logp.size(), 3);
  PairMetrics m;
  const double v = kto_value(kCfg, logp, n, ref, labels, kl, d, m);
  if (dlogp) *dlogp = d;
  return v;
}

TEST(Kto, GradientInEachRowLogProb) {
  const std::vector<double> logp = {-12.5, -14.0, -7.25, -6.5, -30.0, -31.5, -4.0, -9.0};
  const std::vector<double> ref = {-13.0, -13.5, -7.0, -7.0, -29.0, -32.0, -5.5, -8.0};
  const std::vector<uint8_t> labels = {1, 0, 1, 0};
  for (const double kl : {0.0, 0.8}) {
    std::vector<double> d;
    value_at(logp, ref, labels, kl, &d);
    for (size_t i = 0; i < logp.size(); ++i) {
      const double h = 1e-5;
      std::vector<double> up = logp, down = logp;
      up[i] += h;
      down[i] -= h;
      const double fd = (value_at(up, ref, labels, kl) - value_at(down, ref, labels, kl)) / (2 * h);
      EXPECT_NEAR(d[i], fd, 1e-9) << "row " << i << " kl " << kl;
      if (i % 2 == 1) {
        EXPECT_EQ(d[i], 0.0) << "a mismatched row carries no gradient";
      }
    }
  }
}

// Two examples: desirable r = 1, undesirable r = -1.5, z = 0.25:
// loss = (w_d (1 - s(b (1 - z))) + w_u (1 - s(b (z + 1.5)))) / 2 (unequal arguments: the
// weights cannot be swapped unseen).
TEST(Kto, ValueAndMetrics) {
  const std::vector<double> logp = {-10, -3, -20, -4}, ref = {-11, -2, -18.5, -6};
  const std::vector<int64_t> n = {3, 3, 3, 3};
  std::vector<double> d(4);
  PairMetrics m;
  const double z = 0.25, b = kCfg.beta;
  const double v = kto_value(kCfg, logp, n, ref, std::vector<uint8_t>{1, 0}, z, d, m);
  const auto s = [](double x) { return 1 / (1 + std::exp(-x)); };
  EXPECT_NEAR(v, (1.0 * (1 - s(b * (1 - z))) + 1.6 * (1 - s(b * (z + 1.5)))) / 2, 1e-15);
  EXPECT_NEAR(m.rewards_chosen, b * 1, 1e-15);
  EXPECT_NEAR(m.rewards_rejected, b * -1.5, 1e-15);
  EXPECT_EQ(m.logps_chosen, -10);
  EXPECT_EQ(m.logps_rejected, -20);
  EXPECT_EQ(m.chosen, 1);
  EXPECT_EQ(m.rejected, 1);
  EXPECT_EQ(m.pairs, 2);
  EXPECT_NEAR(m.kl / m.pairs, z, 1e-15);
  EXPECT_TRUE(m.unpaired);
}

// The small model in double, 2 examples (4 rows: completion, mismatched completion) of each
// label order, some targets masked: its gradient of kto_value (the KL estimate fixed, as
// the step's) in every coordinate against five-point central differences.
TEST(Kto, ModelGradientEveryCoordinate) {
  const model::Config cfg = testing::small_config();
  const int64_t B = 4, T = 5;
  model::ParamLayout layout(cfg);
  model::Parameters<double> P(layout);
  testing::init_general(P, layout, 0.3, 7);
  model::Model<double> m(cfg);
  P.bind(m);
  const auto tok = testing::random_tokens(B * T, cfg.vocab, 8);
  auto tgt = testing::random_tokens(B * T, cfg.vocab, 9);
  for (const int i : {0, 5, 6, 10, 15}) tgt[static_cast<size_t>(i)] = -1;  // prompts
  const std::vector<double> ref = {-9.0, -10.0, -8.5, -12.0};
  const std::vector<uint8_t> labels = {0, 1};
  const double kl = 0.3;
  auto value = [&](std::span<const double> lp, std::span<const int64_t> n, std::span<double> d) {
    PairMetrics pm;
    return kto_value(kCfg, lp, n, ref, labels, kl, d, pm);
  };
  m.set_row_objective(value);
  P.zero_grads();
  const double v = m.loss_and_grad(tok, tgt, B, T);
  auto f = [&] {
    std::vector<double> lp(B), d(B);
    std::vector<int64_t> n(B);
    m.row_logps(tok, tgt, B, T, {}, lp, n);
    return value(lp, n, d);
  };
  EXPECT_NEAR(v, f(), 1e-12);
  const testing::ErrStats all = testing::every_coordinate(layout, P, f, 1e-3, 1e-6);
  all.print("kto_value over the small model (all coords)");
  EXPECT_LT(all.max_rel, 1e-6);
  EXPECT_GT(all.n, 1000);
}

}  // namespace
}  // namespace zt::train
