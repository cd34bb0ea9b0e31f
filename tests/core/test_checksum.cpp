// zt-sum64 against a direct evaluation of its definition, slice additivity, and that a
// flipped byte or a swapped pair changes it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "zt/core/checksum.hpp"

namespace {

std::vector<float> ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 0.001f * static_cast<float>(i) - 0.37f;
  return x;
}

TEST(Checksum, MatchesDefinition) {
  const std::vector<float> x = {1.0f, -2.5f, 0.0f};
  // bits: 1.0f = 0x3f800000, -2.5f = 0xc0200000, 0.0f = 0.
  const uint64_t expect = zt::mix64(zt::mix64(0) ^ 0x3f800000ULL) +
                          zt::mix64(zt::mix64(1) ^ 0xc0200000ULL) + zt::mix64(zt::mix64(2) ^ 0ULL);
  EXPECT_EQ(zt::sum64(x), expect);
  EXPECT_EQ(zt::sum64(std::span<const float>()), 0u);
}

TEST(Checksum, SlicesAddUp) {
  const std::vector<float> x = ramp(1000);
  const std::span<const float> all(x);
  const uint64_t parts = zt::sum64(all.subspan(0, 333), 0) + zt::sum64(all.subspan(333, 400), 333) +
                         zt::sum64(all.subspan(733), 733);
  EXPECT_EQ(parts, zt::sum64(all));
}

TEST(Checksum, DetectsFlippedByteAndSwap) {
  std::vector<float> x = ramp(64);
  const uint64_t base = zt::sum64(x);
  std::vector<float> flipped = x;
  unsigned char bytes[4];
  std::memcpy(bytes, &flipped[17], 4);
  bytes[2] ^= 0x10;
  std::memcpy(&flipped[17], bytes, 4);
  EXPECT_NE(zt::sum64(flipped), base);
  std::vector<float> swapped = x;
  std::swap(swapped[3], swapped[40]);
  EXPECT_NE(zt::sum64(swapped), base);
}

}  // namespace
