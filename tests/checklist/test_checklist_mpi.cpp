// The checklist end-to-end on MpiComm (np 1, 2, 4): every op verified (#wrong == 0),
// reports written and read back; then through a Comm that corrupts one all_reduce
// element per call: the report must show it and the exit code must be 1.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "corrupting_comm.hpp"
#include "zt/check/checklist.hpp"
#include "zt/check/environment.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/comm/mpi_comm.hpp"
#include "zt/core/log.hpp"
#include "zt/runtime/runtime.hpp"

using zt::check::CheckOp;

namespace {

zt::check::CheckOptions small_sweep() {
  zt::check::CheckOptions o;  // every op of the table
  o.min_bytes = 8;
  o.max_bytes = 1 << 20;
  o.step_factor = 4;
  o.iters = 2;
  o.warmup = 1;
  return o;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A directory name chosen by rank 0 and shared with every rank.
std::filesystem::path shared_temp_dir(const std::string& tag) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  long pid = rank == 0 ? static_cast<long>(::getpid()) : 0;
  MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return std::filesystem::temp_directory_path() /
         ("zt_checklist_" + tag + "_np" + std::to_string(world_size()) + "_" + std::to_string(pid));
}

}  // namespace

TEST(ChecklistMpi, EveryOpVerifiedAndReportsWritten) {
  zt::runtime::Runtime rt;
  auto control = zt::comm::make_mpi_comm(rt.world());
  auto bench = zt::comm::make_mpi_comm(rt.world());
  zt::check::Environment env = zt::check::collect_environment(rt, *control);
  ASSERT_EQ(env.ranks.size(), static_cast<size_t>(world_size()));
  for (size_t r = 0; r < env.ranks.size(); ++r) EXPECT_EQ(env.ranks[r].rank, static_cast<int>(r));

  const zt::check::Report report = zt::check::run_checklist(*bench, *control, small_sweep(), env, nullptr);
  const int n = world_size();
  // Sizes 8, 32, ..., 512K by 4: 9 rows per op, minus the per-rank ops' rows with fewer
  // than one float per rank (8 B at n = 4; 8 B is 2 floats, enough for n <= 2).
  size_t expected_rows = 0;
  for (CheckOp op : zt::check::kAllCheckOps) {
    const bool per_rank = op == CheckOp::kAllGather || op == CheckOp::kReduceScatter || op == CheckOp::kAllToAll;
    for (uint64_t size = 8; size <= (1u << 20); size *= 4)
      if (!(per_rank && size < 4u * n)) ++expected_rows;
  }
  EXPECT_EQ(report.rows.size(), expected_rows);
  for (const auto& row : report.rows) {
    for (const auto* p : {&row.out_of_place, &row.in_place}) {
      if (!p->ran) continue;
      EXPECT_EQ(p->nwrong, 0) << zt::check::check_op_name(row.op) << " " << row.size;
      EXPECT_GT(p->time_us, 0.0);
      EXPECT_GE(p->slowest_us, p->time_us);  // the max over ranks >= the mean
      EXPECT_GE(p->slowest_rank, 0);
      EXPECT_LT(p->slowest_rank, n);
    }
  }
  EXPECT_NE(report.verdict, zt::check::Verdict::kFail);
  EXPECT_EQ(zt::check::exit_code(report), 0);

  const auto dir = shared_temp_dir("e2e");
  if (rt.topology().world_rank == 0) {
    zt::check::write_report_files(report, zt::check::prepare_report_dir(dir.string()));
    std::ifstream json_in(dir / "report.json");
    const nlohmann::json j = nlohmann::json::parse(json_in);
    EXPECT_EQ(j["config"]["nranks"], n);
    EXPECT_EQ(j["results"].size(), expected_rows);
    EXPECT_EQ(j["results"][0]["op"], "all_reduce");
    EXPECT_EQ(j["environment"]["ranks"].size(), static_cast<size_t>(n));
    for (const auto& row : j["results"]) {
      for (const char* place : {"out_of_place", "in_place"}) {
        if (!row[place].is_null()) {
          EXPECT_EQ(row[place]["nwrong"], 0);
        }
      }
    }
    std::ifstream md_in(dir / "report.md");
    std::stringstream md;
    md << md_in.rdbuf();
    EXPECT_NE(md.str().find("### all_reduce"), std::string::npos);
    EXPECT_NE(md.str().find("### all_to_all"), std::string::npos);
    EXPECT_EQ(j["results"].back()["op"], std::string(zt::check::check_op_name(zt::check::kAllCheckOps.back())));
    EXPECT_NE(md.str().find("## Verdict"), std::string::npos);
    std::filesystem::remove_all(dir);
  }
}

TEST(ChecklistMpi, CorruptedAllReduceIsReportedAndFails) {
  zt::runtime::Runtime rt;
  auto control = zt::comm::make_mpi_comm(rt.world());
  const int n = world_size();
  // The last rank adds 1 to element 0 of every all_reduce result it receives.
  auto bench = zt::testing::make_corrupting_comm(zt::comm::make_mpi_comm(rt.world()), n - 1);
  zt::check::CheckOptions o = small_sweep();
  o.ops = {CheckOp::kAllReduce, CheckOp::kAllGather};
  const zt::check::Report report = zt::check::run_checklist(*bench, *control, o, {}, nullptr);

  int all_reduce_rows = 0;
  for (const auto& row : report.rows) {
    if (row.op == CheckOp::kAllReduce) {
      ++all_reduce_rows;
      EXPECT_EQ(row.out_of_place.nwrong, 1) << row.size;  // one element on one rank
      EXPECT_EQ(row.in_place.nwrong, 1) << row.size;
    } else {
      EXPECT_EQ(row.out_of_place.nwrong, 0);
      EXPECT_EQ(row.in_place.nwrong, 0);
    }
  }
  EXPECT_EQ(all_reduce_rows, 9);  // 8, 32, ..., 512K (8 * 4^k <= 1M)
  EXPECT_EQ(report.verdict, zt::check::Verdict::kFail);
  EXPECT_EQ(zt::check::exit_code(report), 1);
  ASSERT_FALSE(report.failures.empty());
  EXPECT_NE(report.failures[0].find("all_reduce out-of-place at 8 B: 1 wrong elements"), std::string::npos)
      << report.failures[0];
  const nlohmann::json j = zt::check::report_json(report);
  EXPECT_EQ(j["results"][0]["out_of_place"]["nwrong"], 1);
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["exit_code"], 1);
}

TEST(ChecklistMpi, CorruptedAllToAllIsReportedAndFails) {
  zt::runtime::Runtime rt;
  auto control = zt::comm::make_mpi_comm(rt.world());
  const int n = world_size();
  // Rank 0 adds 1 to the first element it receives from the last rank, every all_to_all.
  auto bench = zt::testing::make_corrupting_comm(zt::comm::make_mpi_comm(rt.world()), 0);
  zt::check::CheckOptions o = small_sweep();
  o.ops = {CheckOp::kAllToAll};
  const zt::check::Report report = zt::check::run_checklist(*bench, *control, o, {}, nullptr);
  ASSERT_FALSE(report.rows.empty());
  for (const auto& row : report.rows) {
    EXPECT_EQ(row.out_of_place.nwrong, 1) << row.size;  // one element on one rank
    EXPECT_FALSE(row.in_place.ran);
  }
  EXPECT_EQ(zt::check::exit_code(report), 1);
  ASSERT_FALSE(report.failures.empty());
  const std::string first = zt::strf("all_to_all out-of-place at %d B: 1 wrong elements", n == 4 ? 32 : 8);
  EXPECT_NE(report.failures[0].find(first), std::string::npos) << report.failures[0];
  const nlohmann::json j = zt::check::report_json(report);
  EXPECT_EQ(j["results"][0]["op"], "all_to_all");
  EXPECT_EQ(j["results"][0]["out_of_place"]["nwrong"], 1);
  EXPECT_EQ(j["verdict"], "FAIL");
}
