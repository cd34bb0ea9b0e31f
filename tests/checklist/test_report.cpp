// Gates and verdict on hand-made rows; report.json keys; report files and symlinks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "zt/check/checklist.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/core/error.hpp"

using zt::check::CheckOp;
using zt::check::GateStatus;
using zt::check::Verdict;

namespace {

zt::check::Placement placement(double time_us, double bus_bw, int64_t nwrong = 0) {
  zt::check::Placement p;
  p.ran = true;
  p.time_us = time_us;
  p.alg_bw = bus_bw / 1.5;
  p.bus_bw = bus_bw;
  p.nwrong = nwrong;
  p.slowest_rank = 1;
  p.slowest_us = time_us * 1.1;
  return p;
}

// all_reduce rows at 8 B (10 us) and 64M (busbw 10 GB/s out-of-place, 12 in-place).
zt::check::Report report_with_rows() {
  zt::check::Report r;
  r.options.ops = {CheckOp::kAllReduce};
  r.backend = "mpi";
  r.nranks = 4;
  zt::check::Row small;
  small.op = CheckOp::kAllReduce;
  small.nominal_size = small.size = 8;
  small.count = 2;
  small.out_of_place = placement(10.0, 0.001);
  small.in_place = placement(12.0, 0.001);
  zt::check::Row large = small;
  large.nominal_size = large.size = uint64_t{64} << 20;
  large.count = large.size / 4;
  large.out_of_place = placement(10000.0, 10.0);
  large.in_place = placement(9000.0, 12.0);
  r.rows = {small, large};
  return r;
}

zt::check::Report gated(const std::string& toml) {
  zt::check::Report r = report_with_rows();
  r.options.thresholds = zt::check::parse_thresholds_text(toml, "t.toml");
  zt::check::evaluate_report(r);
  return r;
}

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("zt_test_report_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace

TEST(Gates, PassWarnFail) {
  // The busbw gate takes the worse placement: 10 GB/s.
  auto r = gated("[all_reduce]\nsize = \"64M\"\nmin_busbw_gbs = 8.0\nwarn_band = 0.1\n");
  ASSERT_EQ(r.gates.size(), 1u);
  EXPECT_EQ(r.gates[0].status, GateStatus::kPass);
  EXPECT_DOUBLE_EQ(r.gates[0].measured, 10.0);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  EXPECT_EQ(zt::check::exit_code(r), 0);

  r = gated("[all_reduce]\nsize = \"64M\"\nmin_busbw_gbs = 9.5\nwarn_band = 0.1\n");
  EXPECT_EQ(r.gates[0].status, GateStatus::kWarn);  // 9.5 <= 10 < 10.45
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_EQ(zt::check::exit_code(r), 0);

  r = gated("[all_reduce]\nsize = \"64M\"\nmin_busbw_gbs = 11.0\n");  // in-place alone would pass
  EXPECT_EQ(r.gates[0].status, GateStatus::kFail);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(zt::check::exit_code(r), 1);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("all_reduce busbw @ 64M"), std::string::npos) << r.failures[0];
}

TEST(Gates, LatencyTakesTheWorsePlacement) {
  auto r = gated("[all_reduce]\nlatency_size = 8\nmax_latency_us = 11.0\nwarn_band = 0\n");
  ASSERT_EQ(r.gates.size(), 1u);
  EXPECT_DOUBLE_EQ(r.gates[0].measured, 12.0);
  EXPECT_EQ(r.gates[0].status, GateStatus::kFail);
  r = gated("[all_reduce]\nlatency_size = 8\nmax_latency_us = 20.0\nwarn_band = 0.25\n");
  EXPECT_EQ(r.gates[0].status, GateStatus::kPass);  // 12 <= 15
}

TEST(Gates, OpNotRunIsANoteAndMissingRowFails) {
  auto r = gated("[broadcast]\nsize = \"64M\"\nmin_busbw_gbs = 1.0\n");
  EXPECT_TRUE(r.gates.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("broadcast"), std::string::npos);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  r = gated("[all_reduce]\nsize = 16\nmin_busbw_gbs = 1e-9\n");  // no row at 16 B
  EXPECT_EQ(r.gates[0].status, GateStatus::kFail);
  EXPECT_EQ(r.verdict, Verdict::kFail);
}

TEST(Verdict, WrongElementsFailWithoutThresholds) {
  auto r = report_with_rows();
  zt::check::evaluate_report(r);
  EXPECT_EQ(r.verdict, Verdict::kPass);
  r.rows[1].in_place.nwrong = 3;
  zt::check::evaluate_report(r);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_EQ(zt::check::exit_code(r), 1);
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("all_reduce in-place at 67108864 B: 3 wrong"), std::string::npos)
      << r.failures[0];
}

TEST(Verdict, EnvironmentWarningsWarn) {
  auto r = report_with_rows();
  r.environment.warnings = {"memlock"};
  zt::check::evaluate_report(r);
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_EQ(zt::check::exit_code(r), 0);
}

TEST(ReportJson, NcclTestsKeys) {
  auto r = gated("[all_reduce]\nsize = \"64M\"\nmin_busbw_gbs = 8.0\n");
  zt::check::Row sr;
  sr.op = CheckOp::kSendRecv;
  sr.nominal_size = sr.size = 8;
  sr.count = 2;
  sr.out_of_place = placement(3.0, 0.002);
  r.rows.push_back(sr);
  const nlohmann::json j = zt::check::report_json(r);
  for (const char* key : {"config", "environment", "results", "latency", "gates", "verdict", "exit_code"})
    EXPECT_TRUE(j.contains(key)) << key;
  const auto& row = j["results"][1];
  for (const char* key : {"size", "count", "type", "redop", "root", "out_of_place", "in_place"})
    EXPECT_TRUE(row.contains(key)) << key;
  EXPECT_EQ(row["size"], uint64_t{64} << 20);
  EXPECT_EQ(row["type"], "float");
  EXPECT_EQ(row["redop"], "sum");
  for (const char* key : {"time", "alg_bw", "bus_bw", "nwrong"})
    EXPECT_TRUE(row["out_of_place"].contains(key)) << key;
  EXPECT_DOUBLE_EQ(row["in_place"]["bus_bw"].get<double>(), 12.0);
  EXPECT_TRUE(j["results"][2]["in_place"].is_null());  // sendrecv has no in-place form
  EXPECT_EQ(j["results"][2]["redop"], "none");
  EXPECT_EQ(j["gates"][0]["status"], "pass");
  EXPECT_EQ(j["verdict"], "PASS");
  EXPECT_EQ(j["exit_code"], 0);
  for (const char* key : {"ranks", "versions", "libfabric_providers", "warnings"})
    EXPECT_TRUE(j["environment"].contains(key)) << key;
}

TEST(ReportFiles, WritesBothAndNeverFollowsSymlinks) {
  const auto dir = fresh_dir("symlink");
  const auto outside = fresh_dir("outside_target");
  EXPECT_EQ(zt::check::prepare_report_dir((dir / "a" / "b").string()), dir / "a" / "b");
  const auto report_dir = dir / "a" / "b";
  { std::ofstream(outside) << "precious\n"; }
  std::filesystem::create_symlink(outside, report_dir / "report.json");

  auto r = gated("[all_reduce]\nsize = \"64M\"\nmin_busbw_gbs = 8.0\n");
  zt::check::write_report_files(r, report_dir);

  std::ifstream keep(outside);
  std::string content((std::istreambuf_iterator<char>(keep)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "precious\n");  // the symlink's target is untouched
  EXPECT_FALSE(std::filesystem::is_symlink(report_dir / "report.json"));
  std::ifstream json_in(report_dir / "report.json");
  const nlohmann::json j = nlohmann::json::parse(json_in);
  EXPECT_EQ(j["verdict"], "PASS");
  std::ifstream md_in(report_dir / "report.md");
  std::stringstream md;
  md << md_in.rdbuf();
  EXPECT_NE(md.str().find("**Verdict: PASS**"), std::string::npos);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(outside);
}

TEST(ReportFiles, DirectoryThatCannotBeCreated) {
  const auto file = fresh_dir("plain_file");
  { std::ofstream(file) << "x"; }
  EXPECT_THROW(zt::check::prepare_report_dir((file / "sub").string()), zt::InputError);
  EXPECT_THROW(zt::check::prepare_report_dir(file.string()), zt::InputError);
  EXPECT_THROW(zt::check::prepare_report_dir(""), zt::InputError);
  std::filesystem::remove(file);
}

// User text (host and device names, versions, warnings, the thresholds' description)
// reaches report.md and report.json escaped: no heading, raw HTML or extra table cell of
// its own, invalid UTF-8 replaced instead of throwing.
TEST(ReportFiles, UserTextEscaped) {
  const auto dir = fresh_dir("escaped");
  zt::check::prepare_report_dir(dir.string());
  auto r = gated("description = \"d\\n# T <i>x</i>\"\n[all_reduce]\nsize = \"64M\"\nmin_busbw_gbs = 8.0\n");
  const std::string evil = "h\n# H <b>x</b> | y,=z\xff";
  zt::check::RankInfo rank;
  rank.host = evil;
  rank.device_name = evil;
  r.environment.ranks = {rank};
  r.environment.versions = {{evil, evil}};
  r.environment.warnings = {evil};
  zt::check::write_report_files(r, dir);
  std::ifstream json_in(dir / "report.json");
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(json_in));
  EXPECT_TRUE(parsed.contains("verdict"));
  std::ifstream md_in(dir / "report.md");
  std::string line;
  size_t cells = 0;
  bool code = false;  // inside a ``` block (zt's own tables)
  while (std::getline(md_in, line)) {
    if (line.rfind("```", 0) == 0) code = !code;
    EXPECT_FALSE(!code && line.rfind("# ", 0) == 0 && line != "# zt check report") << line;
    EXPECT_EQ(line.find("<b>"), std::string::npos) << line;
    EXPECT_EQ(line.find("<i>"), std::string::npos) << line;
    if (line.rfind("| 0 |", 0) == 0) {  // the rank's row: 8 cells, as its header
      for (size_t i = 0; i < line.size(); ++i) cells += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
    }
  }
  EXPECT_EQ(cells, 9u);
  std::filesystem::remove_all(dir);
}
