#pragma once
// Gates on the stages beyond the sweep and the per-node verdicts (verdict.cpp).
#include "zt/check/report.hpp"

namespace zt::check {

// Adds stage gates (thresholds' [pairs], [h2d], [d2h], [io_write],
// [intra_node_all_reduce]) and baseline gates to report.gates, fills
// report.node_verdicts, and adds a failure line for every node that fails.
void evaluate_stages(Report& report);

}  // namespace zt::check
