// Thresholds TOML parsing, its errors (each names the problem), and the gate rules.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "zt/check/baseline.hpp"
#include "zt/check/thresholds.hpp"
#include "zt/core/error.hpp"

using zt::check::CheckOp;
using zt::check::GateStatus;

namespace {
std::string error_of(const std::string& text) {
  try {
    zt::check::parse_thresholds_text(text, "t.toml");
  } catch (const zt::InputError& e) {
    return e.what();
  }
  return {};
}
}  // namespace

TEST(Thresholds, ParsesTheDocumentedSchema) {
  const auto t = zt::check::parse_thresholds_text(R"(
description = "test"
warn_band = 0.2
[all_reduce]
size = "64M"
min_busbw_gbs = 5
warn_band = 0.1
max_latency_us = 100
latency_size = "8"
[broadcast]
size = 1048576
min_busbw_gbs = 2.5
)", "t.toml");
  ASSERT_EQ(t.ops.size(), 2u);
  EXPECT_EQ(t.source, "t.toml");
  const auto& ar = t.ops[0];
  EXPECT_EQ(ar.op, CheckOp::kAllReduce);
  ASSERT_TRUE(ar.busbw && ar.latency);
  EXPECT_EQ(ar.busbw->size, uint64_t{64} << 20);
  EXPECT_DOUBLE_EQ(ar.busbw->min_busbw_gbs, 5.0);
  EXPECT_DOUBLE_EQ(ar.warn_band, 0.1);
  EXPECT_EQ(ar.latency->size, 8u);
  EXPECT_DOUBLE_EQ(ar.latency->max_latency_us, 100.0);
  const auto& bc = t.ops[1];
  EXPECT_EQ(bc.op, CheckOp::kBroadcast);
  EXPECT_EQ(bc.busbw->size, 1048576u);
  EXPECT_DOUBLE_EQ(bc.warn_band, 0.2);  // the top-level default
  EXPECT_FALSE(bc.latency);
}

TEST(Thresholds, ErrorsNameTheProblem) {
  EXPECT_NE(error_of("[all_reduce]\nsize = \"1M\"\nmin_busbw_gb = 5\n").find("all_reduce.min_busbw_gb"),
            std::string::npos);
  EXPECT_NE(error_of("[alltoall]\nsize = \"1M\"\nmin_busbw_gbs = 5\n").find("'alltoall'"), std::string::npos);
  EXPECT_NE(error_of("threshold = 3\n").find("'threshold'"), std::string::npos);
  EXPECT_NE(error_of("[all_reduce]\nsize = \"1M\"\nmin_busbw_gbs = = 5\n").find("malformed TOML at line 3"),
            std::string::npos);
  EXPECT_NE(error_of("[all_reduce]\nsize = \"12Q\"\nmin_busbw_gbs = 5\n").find("12Q"), std::string::npos);
  EXPECT_NE(error_of("[all_reduce]\nsize = \"1M\"\n").find("needs both 'size' and 'min_busbw_gbs'"),
            std::string::npos);
  EXPECT_NE(error_of("[all_reduce]\nmax_latency_us = 3\n").find("latency_size"), std::string::npos);
  EXPECT_NE(error_of("[all_reduce]\nsize = \"1M\"\nmin_busbw_gbs = -1\n").find("must be a finite number in (0, 1e+06], got -1"),
            std::string::npos);
  EXPECT_NE(error_of("[all_reduce]\nsize = \"1M\"\nmin_busbw_gbs = \"fast\"\n").find("must be a number"),
            std::string::npos);
  EXPECT_NE(error_of("warn_band = 1.5\n[all_reduce]\nsize = 8\nmin_busbw_gbs = 1\n").find("[0, 1)"),
            std::string::npos);
  EXPECT_NE(error_of("[all_reduce]\n").find("no gate"), std::string::npos);
  EXPECT_NE(error_of("").find("no gates"), std::string::npos);
  EXPECT_NE(error_of("all_reduce = 3\n").find("must be a table"), std::string::npos);
}

TEST(Thresholds, FilesThatCannotBeRead) {
  EXPECT_THROW(zt::check::parse_thresholds_file("/nonexistent/zt/t.toml"), zt::InputError);
  EXPECT_THROW(zt::check::parse_thresholds_file("/tmp"), zt::InputError);
}

TEST(Thresholds, ShippedExampleParses) {
  const auto t = zt::check::parse_thresholds_file(ZT_SOURCE_DIR "/checklist/thresholds/cpu-local.toml");
  EXPECT_EQ(t.ops.size(), 5u);
  EXPECT_EQ(t.ops[0].op, CheckOp::kAllReduce);
}

TEST(Thresholds, MinimumGate) {
  // min 10, band 0.1: fail < 10 <= warn < 11 <= pass.
  EXPECT_EQ(zt::check::judge_minimum(9.99, 10.0, 0.1), GateStatus::kFail);
  EXPECT_EQ(zt::check::judge_minimum(10.0, 10.0, 0.1), GateStatus::kWarn);
  EXPECT_EQ(zt::check::judge_minimum(10.99, 10.0, 0.1), GateStatus::kWarn);
  EXPECT_EQ(zt::check::judge_minimum(11.0, 10.0, 0.1), GateStatus::kPass);
  EXPECT_EQ(zt::check::judge_minimum(10.0, 10.0, 0.0), GateStatus::kPass);
  EXPECT_EQ(zt::check::judge_minimum(std::nan(""), 10.0, 0.1), GateStatus::kFail);
}

TEST(Thresholds, MaximumGate) {
  // max 100 us, band 0.2: pass <= 80 < warn <= 100 < fail.
  EXPECT_EQ(zt::check::judge_maximum(80.0, 100.0, 0.2), GateStatus::kPass);
  EXPECT_EQ(zt::check::judge_maximum(80.5, 100.0, 0.2), GateStatus::kWarn);
  EXPECT_EQ(zt::check::judge_maximum(100.0, 100.0, 0.2), GateStatus::kWarn);
  EXPECT_EQ(zt::check::judge_maximum(100.5, 100.0, 0.2), GateStatus::kFail);
}

TEST(Thresholds, UnitsAndStageTables) {
  const auto t = zt::check::parse_thresholds_text(R"(
[all_reduce]
size = "1G"
min_busbw = "360 GB/s"
latency_size = 8
max_latency = "0.05 ms"
[pairs]
min_bw = "400 Gbps"
warn_band = 0.2
[h2d]
min_bw = "900MB/s"
[intra_node_all_reduce]
size = "256M"
min_busbw = "3200 Gb/s"
)", "u.toml");
  ASSERT_EQ(t.ops.size(), 1u);
  EXPECT_DOUBLE_EQ(t.ops[0].busbw->min_busbw_gbs, 360.0);
  EXPECT_DOUBLE_EQ(t.ops[0].latency->max_latency_us, 50.0);
  ASSERT_EQ(t.stages.size(), 3u);  // run order: intra_node_all_reduce, pairs, h2d
  EXPECT_EQ(t.stages[0].stage, zt::check::Stage::kIntraNodeAllReduce);
  EXPECT_EQ(t.stages[0].size, uint64_t{256} << 20);
  EXPECT_EQ(t.stages[1].stage, zt::check::Stage::kPairs);
  EXPECT_DOUBLE_EQ(t.stages[1].min_gbs, 50.0);  // 400 Gb/s = 50 GB/s
  EXPECT_DOUBLE_EQ(t.stages[1].warn_band, 0.2);
  EXPECT_DOUBLE_EQ(t.stages[2].min_gbs, 0.9);
  EXPECT_DOUBLE_EQ(zt::check::parse_bandwidth_gbs("3200 Gb/s"), 400.0);
  EXPECT_DOUBLE_EQ(zt::check::parse_latency_us("250ns"), 0.25);
}

TEST(Thresholds, UnknownUnitOpAndBadBandNameFileLineAndKey) {
  const std::string unit = error_of("[all_reduce]\nsize = \"1M\"\nmin_busbw = \"5 GB/h\"\n");
  EXPECT_NE(unit.find("t.toml: line 3: 'all_reduce.min_busbw': unknown unit 'GB/h' in '5 GB/h'"),
            std::string::npos) << unit;
  const std::string no_unit = error_of("[pairs]\nmin_bw = \"40\"\n");
  EXPECT_NE(no_unit.find("line 2: 'pairs.min_bw': unknown unit ''"), std::string::npos) << no_unit;
  const std::string op = error_of("description = \"x\"\n\n[alltoall]\nsize = 8\nmin_busbw_gbs = 1\n");
  EXPECT_NE(op.find("t.toml: line 3: unknown key or op 'alltoall'"), std::string::npos) << op;
  const std::string band = error_of("[all_reduce]\nsize = 8\nmin_busbw_gbs = 1\nwarn_band = 1.5\n");
  EXPECT_NE(band.find("line 4: 'all_reduce.warn_band' must be a finite number in [0, 1), got 1.5"), std::string::npos) << band;
  const std::string key = error_of("[pairs]\nmin_busbw = \"1 GB/s\"\n");
  EXPECT_NE(key.find("line 2: unknown key 'pairs.min_busbw'"), std::string::npos) << key;
  EXPECT_NE(error_of("[h2d]\nwarn_band = 0.1\n").find("[h2d] has no gate"), std::string::npos);
}

TEST(Thresholds, ShippedTablesParse) {
  for (const char* name : {"cpu-local", "gpu-h100", "gpu-h200", "gpu-a100", "fabric-efa", "fabric-ib-ndr",
                           "fabric-ib-hdr"}) {
    const std::string path = std::string(ZT_SOURCE_DIR "/checklist/thresholds/") + name + ".toml";
    EXPECT_NO_THROW(zt::check::parse_thresholds_file(path)) << path;
  }
  const auto h100 = zt::check::parse_thresholds_file(ZT_SOURCE_DIR "/checklist/thresholds/gpu-h100.toml");
  ASSERT_FALSE(h100.stages.empty());
  EXPECT_EQ(h100.stages[0].stage, zt::check::Stage::kIntraNodeAllReduce);
  EXPECT_DOUBLE_EQ(h100.stages[0].min_gbs, 360.0);
  const auto ndr = zt::check::parse_thresholds_file(ZT_SOURCE_DIR "/checklist/thresholds/fabric-ib-ndr.toml");
  EXPECT_DOUBLE_EQ(ndr.stages[0].min_gbs, 40.0);  // 320 Gb/s
}

TEST(Thresholds, AutoSelectionMergeAndDrop) {
  using zt::check::select_threshold_files;
  EXPECT_EQ(select_threshold_files("d", "", "any", ""), std::vector<std::string>{"d/cpu-local.toml"});
  EXPECT_EQ(select_threshold_files("d", "NVIDIA H100 80GB HBM3 [0000:1B:00.0]", "efa", ""),
            (std::vector<std::string>{"d/gpu-h100.toml", "d/fabric-efa.toml"}));
  EXPECT_EQ(select_threshold_files("d", "NVIDIA H200", "ib", "400 Gb/sec (4X NDR)"),
            (std::vector<std::string>{"d/gpu-h200.toml", "d/fabric-ib-ndr.toml"}));
  EXPECT_EQ(select_threshold_files("d", "NVIDIA A100-SXM4-80GB", "ib", "200 Gb/sec (4X HDR)"),
            (std::vector<std::string>{"d/gpu-a100.toml", "d/fabric-ib-hdr.toml"}));
  EXPECT_TRUE(select_threshold_files("d", "Tesla T4", "any", "").empty());

  auto a = zt::check::parse_thresholds_text("[all_reduce]\nsize = 8\nmin_busbw_gbs = 1\n[h2d]\nmin_bw = \"1 GB/s\"\n", "a");
  const auto b = zt::check::parse_thresholds_text("[h2d]\nmin_bw = \"2 GB/s\"\n[pairs]\nmin_bw = \"3 GB/s\"\n", "b");
  auto m = zt::check::merge_thresholds(a, b);
  EXPECT_EQ(m.source, "a + b");
  ASSERT_EQ(m.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(m.stages[0].min_gbs, 3.0);  // pairs before h2d (run order)
  EXPECT_DOUBLE_EQ(m.stages[1].min_gbs, 2.0);  // b's h2d replaced a's
  zt::check::drop_gates_outside(m, {16, 32});
  EXPECT_TRUE(m.ops.empty());
  ASSERT_EQ(m.dropped.size(), 1u);
  EXPECT_NE(m.dropped[0].find("all_reduce busbw @ 8"), std::string::npos) << m.dropped[0];
}

// Every number in a thresholds or a baseline file is finite and in its key's range (one
// rule): each numeric key, as a TOML number and as a string with a unit, with inf, -inf,
// NaN, values that overflow, 0, negatives and values past the range, is refused naming
// the key; the edges of each range are accepted.
TEST(Thresholds, EveryNumberIsFiniteAndInRange) {
  struct Key {
    std::string table, key, rest, unit;  // rest: the table's other keys
  };
  const std::vector<Key> keys = {
      {"all_reduce", "min_busbw_gbs", "size = 8\n", ""},
      {"all_reduce", "min_busbw", "size = 8\n", " GB/s"},
      {"broadcast", "max_latency_us", "latency_size = 8\n", ""},
      {"broadcast", "max_latency", "latency_size = 8\n", " us"},
      {"pairs", "min_bw", "", " GB/s"},
      {"io_write", "min_bw", "", " MB/s"},
      {"intra_node_all_reduce", "min_busbw_gbs", "size = 8\n", ""},
      {"intra_node_all_reduce", "min_busbw", "size = 8\n", " TB/s"},
  };
  const std::vector<std::string> bad = {"inf", "-inf", "nan", "0", "-1", "1e300", "2e9"};
  for (const Key& k : keys) {
    const auto text = [&](const std::string& v) {
      const std::string value = k.unit.empty() ? v : "\"" + v + k.unit + "\"";
      return "[" + k.table + "]\n" + k.rest + k.key + " = " + value + "\n";
    };
    EXPECT_EQ(error_of(text("0.5")), "") << text("0.5");  // in range: read
    for (const std::string& v : bad) {
      const std::string e = error_of(text(v));
      EXPECT_NE(e.find(k.table + "." + k.key), std::string::npos) << text(v) << " -> " << e;
      EXPECT_TRUE(e.find("finite number") != std::string::npos || e.find("is not a") != std::string::npos)
          << text(v) << " -> " << e;
    }
    if (!k.unit.empty()) {
      for (const char* v : {"0x10", "1e999", "infinity"})
        EXPECT_NE(error_of(text(v)).find(k.table + "." + k.key), std::string::npos) << text(v);
    }
  }
  for (const std::string v : {"inf", "nan", "-0.1", "1", "1.0"}) {
    const std::string e = error_of("warn_band = " + v + "\n[pairs]\nmin_bw = \"1 GB/s\"\n");
    EXPECT_NE(e.find("'warn_band' must be a finite number in [0, 1)"), std::string::npos) << v << " -> " << e;
    const std::string inner = error_of("[pairs]\nmin_bw = \"1 GB/s\"\nwarn_band = " + v + "\n");
    EXPECT_NE(inner.find("'pairs.warn_band'"), std::string::npos) << v << " -> " << inner;
  }
  EXPECT_EQ(error_of("warn_band = 0\n[pairs]\nmin_bw = \"1000000 GB/s\"\n"), "");  // the edges
}

TEST(Baseline, EveryNumberIsFiniteAndInRange) {
  const auto report = [](const std::string& nranks, const std::string& bw, const std::string& slowest) {
    return R"({"config": {"nranks": )" + nranks + R"(, "ops": ["all_reduce"]}, "results": [)" +
           R"({"op": "all_reduce", "nominal_size": 8, "out_of_place": {"bus_bw": )" + bw +
           R"(}, "in_place": null}], "pairs": {"ran": true, "slowest_gbs": )" + slowest + "}}";
  };
  const auto error = [](const std::string& text) -> std::string {
    try {
      zt::check::parse_baseline_text(text, "b.json");
    } catch (const zt::InputError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error(report("4", "2.5", "4.25")), "");
  EXPECT_NE(error(report("4", "1e999", "4")).find("baseline file b.json: not JSON"), std::string::npos);
  for (const std::string v : {"-2", "2e6", "-0.5"}) {
    EXPECT_NE(error(report("4", v, "4")).find("'results.out_of_place.bus_bw' must be a finite number"), std::string::npos) << v;
    EXPECT_NE(error(report("4", "2", v)).find("'pairs.slowest_gbs' must be a finite number"), std::string::npos) << v;
  }
  for (const std::string v : {"0", "-4", "4294967300", "9223372036854775807"})
    EXPECT_NE(error(report(v, "2", "4")).find("'config.nranks' must be a finite number"), std::string::npos) << v;
}
