#pragma once
// The checklist as a library: `zt check` is run_checklist() plus a CLI and a report
// directory. It takes the Comm to benchmark, so a test can hand it any Comm (e.g. one
// that corrupts results) and look at the report and exit code.
#include <iosfwd>

#include "zt/check/options.hpp"
#include "zt/check/report.hpp"
#include "zt/comm/comm.hpp"

namespace zt::check {

struct NcclProbe;  // stages.hpp

// Benchmarks options.ops on `bench` over the size sweep, verifies every result, then
// evaluates the gates. `control` carries the bookkeeping (per-rank times, #wrong sums):
// a host-memory Comm over the same ranks, never the one under test. Collective over
// both comms; every rank returns the same report. When `out` is given (rank 0), the
// table is printed row by row as the sweep goes.
// Throws zt::InputError when the options are invalid for this run (root >= ranks).
// Before the sweep: the fabric of each node (with `probe`, NCCL's network as probed
// before the bench comm existed; null: not probed), host<->device copies, the I/O
// directory, all-reduce within each node, the pair matrix; after it, the straggler loop.
// An empty `environment` puts every rank on one node.
// Throws zt::InputError also when a baseline comes from another world size.
Report run_checklist(comm::Comm& bench, comm::Comm& control, const CheckOptions& options,
                     Environment environment, std::ostream* out,
                     const NcclProbe* probe = nullptr);

// Fills report.gates, report.failures, report.notes and report.verdict from
// report.rows, report.options.thresholds and report.environment.warnings.
//   FAIL: a row with #wrong > 0, a failed gate, or a gated size with no measurement;
//   WARN: otherwise, a gate in its warning band or an environment warning;
//   PASS: otherwise.
void evaluate_report(Report& report);

}  // namespace zt::check
