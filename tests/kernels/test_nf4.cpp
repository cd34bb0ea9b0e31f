// NF4 + double quantization (zt/kernels/nf4.hpp): the format's invariants and error
// bounds. Bitwise agreement with bitsandbytes and with a reference written from the QLoRA
// paper is nf4_peer_test.py (label hf).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "zt/core/error.hpp"
#include "zt/kernels/nf4.hpp"

namespace nf4 = zt::kernels::nf4;

namespace {

std::vector<float> normal(size_t n, uint32_t seed, float scale = 0.02f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng);
  return x;
}

// The largest gap between adjacent levels of a code book.
template <size_t N>
float widest_gap(const std::array<float, N>& levels) {
  float gap = 0;
  for (size_t i = 0; i + 1 < N; ++i) gap = std::max(gap, levels[i + 1] - levels[i]);
  return gap;
}

}  // namespace

TEST(Nf4, CodeBooksAreSortedSymmetricAndHoldZero) {
  const auto& map = nf4::dynamic_map();
  for (size_t i = 0; i + 1 < map.size(); ++i) EXPECT_LT(map[i], map[i + 1]) << i;
  EXPECT_EQ(map.back(), 1.0f);
  EXPECT_NE(std::find(map.begin(), map.end(), 0.0f), map.end());
  for (float v : map) {  // every level but 1 has its negative
    if (v != 1.0f) {
      EXPECT_NE(std::find(map.begin(), map.end(), -v), map.end()) << v;
    }
  }
  EXPECT_FLOAT_EQ(map[map.size() - 2], 0.99296875f);  // 0.1 + 0.9 * 127 / 128
  EXPECT_FLOAT_EQ(map[128], 1e-6f * 0.55f);           // the smallest positive level
  for (size_t i = 0; i + 1 < nf4::kNf4.size(); ++i) EXPECT_LT(nf4::kNf4[i], nf4::kNf4[i + 1]);
  EXPECT_EQ(nf4::kNf4[7], 0.0f);
}

TEST(Nf4, SizesAndBytes) {
  for (int64_t n : {1, 2, 63, 64, 65, 64 * 256, 64 * 256 + 1, 1000003}) {
    const auto q = nf4::quantize(normal(static_cast<size_t>(n), 1));
    const int64_t blocks = (n + 63) / 64;
    EXPECT_EQ(static_cast<int64_t>(q.codes.size()), (n + 1) / 2) << n;
    EXPECT_EQ(static_cast<int64_t>(q.absmax_codes.size()), blocks) << n;
    EXPECT_EQ(static_cast<int64_t>(q.absmax_scale.size()), (blocks + 255) / 256) << n;
    EXPECT_EQ(nf4::quantized_bytes(n),
              static_cast<int64_t>(q.codes.size() + q.absmax_codes.size() +
                                   4 * q.absmax_scale.size() + 4));
  }
}

// Each element is within half the widest NF4 gap of its block's (decoded) absmax, and the
// decoded absmax within half the widest 8-bit gap of its scale, of the truth.
TEST(Nf4, RoundTripErrorIsBoundedByTheCodeBooks) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto x = normal(64 * 600 + 17, seed, seed == 3 ? 3.0f : 0.02f);
    const auto q = nf4::quantize(x);
    std::vector<float> c1(q.absmax_codes.size());
    std::vector<uint8_t> scratch((x.size() + 1) / 2);
    nf4::quantize_nf4(x, scratch, c1);
    EXPECT_EQ(scratch, q.codes);
    const auto c1q = nf4::decode_absmax(q);
    const float gap8 = widest_gap(nf4::dynamic_map()), gap4 = widest_gap(nf4::kNf4);
    for (size_t b = 0; b < c1.size(); ++b)
      ASSERT_LE(std::fabs(c1q[b] - c1[b]),
                0.5f * gap8 * q.absmax_scale[b / 256] * 1.0001f + 1e-7f * c1[b]) << b;
    std::vector<float> y(x.size());
    nf4::dequantize(q, y);
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t b = i / 64;
      // |x - level * c1q| <= |x - level * c1| + |level| |c1 - c1q|
      ASSERT_LE(std::fabs(y[i] - x[i]),
                0.5f * gap4 * c1[b] * 1.0001f + std::fabs(c1q[b] - c1[b]) + 1e-7f * c1[b])
          << "element " << i;
    }
  }
}

TEST(Nf4, ZeroBlocksAndExactLevels) {
  std::vector<float> x(64 * 3, 0.0f);
  for (int i = 0; i < 16; ++i) x[64 + i] = nf4::kNf4[static_cast<size_t>(i)] * 0.5f;  // block 1
  const auto q = nf4::quantize(x);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(q.codes[static_cast<size_t>(i / 2)] >> (i % 2 ? 0 : 4) & 0xF, 7);
  for (int i = 0; i < 16; ++i) {  // a level times the absmax quantizes to that level
    const uint8_t byte = q.codes[static_cast<size_t>((64 + i) / 2)];
    EXPECT_EQ(i % 2 ? byte & 0xF : byte >> 4, i) << i;
  }
  std::vector<float> y(x.size());
  nf4::dequantize(q, y);
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(y[i], 0.0f) << i;  // a zero block decodes to zeros
  for (size_t i = 128; i < y.size(); ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

TEST(Nf4, OddLengthPadsTheLastNibbleWithZero) {
  const auto q = nf4::quantize(std::vector<float>{0.5f, -1.0f, 0.25f});
  ASSERT_EQ(q.codes.size(), 2u);
  EXPECT_EQ(q.codes[1] & 0x0F, 0);
  EXPECT_EQ(q.codes[0] >> 4, 12);   // 0.5 -> 0.4407 (0.5626 is 0.0033 farther)
  EXPECT_EQ(q.codes[0] & 0xF, 0);   // -1
  EXPECT_EQ(q.codes[1] >> 4, 10);   // 0.25 -> 0.2461
}

TEST(Nf4, NonFiniteInputIsAnInputErrorNamingTheElement) {
  std::vector<float> x(100, 1.0f);
  x[42] = std::numeric_limits<float>::quiet_NaN();
  try {
    (void)nf4::quantize(x);
    FAIL() << "a NaN was quantized";
  } catch (const zt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("element 42 of 100"), std::string::npos) << e.what();
  }
}

TEST(Nf4, InconsistentStatisticsAreRefused) {
  auto q = nf4::quantize(normal(64 * 10, 5));
  q.absmax_codes.pop_back();
  std::vector<float> y(static_cast<size_t>(q.n));
  EXPECT_THROW(nf4::dequantize(q, y), zt::Error);
}
