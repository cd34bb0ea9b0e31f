// Plain-text rendering for stdout: the nccl-tests-style table, the latency table, the
// environment summary and the verdict (include/zt/check/report_writer.hpp).
#include <algorithm>
#include <map>

#include "zt/check/report_writer.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

std::string placement_cells(const Placement& p) {
  if (!p.ran) return strf("  %9s %7s %7s %7s", "N/A", "N/A", "N/A", "N/A");
  return strf("  %9.2f %7.2f %7.2f %7lld", p.time_us, p.alg_bw, p.bus_bw,
              static_cast<long long>(p.nwrong));
}

std::string redop_cell(CheckOp op, comm::ReduceOp redop) {
  return op_reduces(op) ? std::string(comm::reduce_op_name(redop)) : "none";
}

// The placement whose time describes the op: out-of-place where it exists.
const Placement& primary(const Row& row) {
  return row.out_of_place.ran ? row.out_of_place : row.in_place;
}

// `text` centred in `width` columns.
std::string centred(const std::string& text, size_t width) {
  if (text.size() >= width) return text;
  const size_t left = (width - text.size()) / 2;
  return std::string(left, ' ') + text + std::string(width - text.size() - left, ' ');
}

}  // namespace

std::string table_header(CheckOp op) {
  constexpr size_t kPlacementWidth = 33;  // "%9s %7s %7s %7s"
  std::string s = "#\n# " + std::string(check_op_name(op)) + "\n";
  s += strf("# %10s %12s %8s %6s %6s  %s  %s\n", "", "", "", "", "",
            centred("out-of-place", kPlacementWidth).c_str(),
            centred("in-place", kPlacementWidth).c_str());
  s += strf("# %10s %12s %8s %6s %6s  %9s %7s %7s %7s  %9s %7s %7s %7s  %s\n", "size", "count",
            "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
            "#wrong", "slowest");
  s += strf("# %10s %12s %8s %6s %6s  %9s %7s %7s %7s  %9s %7s %7s %7s  %s\n", "(B)",
            "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
            "", "(rank:us)");
  return s;
}

std::string table_row(const Row& row, DType dtype, comm::ReduceOp redop) {
  const Placement& slow = primary(row);
  return strf("  %10llu %12llu %8s %6s %6d", static_cast<unsigned long long>(row.size),
              static_cast<unsigned long long>(row.count), std::string(dtype_name(dtype)).c_str(),
              redop_cell(row.op, redop).c_str(), row.root) +
         placement_cells(row.out_of_place) + placement_cells(row.in_place) +
         strf("  r%d:%.2f", slow.slowest_rank, slow.slowest_us);
}

std::string latency_table(const Report& report) {
  // nominal size -> op -> us per op
  std::map<uint64_t, std::map<CheckOp, double>> cells;
  for (const Row& row : report.rows)
    if (row.nominal_size <= report.options.latency_max_bytes)
      cells[row.nominal_size][row.op] = primary(row).time_us;
  if (cells.empty()) return {};
  std::string s = "#\n# latency (us per op; out-of-place, broadcast in-place)\n";
  s += strf("# %10s", "size (B)");
  for (CheckOp op : report.options.ops) s += strf(" %14s", std::string(check_op_name(op)).c_str());
  s += "\n";
  for (const auto& [size, by_op] : cells) {
    s += strf("  %10llu", static_cast<unsigned long long>(size));
    for (CheckOp op : report.options.ops) {
      const auto it = by_op.find(op);
      s += it == by_op.end() ? strf(" %14s", "-") : strf(" %14.2f", it->second);
    }
    s += "\n";
  }
  return s;
}

std::string environment_text(const Environment& env) {
  std::string s = "# zt check: environment\n";
  for (const auto& [name, version] : env.versions)
    s += strf("#   %-12s %s\n", name.c_str(), version.c_str());
  std::string providers;
  for (const std::string& p : env.fabric_providers) {
    if (!providers.empty()) providers += ", ";
    providers += p;
  }
  s += strf("#   %-12s %s\n", "fi providers", providers.empty() ? "(none)" : providers.c_str());
  s += strf("#   %-12s %s\n", "cuda", env.cuda.c_str());
  s += "#\n#   rank  host                  node  local  device  gpus  memlock      /dev/shm\n";
  for (const RankInfo& r : env.ranks) {
    const std::string memlock = r.memlock_bytes < 0 ? "unlimited" : format_size_approx(static_cast<uint64_t>(r.memlock_bytes));
    s += strf("#   %4d  %-20s  %4d  %5d  %6d  %4d  %-11s  %-8s  %s\n", r.rank, r.host.c_str(),
              r.node, r.local_rank, r.device, r.visible_gpus, memlock.c_str(),
              format_size_approx(r.shm_bytes).c_str(), r.device_name.c_str());
  }
  for (const std::string& w : env.warnings) s += "#   WARNING: " + w + "\n";
  return s;
}

std::string verdict_text(const Report& report) {
  std::string s = "#\n";
  for (const GateResult& g : report.gates)
    s += "# gate " + g.message + "\n";
  for (const std::string& n : report.notes) s += "# note: " + n + "\n";
  for (const std::string& f : report.failures) s += "# FAILED: " + f + "\n";
  for (const std::string& u : report.unknown) s += "# UNKNOWN: " + u + "\n";
  for (const NodeVerdict& v : report.node_verdicts) s += node_verdict_line(v) + "\n";
  s += "# zt check: " + std::string(verdict_name(report.verdict)) +
       (report.unknown.empty() ? "" : " (with checks that could not run: UNKNOWN)") +
       strf(" (tier %s, exit %d)\n", report.options.tier.c_str(), exit_code(report));
  return s;
}

}  // namespace zt::check
