// The pure parts of the pair matrix and straggler stages, on hand-made numbers, and the
// baseline file reader.
#include <gtest/gtest.h>

#include "support/expect_error.hpp"
#include "zt/check/baseline.hpp"
#include "zt/check/checklist.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

using zt::check::CheckOp;

namespace {

// A symmetric matrix from the upper triangle.
zt::check::PairMatrix matrix(std::vector<std::vector<double>> upper) {
  zt::check::PairMatrix m;
  const size_t n = upper.size() + 1;
  m.gbs.assign(n, std::vector<double>(n, 0.0));
  for (size_t a = 0; a < upper.size(); ++a)
    for (size_t k = 0; k < upper[a].size(); ++k) {
      const size_t b = a + 1 + k;
      m.gbs[a][b] = m.gbs[b][a] = upper[a][k];
    }
  return m;
}

}  // namespace

TEST(Pairs, SlowestPairAndSlowNode) {
  // 4 nodes; every pair with node 2 runs at ~1 GB/s, the others at ~10.
  auto m = matrix({{10.0, 1.1, 9.0}, {1.0, 11.0}, {0.9}});
  zt::check::analyse_pairs(m);
  EXPECT_EQ(m.slow_a, 2);
  EXPECT_EQ(m.slow_b, 3);
  EXPECT_DOUBLE_EQ(m.slowest_gbs, 0.9);
  // Best pair per node: 10, 11, 1.1, 11 -> median (10 + 11) / 2.
  EXPECT_DOUBLE_EQ(m.reference_gbs, 10.5);
  EXPECT_EQ(m.slow_nodes, std::vector<int>{2});
}

TEST(Pairs, HealthyAndTwoNodeMatrices) {
  auto healthy = matrix({{10.0, 9.0}, {9.5}});
  zt::check::analyse_pairs(healthy);
  EXPECT_EQ(healthy.slow_a, 0);
  EXPECT_EQ(healthy.slow_b, 2);
  EXPECT_TRUE(healthy.slow_nodes.empty());
  auto two = matrix({{0.1}});
  zt::check::analyse_pairs(two);
  EXPECT_EQ(two.slow_a, 0);
  EXPECT_EQ(two.slow_b, 1);
  EXPECT_TRUE(two.slow_nodes.empty());  // which end is slow cannot be told
}

TEST(Pairs, LeadersAreLowestRankPerNode) {
  std::vector<zt::check::RankInfo> ranks(5);
  const int nodes[] = {1, 0, 1, 0, 2};
  for (int r = 0; r < 5; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].node = nodes[r];
  }
  EXPECT_EQ(zt::check::node_leaders(ranks), (std::vector<int>{1, 0, 4}));
}

TEST(Stragglers, AboveOneAndAHalfMedian) {
  zt::check::Stragglers s;
  s.factor = 1.5;
  s.rank_us = {100.0, 110.0, 165.1, 90.0, 400.0};  // median 110; limit 165
  zt::check::find_stragglers(s);
  EXPECT_DOUBLE_EQ(s.median_us, 110.0);
  EXPECT_EQ(s.ranks, (std::vector<int>{2, 4}));
  s.rank_us = {100.0, 120.0, 170.0, 80.0};  // even: median (100 + 120) / 2 = 110
  zt::check::find_stragglers(s);
  EXPECT_DOUBLE_EQ(s.median_us, 110.0);
  EXPECT_EQ(s.ranks, (std::vector<int>{2}));
}

TEST(Baseline, ReadsAReport) {
  const auto b = zt::check::parse_baseline_text(R"({
    "config": {"nranks": 4, "ops": ["all_reduce", "sendrecv"]},
    "results": [
      {"op": "all_reduce", "nominal_size": 1024,
       "out_of_place": {"bus_bw": 2.0}, "in_place": {"bus_bw": 1.5}},
      {"op": "sendrecv", "nominal_size": 1024, "out_of_place": {"bus_bw": 3.0}, "in_place": null}],
    "pairs": {"ran": true, "slowest_gbs": 4.25}})", "b.json");
  EXPECT_EQ(b.nranks, 4);
  EXPECT_EQ(b.ops, (std::vector<CheckOp>{CheckOp::kAllReduce, CheckOp::kSendRecv}));
  ASSERT_EQ(b.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(b.rows[0].bus_bw, 1.5);  // the worse placement
  EXPECT_DOUBLE_EQ(b.rows[1].bus_bw, 3.0);
  EXPECT_DOUBLE_EQ(b.slowest_pair_gbs, 4.25);
  EXPECT_NO_THROW(zt::check::check_baseline_world(b, 4));
  EXPECT_NO_THROW(zt::check::check_baseline_ops(b, {CheckOp::kAllReduce, CheckOp::kSendRecv}));
}

TEST(Baseline, MismatchesAndBadFilesAreBadInput) {
  const auto b = zt::check::parse_baseline_text(
      R"({"config": {"nranks": 8, "ops": ["all_reduce"]}, "results": []})", "old.json");
  zt::testing::expect_input_error([&] { zt::check::check_baseline_world(b, 4); },
                                  {"baseline file old.json comes from a 8-rank run, this run has 4 ranks"});
  zt::testing::expect_input_error([&] { zt::check::check_baseline_ops(b, {CheckOp::kAllReduce, CheckOp::kBroadcast}); },
                                  {"measured ops all_reduce, this run measures all_reduce,broadcast"});
  zt::testing::expect_input_error([] { zt::check::parse_baseline_text("{oops", "x.json"); },
                                  {"baseline file x.json: not JSON"});
  zt::testing::expect_input_error([] { zt::check::parse_baseline_text(R"({"config": {}})", "y.json"); },
                                  {"config.nranks"});
  zt::testing::expect_input_error(
      [] { zt::check::parse_baseline_text(R"({"config": {"nranks": 2, "ops": ["alltoall"]}, "results": []})", "z.json"); },
      {"alltoall"});
  zt::testing::expect_input_error([] { zt::check::parse_baseline_file("/nonexistent/report.json"); },
                                  {"baseline file '/nonexistent/report.json': not found"});
}

TEST(PairsGate, TheNodeInEveryFailingPairIsBlamed) {
  // 4 nodes; node 1's links run at 1 GB/s, the rest at 10; the gate asks for 5.
  zt::check::Report report;
  report.nranks = 4;
  for (int r = 0; r < 4; ++r) {
    zt::check::RankInfo info;
    info.rank = r;
    info.node = r;
    info.host = zt::strf("n%d", r);
    report.environment.ranks.push_back(info);
  }
  report.pairs = matrix({{1.0, 10.0, 10.0}, {1.0, 1.0}, {10.0}});
  report.pairs.ran = true;
  report.pairs.leaders = {0, 1, 2, 3};
  zt::check::analyse_pairs(report.pairs);
  report.options.thresholds = zt::check::parse_thresholds_text("[pairs]\nmin_bw = \"5 GB/s\"\n", "p.toml");
  zt::check::evaluate_report(report);
  EXPECT_EQ(report.verdict, zt::check::Verdict::kFail);
  ASSERT_EQ(report.node_verdicts.size(), 4u);
  EXPECT_EQ(report.node_verdicts[1].verdict, zt::check::Verdict::kFail);
  for (int k : {0, 2, 3}) EXPECT_EQ(report.node_verdicts[static_cast<size_t>(k)].verdict, zt::check::Verdict::kPass) << k;
  const std::string line = zt::check::node_verdict_line(report.node_verdicts[1]);
  EXPECT_NE(line.find("node 1 (n1): FAIL"), std::string::npos) << line;
  EXPECT_NE(line.find("0-1 1.00 GB/s, 1-2 1.00 GB/s, 1-3 1.00 GB/s"), std::string::npos) << line;
  ASSERT_FALSE(report.gates.empty());
  EXPECT_EQ(report.gates[0].name, "pairs");
  EXPECT_DOUBLE_EQ(report.gates[0].measured, 1.0);
}

TEST(Pairs, RoundsCoverEveryPairOnceWithoutSharingANode) {
  for (int n = 2; n <= 9; ++n) {
    const auto rounds = zt::check::pair_rounds(n);
    EXPECT_EQ(rounds.size(), static_cast<size_t>(n % 2 == 0 ? n - 1 : n)) << n;
    std::vector<std::vector<int>> seen(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(n), 0));
    for (const auto& round : rounds) {
      std::vector<int> busy(static_cast<size_t>(n), 0);
      for (const auto& [a, b] : round) {
        ASSERT_LT(a, b);
        ASSERT_LT(b, n);
        ++seen[static_cast<size_t>(a)][static_cast<size_t>(b)];
        EXPECT_EQ(++busy[static_cast<size_t>(a)], 1) << "n " << n << " node " << a;
        EXPECT_EQ(++busy[static_cast<size_t>(b)], 1) << "n " << n << " node " << b;
      }
    }
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) EXPECT_EQ(seen[static_cast<size_t>(a)][static_cast<size_t>(b)], 1) << n;
  }
  EXPECT_TRUE(zt::check::pair_rounds(1).empty());
}
