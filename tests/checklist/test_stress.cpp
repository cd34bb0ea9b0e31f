// The GPU stress verdicts on made-up measurements (no GPU needed): data/gpus.csv's row for
// a CUDA device name, the node-median rule (one slow GPU among its node's), the fractions
// of the table's figures, wrong results, errors, SKIP and UNKNOWN nodes, the actions, and
// the exit codes they give under zt's and nagios' contracts; the samples' JSON round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "stress_stage.hpp"
#include "zt/check/checklist.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/check/stress.hpp"
#include "zt/core/error.hpp"

namespace zc = zt::check;
namespace ze = zt::estimate;

namespace {

const std::vector<ze::GpuSpec>& table() {
  static const std::vector<ze::GpuSpec> t = ze::load_shipped_gpus();
  return t;
}

std::string row_for(const std::string& device) {
  const ze::GpuSpec* g = ze::gpu_for_device(table(), device);
  return g == nullptr ? "(none)" : g->name;
}

// A GPU that ran both tests: tflops and GB/s as given, nothing wrong.
zc::StressSample gpu(int rank, int node, double tflops, double gbs,
                     const std::string& name = "NVIDIA H100 80GB HBM3 [0000:1B:00.0]") {
  zc::StressSample s;
  s.rank = rank;
  s.node = node;
  s.host = "host" + std::to_string(node);
  s.device = rank % 8;
  s.device_name = name;
  s.gemm.n = 8192;
  s.gemm.calls = 1000;
  s.gemm.seconds = 30.0;
  s.gemm.tflops = tflops;
  s.gemm.slowest_window_tflops = tflops * 0.98;
  s.gemm.checked = 8192LL * 8192 + 256;
  s.hbm.bytes = uint64_t{1} << 30;
  s.hbm.passes = 200;
  s.hbm.seconds = 0.2;
  s.hbm.gbs = gbs;
  return s;
}

// Eight healthy H100 SXM on a node: ~0.72 of the 989 TFLOP/s peak, ~0.88 of 3350 GB/s.
std::vector<zc::StressSample> node_of_8(int node = 0) {
  std::vector<zc::StressSample> v;
  for (int g = 0; g < 8; ++g) v.push_back(gpu(8 * node + g, node, 710.0 + g, 2950.0 + 5 * g));
  return v;
}

std::vector<zc::HealthCheck> judge(const std::vector<zc::StressSample>& s) {
  return zc::judge_stress(s, table(), "", zc::StressRules{});
}

const zc::HealthCheck& check_of(const std::vector<zc::HealthCheck>& checks, const std::string& name, int rank) {
  const std::string subject = "rank " + std::to_string(rank) + ",";
  for (const zc::HealthCheck& c : checks)
    if (c.name == name && c.subject.rfind(subject, 0) == 0) return c;
  throw std::runtime_error("no check " + name + " for rank " + std::to_string(rank));
}

double number(const zc::HealthCheck& c, const std::string& key) {
  for (const auto& [k, v] : c.numbers)
    if (k == key) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

int count(const std::vector<zc::HealthCheck>& checks, zc::HealthStatus s) {
  int n = 0;
  for (const zc::HealthCheck& c : checks) n += c.status == s;
  return n;
}

// Exit code of a report holding these checks, under nagios' or zt's contract.
int exit_code_of(const std::vector<zc::HealthCheck>& checks, bool nagios) {
  zc::Report r;
  r.options.nagios_exit_codes = nagios;
  r.health = checks;
  for (int node = 0; node < 2; ++node) {  // one rank per node: the node verdicts the checks go to
    zc::RankInfo info;
    info.rank = node;
    info.node = node;
    info.host = "host" + std::to_string(node);
    r.environment.ranks.push_back(info);
  }
  zc::evaluate_report(r);
  return zc::exit_code(r);
}

}  // namespace

TEST(StressTable, RowForEachDeviceName) {
  EXPECT_EQ(row_for("NVIDIA H100 80GB HBM3"), "h100-sxm");
  EXPECT_EQ(row_for("NVIDIA H100 80GB HBM3 [0000:1B:00.0]"), "h100-sxm");
  EXPECT_EQ(row_for("NVIDIA H100 PCIe"), "h100-pcie");
  EXPECT_EQ(row_for("NVIDIA H100 NVL"), "h100-nvl");
  EXPECT_EQ(row_for("NVIDIA H200"), "h200-sxm");
  EXPECT_EQ(row_for("NVIDIA H200 NVL"), "h200-nvl");
  EXPECT_EQ(row_for("NVIDIA A100-SXM4-80GB"), "a100-sxm-80");
  EXPECT_EQ(row_for("NVIDIA A100-SXM4-40GB"), "a100-sxm-40");
  EXPECT_EQ(row_for("NVIDIA A100 80GB PCIe"), "a100-pcie-80");
  EXPECT_EQ(row_for("NVIDIA A100-PCIE-40GB"), "a100-pcie-40");
  EXPECT_EQ(row_for("NVIDIA L40S"), "l40s");
  EXPECT_EQ(row_for("NVIDIA L4"), "l4");
  EXPECT_EQ(row_for("NVIDIA RTX A6000"), "rtx-a6000");
  EXPECT_EQ(row_for("NVIDIA A10"), "a10");
  EXPECT_EQ(row_for("Tesla T4"), "t4");
  EXPECT_EQ(row_for("Tesla V100-SXM2-32GB"), "v100-sxm-32");
  // Not in the table: no row, never a near miss (A10G is not an A10, GH200 not an H200).
  EXPECT_EQ(row_for("NVIDIA A10G"), "(none)");
  EXPECT_EQ(row_for("NVIDIA GH200 480GB"), "(none)");
  EXPECT_EQ(row_for("NVIDIA L40"), "(none)");
  EXPECT_EQ(row_for(""), "(none)");
  // The figures the rules compare with (data/gpus.csv).
  EXPECT_EQ(ze::gpu_for_device(table(), "NVIDIA H100 80GB HBM3")->bf16_tflops, 989);
  EXPECT_EQ(ze::gpu_for_device(table(), "NVIDIA H100 80GB HBM3")->bandwidth_gb_s, 3350);
}

TEST(StressJudge, HealthyNodePasses) {
  const std::vector<zc::HealthCheck> checks = judge(node_of_8());
  ASSERT_EQ(checks.size(), 16u);  // gpu.gemm and gpu.hbm per GPU
  EXPECT_EQ(count(checks, zc::HealthStatus::kPass), 16);
  const zc::HealthCheck& c = check_of(checks, "gpu.gemm", 3);
  EXPECT_EQ(c.subject, "rank 3, CUDA device 3 (NVIDIA H100 80GB HBM3 [0000:1B:00.0])");
  EXPECT_EQ(c.action, zc::HealthAction::kNone);
  EXPECT_DOUBLE_EQ(number(c, "tflops"), 713.0);
  EXPECT_DOUBLE_EQ(number(c, "table"), 989.0);
  EXPECT_NEAR(number(c, "of_table"), 713.0 / 989.0, 1e-12);
  EXPECT_DOUBLE_EQ(number(c, "node_median"), 713.5);  // median of 710..717
  EXPECT_NEAR(number(c, "of_node_median"), 713.0 / 713.5, 1e-12);
  EXPECT_NE(c.message.find("713.0 TFLOP/s bf16"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("0.72 of the bf16 peak 989 TFLOP/s (h100-sxm, data/gpus.csv)"), std::string::npos)
      << c.message;
  EXPECT_NE(c.message.find("1.00 of the node's median 713.5 over 8 GPUs"), std::string::npos) << c.message;
  const zc::HealthCheck& h = check_of(checks, "gpu.hbm", 0);
  EXPECT_NEAR(number(h, "of_table"), 2950.0 / 3350.0, 1e-12);
  EXPECT_NE(h.message.find("2950 GB/s read+write"), std::string::npos) << h.message;
  EXPECT_EQ(exit_code_of(checks, true), 0);
  EXPECT_EQ(exit_code_of(checks, false), 0);
}

TEST(StressJudge, OneSlowGpuStandsOut) {
  std::vector<zc::StressSample> s = node_of_8();
  s[5].gemm.tflops = 0.85 * 713.5;  // WARN: under 0.9 of the median, still 0.61 of the peak
  s[6].gemm.tflops = 0.70 * 713.5;  // FAIL: under 0.8 of the median (0.51 of the peak)
  const std::vector<zc::HealthCheck> checks = judge(s);
  const zc::HealthCheck& warn = check_of(checks, "gpu.gemm", 5);
  EXPECT_EQ(warn.status, zc::HealthStatus::kWarn);
  EXPECT_EQ(warn.action, zc::HealthAction::kMonitor);
  EXPECT_NE(warn.message.find("below 0.90 of its node's median"), std::string::npos) << warn.message;
  const zc::HealthCheck& slow = check_of(checks, "gpu.gemm", 6);
  EXPECT_EQ(slow.status, zc::HealthStatus::kFail);
  EXPECT_EQ(slow.action, zc::HealthAction::kDrain);
  EXPECT_NE(slow.message.find("below 0.80 of its node's median: the slow GPU of the node"), std::string::npos)
      << slow.message;
  // The median of 8 values with two low ones is still the healthy GPUs' level.
  EXPECT_NEAR(number(slow, "of_node_median"), 0.70 * 713.5 / number(slow, "node_median"), 1e-12);
  EXPECT_GT(number(slow, "node_median"), 710.0);
  // Only those two; every HBM check passes.
  EXPECT_EQ(count(checks, zc::HealthStatus::kPass), 14);
  EXPECT_EQ(exit_code_of(checks, true), 2);
  EXPECT_EQ(exit_code_of(checks, false), 1);
  s[6].gemm.tflops = 713.0;
  EXPECT_EQ(exit_code_of(judge(s), true), 1);  // the WARN alone
  EXPECT_EQ(exit_code_of(judge(s), false), 0);
}

TEST(StressJudge, SlowHbmStandsOut) {
  std::vector<zc::StressSample> s = node_of_8();
  s[2].hbm.gbs = 2100.0;  // 0.71 of the node's median: FAIL; 0.63 of the table: above its WARN
  const auto judged = judge(s);  // kept: c refers into it
  const zc::HealthCheck& c = check_of(judged, "gpu.hbm", 2);
  EXPECT_EQ(c.status, zc::HealthStatus::kFail);
  EXPECT_EQ(c.action, zc::HealthAction::kDrain);
  EXPECT_NEAR(number(c, "of_table"), 2100.0 / 3350.0, 1e-12);
  EXPECT_EQ(c.message.find("below 0.60"), std::string::npos) << c.message;  // the node rule alone
}

TEST(StressJudge, WholeNodeBelowThePeak) {
  // Every GPU alike, so the node rule sees nothing: the table does.
  std::vector<zc::StressSample> s;
  for (int g = 0; g < 4; ++g) s.push_back(gpu(g, 0, 0.45 * 989, 0.55 * 3350));
  std::vector<zc::HealthCheck> checks = judge(s);
  EXPECT_EQ(check_of(checks, "gpu.gemm", 0).status, zc::HealthStatus::kWarn);
  EXPECT_EQ(check_of(checks, "gpu.gemm", 0).action, zc::HealthAction::kMonitor);
  EXPECT_NE(check_of(checks, "gpu.gemm", 0).message.find("below 0.50 of the bf16 peak"), std::string::npos);
  EXPECT_EQ(check_of(checks, "gpu.hbm", 0).status, zc::HealthStatus::kWarn);
  EXPECT_NE(check_of(checks, "gpu.hbm", 0).message.find("below 0.60 of the memory bandwidth"), std::string::npos);
  s.clear();
  for (int g = 0; g < 4; ++g) s.push_back(gpu(g, 0, 0.25 * 989, 0.35 * 3350));
  checks = judge(s);
  EXPECT_EQ(check_of(checks, "gpu.gemm", 1).status, zc::HealthStatus::kFail);
  EXPECT_EQ(check_of(checks, "gpu.gemm", 1).action, zc::HealthAction::kDrain);
  EXPECT_EQ(check_of(checks, "gpu.hbm", 1).status, zc::HealthStatus::kFail);
  EXPECT_EQ(exit_code_of(checks, true), 2);
}

TEST(StressJudge, MediansArePerNode) {
  // Node 1 runs 25% slower than node 0 throughout (still 0.54 of the peak): no GPU is slow
  // among its own node's.
  std::vector<zc::StressSample> s = node_of_8(0);
  for (zc::StressSample& x : node_of_8(1)) {
    x.gemm.tflops *= 0.75;
    s.push_back(x);
  }
  const std::vector<zc::HealthCheck> checks = judge(s);
  EXPECT_EQ(count(checks, zc::HealthStatus::kPass), 32);
  EXPECT_NEAR(number(check_of(checks, "gpu.gemm", 9), "node_median"), 0.75 * 713.5, 1e-9);
  EXPECT_EQ(check_of(checks, "gpu.gemm", 9).host, "host1");
  EXPECT_EQ(check_of(checks, "gpu.gemm", 9).node, 1);
}

TEST(StressJudge, WrongResultsAndErrors) {
  std::vector<zc::StressSample> s = node_of_8();
  s[1].gemm.wrong = 3;
  s[4].hbm.wrong = 1;
  s[7].gemm_error = "[rank 7 on host0] cublasLtMatmul(...) failed: CUBLAS_STATUS_EXECUTION_FAILED  HINT: ...";
  const std::vector<zc::HealthCheck> checks = judge(s);
  const zc::HealthCheck& wrong = check_of(checks, "gpu.gemm", 1);
  EXPECT_EQ(wrong.status, zc::HealthStatus::kFail);
  EXPECT_EQ(wrong.action, zc::HealthAction::kDrain);
  EXPECT_NE(wrong.message.find("3 of 67109120 results WRONG"), std::string::npos) << wrong.message;
  EXPECT_EQ(check_of(checks, "gpu.hbm", 4).status, zc::HealthStatus::kFail);
  const zc::HealthCheck& err = check_of(checks, "gpu.gemm", 7);
  EXPECT_EQ(err.status, zc::HealthStatus::kFail);
  EXPECT_EQ(err.action, zc::HealthAction::kResetGpu);
  EXPECT_NE(err.message.find("failed under stress: [rank 7 on host0] cublasLtMatmul"), std::string::npos);
  EXPECT_TRUE(err.numbers.empty());
  // Its HBM test ran: judged as usual. The failed burn leaves 7 GPUs for the median.
  EXPECT_EQ(check_of(checks, "gpu.hbm", 7).status, zc::HealthStatus::kPass);
  EXPECT_NE(check_of(checks, "gpu.gemm", 0).message.find("over 7 GPUs"), std::string::npos);
}

TEST(StressJudge, NoGpuIsSkipOrUnknown) {
  zc::StressSample none;
  none.skipped = "no GPU bound to this rank";
  std::vector<zc::StressSample> s = {none, none};
  s[1].rank = 1;
  std::vector<zc::HealthCheck> checks = judge(s);
  ASSERT_EQ(checks.size(), 2u);  // one per test for the node, not one per rank
  EXPECT_EQ(checks[0].name, "gpu.gemm");
  EXPECT_EQ(checks[0].subject, "node");
  EXPECT_EQ(checks[0].status, zc::HealthStatus::kSkip);
  EXPECT_EQ(checks[0].message, "no GPU bound to this rank");
  EXPECT_EQ(exit_code_of(checks, true), 0);
  // GPUs expected on the node (--gpus-per-node, $SLURM_GPUS_ON_NODE): it could not be checked.
  for (zc::StressSample& x : s) x.expected_gpus = 8;
  checks = judge(s);
  EXPECT_EQ(checks[1].name, "gpu.hbm");
  EXPECT_EQ(checks[1].status, zc::HealthStatus::kUnknown);
  EXPECT_EQ(checks[1].message, "no GPU bound to this rank, but 8 GPUs are expected here: the stress could not run");
  EXPECT_EQ(exit_code_of(checks, true), 3);
  EXPECT_EQ(exit_code_of(checks, false), 1);
  // Turned off (--burn-seconds 0): SKIP even where GPUs are expected.
  for (zc::StressSample& x : s) {
    x.skipped = "stress off (--burn-seconds 0)";
    x.off = true;
  }
  checks = judge(s);
  EXPECT_EQ(checks[0].status, zc::HealthStatus::kSkip);
  EXPECT_EQ(exit_code_of(checks, true), 0);
}

TEST(StressJudge, NoRowNoPeakButTheNodeStillCounts) {
  std::vector<zc::StressSample> s;
  for (int g = 0; g < 3; ++g) s.push_back(gpu(g, 0, 100.0, 1000.0, "NVIDIA GH200 480GB"));
  s[2].gemm.tflops = 60.0;
  std::vector<zc::HealthCheck> checks = judge(s);
  const zc::HealthCheck& c = check_of(checks, "gpu.gemm", 0);
  EXPECT_EQ(c.status, zc::HealthStatus::kPass);
  EXPECT_NE(c.message.find("no bf16 peak to compare with (no row of data/gpus.csv for this GPU)"), std::string::npos)
      << c.message;
  EXPECT_TRUE(std::isnan(number(c, "table")));
  EXPECT_EQ(check_of(checks, "gpu.gemm", 2).status, zc::HealthStatus::kFail);
  // Without the table at all, the note says why; a single GPU then has nothing to compare with.
  checks = zc::judge_stress({gpu(0, 0, 700.0, 3000.0)}, {}, "the GPU table data/gpus.csv was not found",
                            zc::StressRules{});
  EXPECT_EQ(checks[0].status, zc::HealthStatus::kPass);
  EXPECT_NE(checks[0].message.find("(the GPU table data/gpus.csv was not found)"), std::string::npos);
  EXPECT_TRUE(std::isnan(number(checks[0], "node_median")));
}

TEST(StressJudge, SamplesRoundTripThroughJson) {
  std::vector<zc::StressSample> s = node_of_8();
  s[3].gemm_error = "boom";
  s[4].skipped = "no GPU bound to this rank";
  s[4].expected_gpus = 8;
  const std::vector<zc::StressSample> back = zc::stress_from_json(zc::stress_json(s));
  EXPECT_EQ(zc::stress_json(back), zc::stress_json(s));
  EXPECT_EQ(back[3].gemm_error, "boom");
  EXPECT_EQ(back[5].gemm.tflops, 715.0);
  EXPECT_EQ(back[5].hbm.bytes, uint64_t{1} << 30);
  const std::string md = zc::stress_markdown(s);
  EXPECT_NE(md.find("| 5 | 0 (host0) | 5 (NVIDIA H100 80GB HBM3 \\[0000:1B:00.0\\]) | 715.0 |"), std::string::npos) << md;
}

TEST(StressOptions, BurnSecondsValidated) {
  zc::CheckOptions o;
  for (double bad : {-1.0, 3601.0, std::nan("")}) {
    o.burn_seconds = bad;
    EXPECT_THROW(zc::validate_options(o), zt::InputError) << bad;
  }
  o.burn_seconds = 0.0;
  EXPECT_NO_THROW(zc::validate_options(o));
}

TEST(StressReport, PlotAndMarkdown) {
  zc::Report r;
  r.stress = node_of_8();
  char tmpl[] = "/tmp/zt-stress-plot.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path dir(tmpl);
  zc::write_plots(r, dir);
  if (r.plot_note.empty()) {  // gnuplot ran: the figure and its data, one row per GPU with its table row
    EXPECT_NE(std::find(r.plots.begin(), r.plots.end(), "stress.png"), r.plots.end());
    EXPECT_GT(std::filesystem::file_size(dir / "stress.png"), 1000u);
    std::ifstream in(dir / "stress.dat");
    std::stringstream data;
    data << in.rdbuf();
    EXPECT_NE(data.str().find("\nr0:d0 710 989 2950 3350\n"), std::string::npos) << data.str();
    EXPECT_NE(data.str().find("\nr7:d7 717 989 2985 3350\n"), std::string::npos) << data.str();
  } else {
    EXPECT_NE(r.plot_note.find("gnuplot"), std::string::npos) << r.plot_note;
  }
  const std::string md = zc::report_markdown(r);
  EXPECT_NE(md.find("## GPU stress"), std::string::npos);
  if (r.plot_note.empty()) {
    EXPECT_NE(md.find("![stress](stress.png)"), std::string::npos);
  }
  if (const char* keep = std::getenv("ZT_TEST_KEEP_PLOT"); keep != nullptr)  // to look at it
    std::filesystem::copy_file(dir / "stress.png", keep, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove_all(dir);
  // Nothing stressed: no figure.
  zc::Report none;
  none.stress = {zc::StressSample{}};
  none.stress[0].skipped = "no GPU bound to this rank";
  zc::write_plots(none, dir);  // returns before touching the folder
  EXPECT_EQ(none.plot_note, "nothing to plot");
  EXPECT_TRUE(none.plots.empty());
}

TEST(StressDevices, OneRankPerGpuOrTheOnlyRankTakesAll) {
  const auto rank = [](int r, int node, int device, int visible) {
    zc::RankInfo info;
    info.rank = r;
    info.node = node;
    info.device = device;
    info.visible_gpus = visible;
    return info;
  };
  // 2 nodes x 2 ranks, one GPU each: every rank its own.
  const std::vector<zc::RankInfo> four = {rank(0, 0, 0, 8), rank(1, 0, 1, 8), rank(2, 1, 0, 8), rank(3, 1, 1, 8)};
  EXPECT_EQ(zc::stress_devices(four, 1), std::vector<int>({1}));
  EXPECT_EQ(zc::stress_devices(four, 2), std::vector<int>({0}));
  // The only rank of its node (a Slurm prolog): every GPU it sees.
  const std::vector<zc::RankInfo> prolog = {rank(0, 0, 0, 8), rank(1, 1, 0, 4)};
  EXPECT_EQ(zc::stress_devices(prolog, 0), std::vector<int>({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(zc::stress_devices(prolog, 1), std::vector<int>({0, 1, 2, 3}));
  // No GPU: nothing.
  EXPECT_TRUE(zc::stress_devices({rank(0, 0, -1, 0)}, 0).empty());
  EXPECT_EQ(zc::stress_devices({rank(0, 0, 0, 1)}, 0), std::vector<int>({0}));
}
