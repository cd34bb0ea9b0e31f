// Global-norm clipping: the factor the engine scales gradients by, against hand values
// and torch.nn.utils.clip_grad_norm_'s rule (max_norm / (norm + 1e-6) above the max).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "zt/zero/clip.hpp"

namespace zt::zero {
namespace {

TEST(Clip, ScalesANormAboveTheMaxDownToIt) {
  // Gradients {3, 4}, {12}, {0, 0, 0}: norm sqrt(9 + 16 + 144) = 13.
  std::vector<float> g = {3, 4, 12, 0, 0, 0};
  const double coef = clip_coefficient(13.0, 1.0);
  EXPECT_DOUBLE_EQ(coef, 1.0 / (13.0 + 1e-6));
  double sum = 0.0;
  for (float& x : g) {
    x *= static_cast<float>(coef);
    sum += static_cast<double>(x) * x;
  }
  EXPECT_NEAR(g[0], 3.0 / 13.0, 1e-6);
  EXPECT_NEAR(std::sqrt(sum), 1.0, 1e-6);  // clipped to the max norm
}

TEST(Clip, LeavesGradientsAloneAtOrBelowTheMaxOrWhenDisabled) {
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.0);   // below the max
  EXPECT_EQ(clip_coefficient(1.0, 1.0), 1.0);   // at the max: only norm > max clips
  EXPECT_EQ(clip_coefficient(50.0, 0.0), 1.0);  // 0 disables
  EXPECT_EQ(clip_coefficient(50.0, -1.0), 1.0);
  EXPECT_EQ(clip_coefficient(std::numeric_limits<double>::quiet_NaN(), 1.0), 1.0);  // step skipped
  EXPECT_DOUBLE_EQ(clip_coefficient(4.0, 2.0), 2.0 / (4.0 + 1e-6));
}

}  // namespace
}  // namespace zt::zero
