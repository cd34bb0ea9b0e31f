// The baseline gate's arithmetic (zt check --baseline; issue 35 item 4), on hand-made
// numbers whose expected gates are worked out by hand below, not by the gate's code:
//   limit    = --baseline-fraction x the baseline's busbw at the largest size BOTH runs
//              measured (sizes only one run measured are ignored);
//   measured = the worse of this run's placements (out-of-place, in-place) at that size;
//   verdict  = FAIL below the limit, WARN in [limit, limit x 1.1) (the default band), else PASS.
#include <gtest/gtest.h>

#include <string>

#include "zt/check/baseline.hpp"
#include "zt/check/checklist.hpp"
#include "zt/check/report.hpp"

namespace {

using zt::check::CheckOp;
using zt::check::GateStatus;

zt::check::Row row(CheckOp op, uint64_t size, double out_of_place, double in_place) {
  zt::check::Row r;
  r.op = op;
  r.nominal_size = r.size = size;
  r.out_of_place.ran = r.in_place.ran = true;
  r.out_of_place.bus_bw = out_of_place;
  r.in_place.bus_bw = in_place;
  return r;
}

// One all_reduce gate against a baseline of 10 GB/s at 1K, 20 at 4K and 100 at 1M (a size
// this run did not measure): the gate is at 4K, limit 0.9 x 20 = 18 GB/s, warning below 19.8.
zt::check::GateResult gate(double out_of_place, double in_place, double fraction = 0.9) {
  zt::check::Report r;
  zt::check::Baseline b;
  b.source = "base.json";
  b.nranks = 2;
  b.ops = {CheckOp::kAllReduce};
  b.rows = {{CheckOp::kAllReduce, 1024, 10.0}, {CheckOp::kAllReduce, 4096, 20.0},
            {CheckOp::kAllReduce, 1 << 20, 100.0}};
  b.fraction = fraction;
  r.options.ops = {CheckOp::kAllReduce};
  r.options.baseline = b;
  r.rows = {row(CheckOp::kAllReduce, 1024, 50.0, 50.0), row(CheckOp::kAllReduce, 4096, out_of_place, in_place)};
  zt::check::evaluate_report(r);
  EXPECT_EQ(r.gates.size(), 1u);
  return r.gates.empty() ? zt::check::GateResult{} : r.gates[0];
}

TEST(BaselineGate, LimitIsTheFractionOfTheLargestSizeBothRunsMeasured) {
  const zt::check::GateResult g = gate(25.0, 24.0);
  EXPECT_EQ(g.kind, "baseline");
  EXPECT_EQ(g.size, 4096u);            // not 1M (the baseline alone), not 1K (smaller)
  EXPECT_DOUBLE_EQ(g.limit, 18.0);     // 0.9 x 20
  EXPECT_DOUBLE_EQ(g.measured, 24.0);  // the worse placement
  EXPECT_EQ(g.status, GateStatus::kPass);
}

TEST(BaselineGate, FailWarnPassAtTheEdges) {
  EXPECT_EQ(gate(17.99, 30.0).status, GateStatus::kFail);  // worse placement below 18
  EXPECT_EQ(gate(30.0, 17.99).status, GateStatus::kFail);  // in-place counts too
  EXPECT_EQ(gate(18.0, 18.0).status, GateStatus::kWarn);   // at the limit: not below it
  EXPECT_EQ(gate(19.79, 40.0).status, GateStatus::kWarn);  // under 18 x 1.1 = 19.8
  EXPECT_EQ(gate(19.81, 40.0).status, GateStatus::kPass);
  EXPECT_EQ(gate(0.0, 0.0).status, GateStatus::kFail);
}

TEST(BaselineGate, FractionScalesTheLimit) {
  EXPECT_DOUBLE_EQ(gate(25.0, 25.0, 0.5).limit, 10.0);  // 0.5 x 20
  EXPECT_EQ(gate(9.99, 25.0, 0.5).status, GateStatus::kFail);
  EXPECT_DOUBLE_EQ(gate(25.0, 25.0, 1.0).limit, 20.0);
  EXPECT_EQ(gate(21.0, 25.0, 1.0).status, GateStatus::kWarn);  // 21 < 22
}

TEST(BaselineGate, AFailedGateFailsTheRun) {
  zt::check::Report r;
  zt::check::Baseline b;
  b.source = "base.json";
  b.ops = {CheckOp::kAllReduce};
  b.rows = {{CheckOp::kAllReduce, 4096, 20.0}};
  r.options.ops = {CheckOp::kAllReduce};
  r.options.baseline = b;
  r.rows = {row(CheckOp::kAllReduce, 4096, 10.0, 10.0)};
  zt::check::evaluate_report(r);
  EXPECT_EQ(r.verdict, zt::check::Verdict::kFail);
  ASSERT_FALSE(r.failures.empty());
  EXPECT_NE(r.failures[0].find("baseline 20.00 x 0.90 = 18.00"), std::string::npos) << r.failures[0];
}

}  // namespace
