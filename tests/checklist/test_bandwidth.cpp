// Bus factors, algbw/busbw, row shapes and sweep sizes against hand-computed values.
#include <gtest/gtest.h>

#include "zt/check/bandwidth.hpp"

using zt::DType;
using zt::check::CheckOp;

TEST(Bandwidth, BusFactorsByHand) {
  // all_reduce 2(n-1)/n: n=4 -> 6/4, n=8 -> 14/8, n=1 -> 0.
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kAllReduce, 1), 0.0);
  // all_gather, reduce_scatter (n-1)/n: n=4 -> 0.75, n=3 -> 2/3.
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kAllGather, 3), 2.0 / 3.0);
  // broadcast, sendrecv: 1 whatever n.
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kBroadcast, 16), 1.0);
  EXPECT_DOUBLE_EQ(zt::check::bus_factor(CheckOp::kSendRecv, 16), 1.0);
}

TEST(Bandwidth, EveryOpsBusFactorByHandAtTwoThreeFourRanks) {
  // nccl-tests' factors worked out by hand: {n = 2, 3, 4}.
  struct Case { CheckOp op; double f2, f3, f4; };
  const Case cases[] = {{CheckOp::kAllReduce, 1.0, 4.0 / 3.0, 1.5},
                        {CheckOp::kAllGather, 0.5, 2.0 / 3.0, 0.75},
                        {CheckOp::kReduceScatter, 0.5, 2.0 / 3.0, 0.75},
                        {CheckOp::kBroadcast, 1.0, 1.0, 1.0},
                        {CheckOp::kSendRecv, 1.0, 1.0, 1.0},
                        {CheckOp::kAllToAll, 0.5, 2.0 / 3.0, 0.75}};
  ASSERT_EQ(std::size(cases), std::size(zt::check::kAllCheckOps));  // a new op needs its row
  for (const Case& c : cases) {
    EXPECT_DOUBLE_EQ(zt::check::bus_factor(c.op, 2), c.f2) << zt::check::check_op_name(c.op);
    EXPECT_DOUBLE_EQ(zt::check::bus_factor(c.op, 3), c.f3) << zt::check::check_op_name(c.op);
    EXPECT_DOUBLE_EQ(zt::check::bus_factor(c.op, 4), c.f4) << zt::check::check_op_name(c.op);
  }
  // all_to_all of 1 MiB per rank in 1 ms at n = 4: algbw 1.048576, busbw x 3/4.
  EXPECT_NEAR(zt::check::bus_bw_gbs(CheckOp::kAllToAll, 1048576, 0.001, 4), 0.786432, 1e-12);
}

TEST(Bandwidth, AlgbwAndBusbwByHand) {
  // 1e9 bytes in 0.5 s = 2 GB/s (GB = 1e9 B); all_reduce at n=4: busbw 2 * 1.5 = 3.
  EXPECT_DOUBLE_EQ(zt::check::alg_bw_gbs(1000000000, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(zt::check::bus_bw_gbs(CheckOp::kAllReduce, 1000000000, 0.5, 4), 3.0);
  // 256 MiB in 100 ms: 268435456 / 1e9 / 0.1 = 2.68435456 GB/s; x 14/8 at n=8.
  EXPECT_NEAR(zt::check::alg_bw_gbs(268435456, 0.1), 2.68435456, 1e-12);
  EXPECT_NEAR(zt::check::bus_bw_gbs(CheckOp::kAllReduce, 268435456, 0.1, 8), 4.69762048, 1e-12);
  // all_gather of 64 MiB total in 20 ms at n=4: 3.3554432 GB/s algbw, x 0.75 busbw.
  EXPECT_NEAR(zt::check::bus_bw_gbs(CheckOp::kAllGather, 67108864, 0.02, 4), 2.5165824, 1e-12);
  // sendrecv 1 MiB in 1 ms: 1.048576 GB/s both ways.
  EXPECT_NEAR(zt::check::bus_bw_gbs(CheckOp::kSendRecv, 1048576, 0.001, 2), 1.048576, 1e-12);
  EXPECT_EQ(zt::check::alg_bw_gbs(1024, 0.0), 0.0);
}

TEST(Bandwidth, RowShapes) {
  // all_reduce: count = bytes / 4, rounded down.
  auto s = zt::check::row_shape(CheckOp::kAllReduce, 1024, DType::kF32, 4);
  EXPECT_EQ(s.count, 256u);
  EXPECT_EQ(s.bytes, 1024u);
  s = zt::check::row_shape(CheckOp::kAllReduce, 10, DType::kF32, 4);
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.bytes, 8u);
  // all_gather: count per rank = 1024 / (4 * 4) = 64; S = total = 1024.
  s = zt::check::row_shape(CheckOp::kAllGather, 1024, DType::kF32, 4);
  EXPECT_EQ(s.count, 64u);
  EXPECT_EQ(s.bytes, 1024u);
  // reduce_scatter, 3 ranks, 1000 B of float: 83 per rank, S = 83 * 3 * 4 = 996.
  s = zt::check::row_shape(CheckOp::kReduceScatter, 1000, DType::kF32, 3);
  EXPECT_EQ(s.count, 83u);
  EXPECT_EQ(s.bytes, 996u);
  // Fewer than one element per rank: count 0 (the sweep skips the row).
  s = zt::check::row_shape(CheckOp::kAllGather, 8, DType::kF32, 4);
  EXPECT_EQ(s.count, 0u);
  // all_to_all, 3 ranks, 1000 B of float: 83 per peer, S = 83 * 3 * 4 = 996; at 4 ranks
  // 8 B is under one float per peer.
  s = zt::check::row_shape(CheckOp::kAllToAll, 1000, DType::kF32, 3);
  EXPECT_EQ(s.count, 83u);
  EXPECT_EQ(s.bytes, 996u);
  EXPECT_EQ(zt::check::row_shape(CheckOp::kAllToAll, 8, DType::kF32, 4).count, 0u);
  // broadcast of doubles.
  s = zt::check::row_shape(CheckOp::kBroadcast, 64, DType::kF64, 4);
  EXPECT_EQ(s.count, 8u);
}

TEST(Bandwidth, SweepSizes) {
  EXPECT_EQ(zt::check::sweep_sizes(8, 64, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(zt::check::sweep_sizes(8, 100, 4), (std::vector<uint64_t>{8, 32}));
  EXPECT_EQ(zt::check::sweep_sizes(1, 1, 2), (std::vector<uint64_t>{1}));
  // 8 .. 256M by 2: 2^3 .. 2^28, 26 sizes.
  const auto full = zt::check::sweep_sizes(8, uint64_t{256} << 20, 2);
  ASSERT_EQ(full.size(), 26u);
  EXPECT_EQ(full.back(), uint64_t{268435456});
  // No overflow at the top of the range: 2^0 .. 2^63.
  const auto huge = zt::check::sweep_sizes(1, ~uint64_t{0}, 2);
  EXPECT_EQ(huge.size(), 64u);
  EXPECT_EQ(huge.back(), uint64_t{1} << 63);
}
