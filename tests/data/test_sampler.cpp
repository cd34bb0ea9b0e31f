// The sampler: split, permutation, determinism, disjointness across ranks, the same
// global batch for any decomposition, exact resume.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "zt/core/error.hpp"
#include "zt/data/sampler.hpp"

using zt::data::Range;
using zt::data::Sampler;

TEST(Split, TailIsTheLastFraction) {
  const auto s = zt::data::split_tail(1000, 0.1);
  EXPECT_EQ(s.train.begin, 0u);
  EXPECT_EQ(s.train.end, 900u);
  EXPECT_EQ(s.eval.begin, 900u);
  EXPECT_EQ(s.eval.end, 1000u);
  const auto t = zt::data::split_tail(1115394, 0.1);  // tinyshakespeare: floor(111539.4)
  EXPECT_EQ(t.eval.size(), 111539u);
  EXPECT_EQ(zt::data::split_tail(10, 0.0).eval.size(), 0u);
  EXPECT_THROW(zt::data::split_tail(10, 1.0), zt::Error);
}

TEST(Permute, IsABijectionForManySizes) {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 100ull, 1000ull, 4097ull}) {
    for (uint64_t key : {0ull, 42ull}) {
      std::vector<uint64_t> out(n);
      for (uint64_t i = 0; i < n; ++i) out[i] = zt::data::permute(i, n, key);
      std::vector<uint64_t> sorted = out;
      std::sort(sorted.begin(), sorted.end());
      std::vector<uint64_t> iota(n);
      std::iota(iota.begin(), iota.end(), 0);
      EXPECT_EQ(sorted, iota) << "n=" << n;
    }
  }
  // Different keys give different orders (a permutation, not the identity).
  int same = 0, fixed = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    same += zt::data::permute(i, 1000, 1) == zt::data::permute(i, 1000, 2);
    fixed += zt::data::permute(i, 1000, 1) == i;
  }
  EXPECT_LT(same, 20);
  EXPECT_LT(fixed, 20);
}

TEST(Sampler, WindowsStayInRangeAndAreSeqAligned) {
  const Range r{100, 100 + 10'001};
  const Sampler s(r, 64, 8, 7);
  // W = (10001 - 1) / 64 = 156, one given up for the shift: 155; slack = 16 + 64 = 80.
  EXPECT_EQ(s.windows(), 155u);
  EXPECT_EQ(s.steps_per_epoch(), 19u);
  for (uint64_t step = 0; step < 100; ++step)
    for (size_t j = 0; j < 8; ++j) {
      const size_t st = s.start(step, j);
      EXPECT_GE(st, r.begin);
      EXPECT_LE(st + 64, r.end - 1) << "the target token must be inside the range";
    }
  EXPECT_THROW(Sampler(Range{0, 8 * 64}, 64, 8, 1), zt::InputError);  // one token short
  EXPECT_NO_THROW(Sampler(Range{0, 8 * 64 + 1}, 64, 8, 1));
}

TEST(Sampler, DeterministicAndResumableFromAnyStep) {
  const Range r{0, 50'000};
  const Sampler a(r, 32, 16, 1234);
  std::vector<size_t> run;
  for (uint64_t step = 0; step < 300; ++step)
    for (size_t j = 0; j < 16; ++j) run.push_back(a.start(step, j));
  // A fresh sampler asked for step 217 directly (a resumed job) gives the same sequences.
  const Sampler b(r, 32, 16, 1234);
  for (uint64_t step : {217ull, 0ull, 299ull, 96ull})
    for (size_t j = 0; j < 16; ++j) EXPECT_EQ(b.start(step, j), run[step * 16 + j]);
  // Another seed gives another order.
  const Sampler c(r, 32, 16, 99);
  int same = 0;
  for (size_t j = 0; j < 16; ++j) same += c.start(5, j) == run[5 * 16 + j];
  EXPECT_LT(same, 4);
}

TEST(Sampler, RanksGetDisjointSlicesAndNoWindowRepeatsInAnEpoch) {
  const Range r{0, 20'000};
  const int world = 4;
  const size_t micro_batch = 3, accum = 2, seq = 40;
  const size_t global = micro_batch * world * accum;  // 24
  const Sampler s(r, seq, global, 5);
  const uint64_t epoch_steps = s.steps_per_epoch();
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<size_t> seen_in_epoch;
    for (uint64_t step = epoch * epoch_steps; step < (epoch + 1) * epoch_steps; ++step) {
      std::vector<std::vector<size_t>> per_rank(world);
      for (int m = 0; m < static_cast<int>(accum); ++m)
        for (int rank = 0; rank < world; ++rank)
          for (size_t i = 0; i < micro_batch; ++i)
            per_rank[rank].push_back(s.start(step, m, rank, world, micro_batch, i));
      // Token spans [start, start + seq) of different ranks never overlap.
      std::vector<size_t> all;
      for (const auto& v : per_rank) all.insert(all.end(), v.begin(), v.end());
      std::sort(all.begin(), all.end());
      ASSERT_EQ(all.size(), global);
      for (size_t k = 1; k < all.size(); ++k) ASSERT_GE(all[k] - all[k - 1], seq) << "step " << step;
      for (size_t st : all) EXPECT_TRUE(seen_in_epoch.insert(st).second) << "repeat in epoch";
    }
  }
}

TEST(Sampler, SameGlobalBatchForAnyDecomposition) {
  // 1 rank x micro 8, 2 ranks x micro 4, 2 ranks x micro 2 x accum 2, 4 ranks x micro 2:
  // the same multiset of sequences per step.
  const Range r{0, 30'000};
  const Sampler s(r, 50, 8, 11);
  struct Shape { int world; size_t micro; int accum; };
  for (uint64_t step : {0ull, 3ull, 70ull}) {
    std::vector<std::vector<size_t>> results;
    for (Shape sh : {Shape{1, 8, 1}, Shape{2, 4, 1}, Shape{2, 2, 2}, Shape{4, 2, 1}, Shape{1, 1, 8}}) {
      std::vector<size_t> v;
      for (int m = 0; m < sh.accum; ++m)
        for (int rank = 0; rank < sh.world; ++rank)
          for (size_t i = 0; i < sh.micro; ++i)
            v.push_back(s.start(step, m, rank, sh.world, sh.micro, i));
      std::sort(v.begin(), v.end());
      results.push_back(v);
    }
    for (size_t k = 1; k < results.size(); ++k) EXPECT_EQ(results[k], results[0]) << k;
  }
  // The explicit index formula: rank 1, micro-step 0, element 2 of micro 4 on 2 ranks is j = 6.
  EXPECT_EQ(zt::data::batch_index(0, 1, 2, 4, 2), 6u);
  EXPECT_EQ(zt::data::batch_index(1, 0, 2, 2, 1), 5u);
}

TEST(EvalWindows, SequentialAndWrapping) {
  const zt::data::EvalWindows e(Range{1000, 1000 + 330}, 64);
  EXPECT_EQ(e.windows(), 5u);  // (330 - 1) / 64
  EXPECT_EQ(e.start(0), 1000u);
  EXPECT_EQ(e.start(4), 1000u + 256u);
  EXPECT_EQ(e.start(5), 1000u);
  EXPECT_THROW(zt::data::EvalWindows(Range{0, 64}, 64), zt::InputError);
}

// Rows (instruction data): every sequence is one whole row of seq_len + 1 tokens, inside
// the range, each row at most once per epoch and every row once in an epoch that uses
// them all; the split holds out whole rows; the eval windows step by rows.
namespace zt::data {
namespace {
TEST(Sampler, RowsAreWholeRowsOncePerEpoch) {
  const size_t seq = 31, row = seq + 1, rows = 40, global = 8;
  const Split sp = split_tail_rows(rows * row, row, 0.1);
  EXPECT_EQ(sp.eval.size(), 4 * row);  // floor(0.1 x 40) rows
  // Two-row groups (pairs, KTO examples) are never split: floor(0.1 x 150) = 15 rows hold
  // out 14, the train range ends on a group's end.
  const Split pairs = split_tail_rows(150 * row, row, 0.1, 2);
  EXPECT_EQ(pairs.eval.size(), 14 * row);
  EXPECT_EQ(pairs.train.size() % (2 * row), 0u);
  EXPECT_EQ(split_tail_rows(150 * row, row, 0.1).eval.size(), 15 * row);
  EXPECT_EQ(sp.train.end, sp.eval.begin);
  const Sampler s = Sampler::rows(sp.train, seq, global, 3);
  EXPECT_EQ(s.windows(), 36u);
  EXPECT_EQ(s.steps_per_epoch(), 4u);  // floor(36 / 8)
  for (uint64_t epoch = 0; epoch < 2; ++epoch) {
    std::set<size_t> seen;
    for (uint64_t step = epoch * 4; step < epoch * 4 + 4; ++step)
      for (size_t j = 0; j < global; ++j) {
        const size_t st = s.start(step, j);
        EXPECT_EQ(st % row, 0u) << "a sequence starts at a row";
        EXPECT_LE(st + row, sp.train.end);
        EXPECT_TRUE(seen.insert(st).second) << "row repeated in epoch " << epoch;
      }
    EXPECT_EQ(seen.size(), 32u);
  }
  EXPECT_THROW(Sampler::rows({0, 7 * row}, seq, global, 3), InputError);  // 7 rows < 8
  const EvalWindows ev(sp.eval, seq, row);
  EXPECT_EQ(ev.windows(), 4u);
  EXPECT_EQ(ev.start(5), sp.eval.begin + row);  // wraps: 5 mod 4
}
}  // namespace
}  // namespace zt::data
