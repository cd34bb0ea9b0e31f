// The pair matrix and the straggler loop on MpiComm (np 4) through a Comm that delays one
// link or one rank: the report must name that pair, node and rank. Each rank stands for
// a node of its own (host "h<rank>").
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>

#include "delaying_comm.hpp"
#include "zt/check/checklist.hpp"
#include "zt/check/stages.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/core/log.hpp"

using namespace std::chrono_literals;

namespace {

std::vector<zt::check::RankInfo> one_rank_per_node(int n) {
  std::vector<zt::check::RankInfo> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ranks[static_cast<size_t>(r)].rank = r;
    ranks[static_cast<size_t>(r)].node = r;
    ranks[static_cast<size_t>(r)].host = zt::strf("h%d", r);
  }
  return ranks;
}

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

}  // namespace

// Both schedules: one pair at a time, and rounds of disjoint pairs. 8 MiB exchanges take
// longer than a scheduler time slice, so on an oversubscribed host (4 busy ranks on 2
// cores) untouched pairs stay within a few x of each other; the delayed links add 200 ms
// per exchange, 10x and more. A node is slow under 0.2 x the median (the default 0.5 is
// for real clusters).
constexpr double kSlowFraction = 0.2;
class SlowLink : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Schedules, SlowLink, ::testing::Values(false, true));

TEST_P(SlowLink, NamesPairAndNode) {
  const int n = world_size();
  if (n < 3) GTEST_SKIP() << "needs 3 ranks to tell which end of a slow pair is slow";
  const int slow = n - 2;  // every link to this node is slow, both ways
  zt::testing::Delays d;
  d.send_delay = 200ms;
  for (int p = 0; p < n; ++p)
    if (world_rank() == slow ? p != slow : p == slow) d.slow_peers.push_back(p);
  auto control = zt::comm::make_mpi_comm(MPI_COMM_WORLD);
  auto bench = zt::testing::make_delaying_comm(zt::comm::make_mpi_comm(MPI_COMM_WORLD), d);
  const auto ranks = one_rank_per_node(n);
  const zt::check::PairMatrix m = zt::check::run_pairs(*bench, *control, ranks, 8 << 20, 3, GetParam(), kSlowFraction);
  ASSERT_TRUE(m.ran);
  EXPECT_EQ(m.rounds, GetParam());
  EXPECT_TRUE(m.slow_a == slow || m.slow_b == slow) << m.slow_a << "-" << m.slow_b;
  std::string gbs;  // the matrix, for the failure message
  for (const auto& row : m.gbs)
    for (double g : row) gbs += zt::strf("%.4f ", g);
  EXPECT_EQ(m.slow_nodes, std::vector<int>{slow}) << "GB/s: " << gbs;
  // 8 MiB in >= 200 ms is at most 42 MB/s; the same exchange without delay is far faster.
  for (int p = 0; p < n; ++p)
    if (p != slow) {
      EXPECT_LT(m.gbs[static_cast<size_t>(slow)][static_cast<size_t>(p)], 8388608 / 0.2 / 1e9);
    }

  // The per-node verdicts: only the slow node is named.
  zt::check::Report report;
  report.nranks = n;
  report.environment.ranks = ranks;
  report.pairs = m;
  zt::check::evaluate_report(report);
  ASSERT_EQ(report.node_verdicts.size(), static_cast<size_t>(n));
  for (const auto& v : report.node_verdicts) {
    const std::string line = zt::check::node_verdict_line(v);
    if (v.node == slow) {
      EXPECT_EQ(v.verdict, zt::check::Verdict::kWarn) << line;
      EXPECT_NE(line.find(zt::strf("node %d (h%d): WARN", slow, slow)), std::string::npos) << line;
      EXPECT_NE(line.find("slow network"), std::string::npos) << line;
    } else {
      EXPECT_EQ(v.verdict, zt::check::Verdict::kPass) << line;
    }
  }
}

TEST(StagesMpi, StragglerIsNamed) {
  const int n = world_size();
  if (n < 2) GTEST_SKIP() << "a straggler needs others to be slower than";
  const int late = n - 1;
  zt::testing::Delays d;
  d.slow_all_reduce = world_rank() == late;
  d.reduce_delay = 30ms;
  auto control = zt::comm::make_mpi_comm(MPI_COMM_WORLD);
  auto bench = zt::testing::make_delaying_comm(zt::comm::make_mpi_comm(MPI_COMM_WORLD), d);
  const zt::check::Stragglers s = zt::check::run_stragglers(*bench, *control, 4096, 4, 1.5);
  ASSERT_TRUE(s.ran);
  ASSERT_EQ(s.rank_us.size(), static_cast<size_t>(n));
  EXPECT_GE(s.rank_us[static_cast<size_t>(late)], 30000.0);  // every round sleeps 30 ms
  EXPECT_EQ(std::max_element(s.rank_us.begin(), s.rank_us.end()) - s.rank_us.begin(), late);
  EXPECT_NE(std::find(s.ranks.begin(), s.ranks.end(), late), s.ranks.end());

  zt::check::Report report;
  report.nranks = n;
  report.environment.ranks = one_rank_per_node(n);
  report.stragglers = s;
  zt::check::evaluate_report(report);
  const std::string line = zt::check::node_verdict_line(report.node_verdicts[static_cast<size_t>(late)]);
  EXPECT_NE(line.find(zt::strf("rank %d straggles", late)), std::string::npos) << line;
  EXPECT_EQ(report.verdict, zt::check::Verdict::kWarn);
}
