// run_checklist: the sweep, then gates and verdict (include/zt/check/checklist.hpp).
#include "zt/check/checklist.hpp"

#include <algorithm>
#include <chrono>
#include <ostream>

#include "health_stage.hpp"
#include "stress_stage.hpp"
#include "sweep.hpp"
#include "verdict.hpp"
#include "zt/check/stages.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

const Row* find_row(const std::vector<Row>& rows, CheckOp op, uint64_t nominal) {
  for (const Row& r : rows)
    if (r.op == op && r.nominal_size == nominal) return &r;
  return nullptr;
}

std::string op_str(CheckOp op) { return std::string(check_op_name(op)); }

// A gate on one op at one size. Without a measurement at that size it fails, saying so.
GateResult open_gate(const OpThresholds& t, const char* kind, uint64_t size, double limit,
                     const Row* row) {
  GateResult g;
  g.op = t.op;
  g.name = op_str(t.op);
  g.kind = kind;
  g.size = size;
  g.limit = limit;
  g.warn_band = t.warn_band;
  if (row == nullptr) {
    g.status = GateStatus::kFail;
    g.message = strf("%s %s @ %s: no measurement at this size (fewer than one element per "
                     "rank?): FAIL", op_str(t.op).c_str(), kind, format_size(size).c_str());
  }
  return g;
}

GateResult busbw_gate(const OpThresholds& t, const Row* row) {
  GateResult g = open_gate(t, "busbw", t.busbw->size, t.busbw->min_busbw_gbs, row);
  if (row == nullptr) return g;
  // The worse of the placements that ran.
  double measured = 0.0;
  bool any = false;
  for (const Placement* p : {&row->out_of_place, &row->in_place}) {
    if (!p->ran) continue;
    measured = any ? std::min(measured, p->bus_bw) : p->bus_bw;
    any = true;
  }
  g.measured = measured;
  g.status = judge_minimum(measured, g.limit, g.warn_band);
  g.message = strf("%s busbw @ %s: %.2f GB/s, minimum %.2f (warn below %.2f): %s",
                   op_str(t.op).c_str(), format_size(g.size).c_str(), measured, g.limit,
                   g.limit * (1.0 + g.warn_band),
                   std::string(gate_status_name(g.status)).c_str());
  return g;
}

GateResult latency_gate(const OpThresholds& t, const Row* row) {
  GateResult g = open_gate(t, "latency", t.latency->size, t.latency->max_latency_us, row);
  if (row == nullptr) return g;
  // The slower of the placements that ran.
  double measured = 0.0;
  for (const Placement* p : {&row->out_of_place, &row->in_place})
    if (p->ran) measured = std::max(measured, p->time_us);
  g.measured = measured;
  g.status = judge_maximum(measured, g.limit, g.warn_band);
  g.message = strf("%s latency @ %s: %.2f us, maximum %.2f (warn above %.2f): %s",
                   op_str(t.op).c_str(), format_size(g.size).c_str(), measured, g.limit,
                   g.limit * (1.0 - g.warn_band),
                   std::string(gate_status_name(g.status)).c_str());
  return g;
}

}  // namespace

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "PASS";
    case Verdict::kWarn: return "WARN";
    case Verdict::kFail: return "FAIL";
  }
  return "?";
}

int exit_code(const Report& report) {
  if (report.options.nagios_exit_codes) {
    if (report.verdict == Verdict::kFail) return 2;
    if (!report.unknown.empty()) return 3;
    return report.verdict == Verdict::kWarn ? 1 : 0;
  }
  return report.verdict == Verdict::kFail || !report.unknown.empty() ? static_cast<int>(ExitCode::kFailed)
                                                                     : static_cast<int>(ExitCode::kOk);
}

void evaluate_report(Report& report) {
  report.gates.clear();
  report.failures.clear();
  report.notes.clear();
  report.unknown.clear();
  for (const Row& row : report.rows) {
    for (const auto& [p, name] : {std::pair{&row.out_of_place, "out-of-place"},
                                  std::pair{&row.in_place, "in-place"}}) {
      if (p->ran && p->nwrong != 0)
        report.failures.push_back(strf("%s %s at %llu B: %lld wrong elements (#wrong)",
                                       op_str(row.op).c_str(), name,
                                       static_cast<unsigned long long>(row.size),
                                       static_cast<long long>(p->nwrong)));
    }
  }
  if (report.options.thresholds)
    for (const std::string& d : report.options.thresholds->dropped) report.notes.push_back(d);
  if (report.options.thresholds) {
    const std::vector<CheckOp>& ran = report.options.ops;
    for (const OpThresholds& t : report.options.thresholds->ops) {
      if (std::find(ran.begin(), ran.end(), t.op) == ran.end()) {
        report.notes.push_back("gates for " + op_str(t.op) + " not evaluated: --ops did not run it");
        continue;
      }
      if (t.busbw) report.gates.push_back(busbw_gate(t, find_row(report.rows, t.op, t.busbw->size)));
      if (t.latency)
        report.gates.push_back(latency_gate(t, find_row(report.rows, t.op, t.latency->size)));
    }
  }
  evaluate_stages(report);
  evaluate_health(report);
  bool warn = !report.environment.warnings.empty();
  for (const NodeVerdict& v : report.node_verdicts)
    if (v.verdict == Verdict::kWarn) warn = true;
  for (const GateResult& g : report.gates) {
    if (g.status == GateStatus::kFail) report.failures.push_back("gate " + g.message);
    if (g.status == GateStatus::kWarn) warn = true;
  }
  report.verdict = !report.failures.empty() ? Verdict::kFail : warn ? Verdict::kWarn : Verdict::kPass;
}

namespace {

// Stages before the sweep, in the design's order: fabric, per-node copies and I/O, then
// all-reduce within each node, then pairs between nodes. Each prints as it finishes.
void run_stages_before_sweep(comm::Comm& bench, comm::Comm& control, Report& report,
                             const NcclProbe& probe, std::ostream* out) {
  const CheckOptions& o = report.options;
  const std::vector<RankInfo>& ranks = report.environment.ranks;
  const int me = control.rank();
  report.fabric = collect_fabric(control, ranks, probe);
  if (out) *out << fabric_text(report) << std::flush;

  // Host<->device copies on every rank with a GPU.
  const CopyBandwidth mine = measure_copy_bandwidth(ranks[static_cast<size_t>(me)].device,
                                                    o.copy_bytes, o.copy_iters);
  const double numbers[3] = {mine.ran ? 1.0 : 0.0, mine.h2d_gbs, mine.d2h_gbs};
  std::vector<double> all(3 * static_cast<size_t>(control.size()));  // [n][3]
  control.all_gather(numbers, all.data(), 3, DType::kF64);
  const std::vector<std::string> copy_notes = gather_strings(control, mine.note);
  for (size_t r = 0; r < copy_notes.size(); ++r)
    report.copies.push_back({all[3 * r] > 0.5, copy_notes[r], all[3 * r + 1], all[3 * r + 2]});

  // The I/O directory, written by each node's leader.
  const std::vector<int> leaders = node_leaders(ranks);
  IoBandwidth io;
  const int my_node = ranks[static_cast<size_t>(me)].node;
  if (leaders[static_cast<size_t>(my_node)] == me)
    io = measure_io_write(o.io_dir, o.io_bytes, strf("node%d", my_node));
  const double io_numbers[3] = {io.ran ? 1.0 : 0.0, static_cast<double>(io.bytes), io.write_gbs};
  control.all_gather(io_numbers, all.data(), 3, DType::kF64);
  const std::vector<std::string> io_notes = gather_strings(control, io.note);
  for (int leader : leaders) {
    const size_t r = static_cast<size_t>(leader);
    report.io.push_back({all[3 * r] > 0.5, io_notes[r], static_cast<uint64_t>(all[3 * r + 1]), all[3 * r + 2]});
  }
  if (out) *out << node_text(report) << std::flush;

  // All-reduce within each node at the intra-node gate's size, else the largest of the sweep.
  uint64_t intra_bytes = sweep_of(o).back();
  if (o.thresholds)
    for (const StageThresholds& t : o.thresholds->stages)
      if (t.stage == Stage::kIntraNodeAllReduce && t.size > 0) intra_bytes = t.size;
  report.intra = run_intra_node(bench, control, ranks, intra_bytes, o.iters, o.warmup);
  const bool rounds = static_cast<int>(node_leaders(ranks).size()) > o.pair_sequential_max_nodes;
  report.pairs = run_pairs(bench, control, ranks, o.pair_bytes, o.pair_iters, rounds,
                           o.slow_node_fraction);
  if (out) *out << pairs_text(report) << std::flush;
}

}  // namespace

Report run_checklist(comm::Comm& bench, comm::Comm& control, const CheckOptions& options,
                     Environment environment, std::ostream* out, const NcclProbe* probe) {
  validate_options(options);
  if (options.baseline) check_baseline_world(*options.baseline, bench.size());
  Report report;
  report.options = options;
  report.backend = std::string(bench.backend());
  report.nranks = bench.size();
  report.timeout_s = std::chrono::duration<double>(bench.timeout()).count();
  report.environment = std::move(environment);
  if (report.environment.ranks.size() != static_cast<size_t>(bench.size())) {
    // No environment given (a test): every rank on one node.
    report.environment.ranks.clear();
    for (int r = 0; r < bench.size(); ++r) {
      RankInfo info;
      info.rank = r;
      info.host = "?";
      info.local_rank = r;
      report.environment.ranks.push_back(info);
    }
  }
  NcclProbe skipped;
  skipped.note = "skipped: not probed";
  HealthStage health(options.health, report.environment.ranks, control.rank());
  // Each GPU stressed alone, right after the health checks (Xid events during it are in gpu.xid).
  report.stress = run_stress(control, report.environment.ranks, control.rank(), options.burn_seconds,
                             expected_gpus(options.health));
  std::string table_note;
  const std::vector<estimate::GpuSpec> table = stress_table(&table_note);
  std::vector<HealthCheck> stress = judge_stress(report.stress, table, table_note, options.stress_rules);
  if (out) *out << stress_text(report.stress, options.burn_seconds) << std::flush;
  run_stages_before_sweep(bench, control, report, probe ? *probe : skipped, out);
  report.rows = run_sweep(bench, control, options, out);
  report.stragglers = run_stragglers(bench, control, options.straggler_bytes, options.straggler_iters,
                                     options.straggler_factor);
  report.health = health.finish(control);
  for (HealthCheck& c : stress) report.health.push_back(std::move(c));
  if (out) *out << health_text(report.health) << std::flush;
  evaluate_report(report);
  if (out) *out << latency_table(report) << stragglers_text(report) << verdict_text(report) << std::flush;
  return report;
}

}  // namespace zt::check
