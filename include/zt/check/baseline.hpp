#pragma once
// A baseline: report.json of an earlier healthy run. `zt check --baseline FILE` gates
// this run at a fraction of it (--baseline-fraction, default 0.9): every op's busbw at
// the largest size both runs measured, and the slowest pair's bandwidth.
// The baseline must come from the same world size and the same op set; anything else is
// bad input (exit 2) naming the file and what differs.
#include <cstdint>
#include <string>
#include <vector>

#include "zt/check/ops.hpp"

namespace zt::check {

struct BaselineRow {
  CheckOp op = CheckOp::kAllReduce;
  uint64_t nominal_size = 0;
  double bus_bw = 0.0;  // the worse of its placements (GB/s)
};

struct Baseline {
  std::string source;
  int nranks = 0;
  std::vector<CheckOp> ops;        // in run order
  std::vector<BaselineRow> rows;
  double slowest_pair_gbs = 0.0;   // 0: the baseline had no pair matrix
  double fraction = 0.9;
};

// Throws zt::InputError (exit 2) naming the file: unreadable, not JSON, not a zt check
// report (missing config.nranks, config.ops or results), an unknown op.
Baseline parse_baseline_text(const std::string& text, const std::string& source);
Baseline parse_baseline_file(const std::string& path);

// Before MPI: the op set must be the one this run measures. Throws zt::InputError.
void check_baseline_ops(const Baseline& baseline, const std::vector<CheckOp>& ops);
// After MPI: the world size must match. Throws zt::InputError.
void check_baseline_world(const Baseline& baseline, int nranks);

}  // namespace zt::check
