// dpo_value and orpo_value (DPO sigmoid with label smoothing, IPO, ORPO): the derivative in each
// row's log-prob against central finite differences in double, and its value at a hand
// case. The engine path is compared with TRL in tests/ckpt/hf/dpo_peer_test.py.
#include <gtest/gtest.h>

#include <cmath>
#include <span>
#include <vector>

#include "zt/train/preference.hpp"

namespace zt::train {
namespace {

// DPO with reference log-probs, ORPO (with its NLL weight) without.
double pair_value(const PreferenceConfig& cfg, std::span<const double> logp, std::span<const int64_t> n,
                  std::span<const double> ref, double nll, std::span<double> d, PairMetrics& m) {
  return ref.empty() ? orpo_value(cfg, logp, n, nll, d, m) : dpo_value(cfg, logp, n, ref, d, m);
}

double value_at(const PreferenceConfig& cfg, const std::vector<double>& logp, const std::vector<int64_t>& n,
                const std::vector<double>& ref, double nll) {
  std::vector<double> d(logp.size());
  PairMetrics m;
  return pair_value(cfg, logp, n, ref, nll, d, m);
}

void expect_gradient(const PreferenceConfig& cfg, bool with_ref) {
  const std::vector<double> logp = {-12.5, -14.0, -7.25, -6.5, -30.0, -31.5};
  const std::vector<int64_t> n = {5, 7, 3, 2, 11, 13};
  const std::vector<double> ref = with_ref ? std::vector<double>{-13.0, -13.5, -7.0, -7.0, -29.0, -32.0}
                                           : std::vector<double>{};
  const double nll = 0.03;
  std::vector<double> d(logp.size());
  PairMetrics m;
  pair_value(cfg, logp, n, ref, nll, d, m);
  EXPECT_EQ(m.pairs, 3);
  for (size_t i = 0; i < logp.size(); ++i) {
    const double h = 1e-5;
    std::vector<double> up = logp, down = logp;
    up[i] += h;
    down[i] -= h;
    const double fd = (value_at(cfg, up, n, ref, nll) - value_at(cfg, down, n, ref, nll)) / (2 * h);
    EXPECT_NEAR(d[i], fd, 1e-8 * std::max(1.0, std::abs(fd))) << "row " << i;
  }
}

TEST(Preference, DpoSigmoidWithLabelSmoothingGradient) {
  PreferenceConfig c;
  c.beta = 0.3;
  c.label_smoothing = 0.2;
  expect_gradient(c, true);
}

TEST(Preference, IpoGradient) {
  PreferenceConfig c;
  c.ipo = true;
  c.beta = 0.5;
  expect_gradient(c, true);
}

TEST(Preference, OrpoGradient) {
  PreferenceConfig c;
  c.orpo_lambda = 0.25;
  expect_gradient(c, false);
}

// orpo.nll = sequence: the chosen rows' context sums join the NLL (d value / d them =
// -nll_weight; rejected rows' 0), the rows' derivatives unchanged.
TEST(Preference, OrpoSequenceNllGradient) {
  PreferenceConfig c;
  c.orpo_lambda = 0.25;
  const std::vector<double> logp = {-12.5, -14.0, -7.25, -6.5}, ctx = {-20.0, -3.0, -9.0, -1.5};
  const std::vector<int64_t> n = {5, 7, 3, 2};
  const double nll = 0.03;
  auto value = [&](const std::vector<double>& lp, const std::vector<double>& cx) {
    std::vector<double> d(lp.size()), dc(cx.size());
    PairMetrics m;
    return orpo_value(c, lp, n, nll, d, m, cx, dc);
  };
  std::vector<double> d(4), dc(4), d0(4);
  PairMetrics m, m0;
  const double v = orpo_value(c, logp, n, nll, d, m, ctx, dc);
  const double v0 = orpo_value(c, logp, n, nll, d0, m0);
  EXPECT_NEAR(v - v0, -nll * (ctx[0] + ctx[2]), 1e-12);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(d[i], d0[i]) << "row " << i;
    const double h = 1e-5;
    std::vector<double> up = ctx, down = ctx;
    up[i] += h;
    down[i] -= h;
    const double fd = (value(logp, up) - value(logp, down)) / (2 * h);
    EXPECT_NEAR(dc[i], fd, 1e-9) << "context of row " << i;
    EXPECT_EQ(dc[i], i % 2 == 0 ? -nll : 0.0);
  }
}

TEST(Preference, DpoValueAndMetrics) {
  PreferenceConfig c;
  c.beta = 0.1;
  const std::vector<double> logp = {-10, -20}, ref = {-12, -18};
  const std::vector<int64_t> n = {4, 4};
  std::vector<double> d(2);
  PairMetrics m;
  const double v = dpo_value(c, logp, n, ref, d, m);
  const double delta = (-10 + 12) - (-20 + 18);  // 4
  EXPECT_NEAR(v, std::log1p(std::exp(-0.1 * delta)), 1e-15);
  EXPECT_NEAR(m.rewards_chosen, 0.2, 1e-15);
  EXPECT_NEAR(m.rewards_rejected, -0.2, 1e-15);
  EXPECT_EQ(m.accuracies, 1);
  EXPECT_NEAR(m.margins, 0.4, 1e-15);
}

}  // namespace
}  // namespace zt::train
