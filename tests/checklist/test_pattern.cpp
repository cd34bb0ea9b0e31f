// The verification pattern: closed-form reductions against a brute-force loop over
// ranks, exactness limits per type, and detection of a single corrupted element.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "zt/check/environment.hpp"
#include "zt/check/pattern.hpp"

using zt::DType;
using zt::comm::ReduceOp;

TEST(Pattern, ClosedFormMatchesBruteForce) {
  for (int n : {1, 2, 3, 4, 7, 16, 100}) {
    for (uint32_t seed : {0u, 1u, 12u, 1000u}) {
      const zt::check::Pattern p(DType::kF32, n, seed);
      for (uint64_t i = 0; i < 50; ++i) {
        double sum = 0.0, mx = p.value(0, i), mn = p.value(0, i);
        for (int r = 0; r < n; ++r) {
          sum += p.value(r, i);
          mx = std::max(mx, p.value(r, i));
          mn = std::min(mn, p.value(r, i));
        }
        EXPECT_EQ(p.reduced(ReduceOp::kSum, i), sum) << n << " " << seed << " " << i;
        EXPECT_EQ(p.reduced(ReduceOp::kMax, i), mx);
        EXPECT_EQ(p.reduced(ReduceOp::kMin, i), mn);
      }
    }
  }
}

TEST(Pattern, SumsStayExactIntegers) {
  // Worst case sum 2 (m-1) n must not pass the type's exact-integer limit.
  struct Case { DType t; int n; int expect_m; };
  for (const Case c : {Case{DType::kF32, 4, 13}, Case{DType::kBF16, 4, 13}, Case{DType::kBF16, 64, 3},
                       Case{DType::kBF16, 200, 1}, Case{DType::kF16, 256, 5}, Case{DType::kI8, 4, 13},
                       Case{DType::kI8, 32, 2}}) {
    const zt::check::Pattern p(c.t, c.n, 0);
    EXPECT_EQ(p.modulus(), c.expect_m) << zt::dtype_name(c.t) << " n=" << c.n;
    EXPECT_LE(2 * (p.modulus() - 1) * c.n, static_cast<int64_t>(zt::check::exact_integer_limit(c.t)));
  }
  EXPECT_EQ(zt::check::exact_integer_limit(DType::kF32), 16777216u);
  EXPECT_EQ(zt::check::exact_integer_limit(DType::kBF16), 256u);
}

TEST(Pattern, FillAndCheckEveryType) {
  for (DType t : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI8, DType::kI32, DType::kI64}) {
    const zt::check::Pattern p(t, 4, 7);
    const size_t count = 37;
    std::vector<std::byte> buf(count * zt::dtype_size(t));
    zt::check::fill_pattern(buf.data(), t, count, p, 2, 100);
    EXPECT_EQ(zt::check::count_wrong_from_rank(buf.data(), t, count, p, 2, 100), 0) << zt::dtype_name(t);
    // Another rank's data (or an offset index) does not pass as this rank's.
    EXPECT_GT(zt::check::count_wrong_from_rank(buf.data(), t, count, p, 3, 100), 0);
    EXPECT_GT(zt::check::count_wrong_from_rank(buf.data(), t, count, p, 2, 101), 0);
    zt::check::fill_value(buf.data(), t, count, zt::check::Pattern::kPoison);
    EXPECT_EQ(zt::check::count_wrong_from_rank(buf.data(), t, count, p, 2, 100), static_cast<int64_t>(count));
  }
}

TEST(Pattern, ReducedCheckCountsOneCorruptedElement) {
  const int n = 4;
  const zt::check::Pattern p(DType::kF32, n, 3);
  const size_t count = 1000;
  // Build the all_reduce sum by adding every rank's pattern: an independent route.
  std::vector<float> sum(count, 0.0f), mine(count);
  for (int r = 0; r < n; ++r) {
    zt::check::fill_pattern(mine.data(), DType::kF32, count, p, r, 0);
    for (size_t k = 0; k < count; ++k) sum[k] += mine[k];
  }
  EXPECT_EQ(zt::check::count_wrong_reduced(sum.data(), DType::kF32, count, p, ReduceOp::kSum, 0), 0);
  sum[517] += 1.0f;
  EXPECT_EQ(zt::check::count_wrong_reduced(sum.data(), DType::kF32, count, p, ReduceOp::kSum, 0), 1);
  // The second half of the array checked as a reduce_scatter part at offset 500.
  sum[517] -= 1.0f;
  EXPECT_EQ(zt::check::count_wrong_reduced(sum.data() + 500, DType::kF32, 500, p, ReduceOp::kSum, 500), 0);
}

TEST(Pattern, DistinctModulusIsTheLargestExactPrime) {
  // Checked by trial division where that is cheap; 2^53-111 is the known largest prime
  // below 2^53 (double and int64 values go through double).
  const auto prime = [](uint64_t x) {
    if (x < 2) return false;
    for (uint64_t d = 2; d * d <= x; ++d)
      if (x % d == 0) return false;
    return true;
  };
  for (DType t : {DType::kBF16, DType::kF16, DType::kI8, DType::kF32, DType::kI32}) {
    const uint64_t m = zt::check::distinct_modulus(t);
    const uint64_t bound = zt::check::exact_integer_limit(t) + 1;  // values 0..M-1 exact
    EXPECT_TRUE(prime(m)) << zt::dtype_name(t);
    EXPECT_LE(m, bound) << zt::dtype_name(t);
    for (uint64_t x = m + 1; x <= bound; ++x) EXPECT_FALSE(prime(x)) << zt::dtype_name(t) << " " << x;
  }
  EXPECT_EQ(zt::check::distinct_modulus(DType::kBF16), 257u);
  EXPECT_EQ(zt::check::distinct_modulus(DType::kF64), (uint64_t{1} << 53) - 111);
}

TEST(Pattern, DistinctValuesCatchShiftedAndMisroutedBlocks) {
  for (DType t : {DType::kBF16, DType::kF16, DType::kI8, DType::kF32, DType::kF64, DType::kI64}) {
    const zt::check::Pattern p(t, 4, 5);
    const size_t count = 300, e = zt::dtype_size(t);
    std::vector<std::byte> buf(2 * count * e);
    zt::check::fill_distinct(buf.data(), t, 2 * count, p, 1000);
    EXPECT_EQ(zt::check::count_wrong_distinct(buf.data(), t, 2 * count, p, 1000), 0) << zt::dtype_name(t);
    // The second block read as the first (wrong sender or receiver): every element wrong.
    EXPECT_EQ(zt::check::count_wrong_distinct(buf.data() + count * e, t, count, p, 1000),
              static_cast<int64_t>(count)) << zt::dtype_name(t);
    // Shifted by one element: every element wrong.
    EXPECT_EQ(zt::check::count_wrong_distinct(buf.data() + e, t, count, p, 1000),
              static_cast<int64_t>(count)) << zt::dtype_name(t);
  }
}

TEST(Environment, Warnings) {
  zt::check::RankInfo a;
  a.host = "n1";
  a.memlock_bytes = -1;
  a.shm_bytes = uint64_t{8} << 30;
  a.visible_gpus = 1;
  std::vector<zt::check::RankInfo> ranks = {a};
  EXPECT_TRUE(zt::check::environment_warnings(ranks).empty());
  zt::check::RankInfo b = a;
  b.host = "n2";
  b.memlock_bytes = 64 << 10;
  b.shm_bytes = 64 << 20;
  ranks = {a, b, b};  // n2: two ranks, one GPU
  const auto w = zt::check::environment_warnings(ranks);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NE(w[0].find("host n2: memlock limit is 64K"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("/dev/shm is 64M"), std::string::npos) << w[1];
  EXPECT_NE(w[2].find("2 ranks share 1 GPUs"), std::string::npos) << w[2];
}
