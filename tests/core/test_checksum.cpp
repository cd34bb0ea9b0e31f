// zt-xxh3 against XXH3 chunk by chunk; zt-sum64 against a direct evaluation of its definition, slice additivity, and that a
// flipped byte or a swapped pair changes it.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
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

// sum64_fast, on every instruction set this CPU has (ZT_CHECKSUM_ISA is read once per
// process, so each one runs in a child process), equals the definition: lengths around
// the vector widths, offsets, special values (NaN, Inf, -0, subnormals).
TEST(Checksum, FastEqualsDefinitionOnEveryIsa) {
  std::vector<float> x = ramp(4099);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = -std::numeric_limits<float>::infinity();
  x[7] = -0.0f;
  x[8] = std::numeric_limits<float>::denorm_min();
  const std::span<const float> all(x);
  for (const size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{15},
                         size_t{16}, size_t{17}, size_t{1000}, size_t{4099}})
    for (const uint64_t first : {uint64_t{0}, uint64_t{3}, uint64_t{1} << 40})
      ASSERT_EQ(zt::sum64_fast(all.first(n), first), zt::sum64(all.first(n), first))
          << "n " << n << " first " << first << " isa " << zt::sum64_isa();
  std::printf("sum64_fast here uses %s\n", zt::sum64_isa());
}

TEST(Checksum, FastEqualsDefinitionOnTheOtherIsas) {
  for (const char* isa : {"scalar", "avx2"}) {
    EXPECT_EXIT(
        {
          ::setenv("ZT_CHECKSUM_ISA", isa, 1);
          const std::vector<float> x = ramp(777);
          const bool same = zt::sum64_fast(x, 5) == zt::sum64(x, 5);
          std::fprintf(stderr, "isa %s\n", zt::sum64_isa());
          std::exit(same ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "isa ")
        << isa;
  }
}

// zt-xxh3: chunk j of the bytes hashed with XXH3-64 seeded with j, the hashes added; a
// split at any chunk boundary adds up; a short last chunk; a flipped byte changes it.
// (Its independent check: tests/ckpt/check_file.py recomputes it with Python's xxhash.)
TEST(Checksum, Xxh3SumIsChunkHashesAdded) {
  constexpr size_t C = zt::kXxh3ChunkBytes;
  std::vector<float> x = ramp(3 * C / sizeof(float) + 123);  // 3 whole chunks + a short one
  const auto b = std::as_bytes(std::span<const float>(x));
  EXPECT_EQ(zt::xxh3_sum({}), 0u);
  // XXH3-64 of no bytes, seed 0: the value xxHash's own sanity test lists.
  EXPECT_EQ(XXH3_64bits_withSeed(nullptr, 0, 0), 0x2D06800538D394C2ULL);
  uint64_t direct = 0;
  for (size_t j = 0; j * C < b.size(); ++j)
    direct += XXH3_64bits_withSeed(b.data() + j * C, std::min(C, b.size() - j * C), j);
  EXPECT_EQ(zt::xxh3_sum(b), direct);
  for (size_t k = 0; k <= 4; ++k) {
    const size_t cut = std::min(k * C, b.size());
    EXPECT_EQ(zt::xxh3_sum(b.first(cut)) + zt::xxh3_sum(b.subspan(cut), k), direct) << k;
  }
  unsigned char byte;
  std::memcpy(&byte, &x[C / sizeof(float) + 7], 1);
  byte ^= 0x04;
  std::memcpy(&x[C / sizeof(float) + 7], &byte, 1);
  EXPECT_NE(zt::xxh3_sum(b), direct);
}
