// report.md: the human-readable report (environment, one table per op, latency, gates,
// verdict).
#include <map>

#include "health_stage.hpp"
#include "stress_stage.hpp"
#include "report_md_stages.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/version.hpp"

namespace zt::check {
namespace {

std::string cells(const Placement& p) {
  if (!p.ran) return " N/A | N/A | N/A | N/A |";
  return strf(" %.2f | %.2f | %.2f | %lld |", p.time_us, p.alg_bw, p.bus_bw,
              static_cast<long long>(p.nwrong));
}

std::string environment_md(const Environment& env) {
  std::string s = "## Environment\n\n| component | version |\n|---|---|\n";
  for (const auto& [name, version] : env.versions) s += "| " + markdown_text(name) + " | " + markdown_text(version) + " |\n";
  std::string providers;
  for (const std::string& p : env.fabric_providers) {
    if (!providers.empty()) providers += ", ";
    providers += p;
  }
  s += "| libfabric providers | " + (providers.empty() ? std::string("(none)") : markdown_text(providers)) + " |\n";
  s += "| CUDA | " + markdown_text(env.cuda) + " |\n\n";
  s += "| rank | host | node | local rank | device | GPUs visible | memlock | /dev/shm |\n"
       "|---|---|---|---|---|---|---|---|\n";
  for (const RankInfo& r : env.ranks) {
    const std::string memlock =
        r.memlock_bytes < 0 ? "unlimited" : format_size_approx(static_cast<uint64_t>(r.memlock_bytes));
    std::string device = std::to_string(r.device);
    if (!r.device_name.empty()) device += " (" + markdown_text(r.device_name) + ")";
    s += strf("| %d | %s | %d | %d | %s | %d | %s | %s |\n", r.rank, markdown_text(r.host).c_str(), r.node,
              r.local_rank, device.c_str(), r.visible_gpus, memlock.c_str(),
              format_size_approx(r.shm_bytes).c_str());
  }
  if (!env.warnings.empty()) {
    s += "\nWarnings:\n\n";
    for (const std::string& w : env.warnings) s += "- " + markdown_text(w) + "\n";
  }
  return s + "\n";
}

}  // namespace

std::string report_markdown(const Report& report) {
  const CheckOptions& o = report.options;
  std::string s = "# zt check report\n\n";
  s += strf("**Verdict: %s** (exit code %d)\n\n", std::string(verdict_name(report.verdict)).c_str(),
            exit_code(report));
  for (const std::string& f : report.failures) s += "- FAILED: " + markdown_text(f) + "\n";
  if (!report.failures.empty()) s += "\n";
  const std::string backend =
      report.backend == "mpi" ? strf("mpi (%s collectives)", o.mpi_collectives())
                              : report.backend;
  s += strf("zt %s (%s); backend %s; %d ranks; sweep %s..%s by x%llu; %d warm-up + %d timed "
            "iterations per size; type %s; redop %s.\n\n",
            kVersion, kGitCommit, backend.c_str(), report.nranks,
            format_size(o.min_bytes).c_str(), format_size(o.max_bytes).c_str(),
            static_cast<unsigned long long>(o.step_factor), o.warmup, o.iters,
            std::string(dtype_name(o.dtype)).c_str(),
            std::string(comm::reduce_op_name(o.redop)).c_str());
  if (o.thresholds)
    s += "Thresholds: " + markdown_text(o.thresholds->source) +
         (o.thresholds->description.empty() ? std::string() : " (" + markdown_text(o.thresholds->description) + ")") + ".\n\n";
  if (o.baseline)
    s += strf("Baseline: %s, gated at %.2f of it.\n\n", markdown_text(o.baseline->source).c_str(), o.baseline->fraction);
  s += node_verdicts_md(report);
  s += environment_md(report.environment);
  s += stages_md(report);

  s += "## Collectives\n\n"
       "time: mean over ranks of each rank's mean time per op (us); algbw = size / time; "
       "busbw = algbw x bus factor (all_reduce 2(n-1)/n, all_gather and reduce_scatter "
       "(n-1)/n, broadcast and sendrecv 1); GB/s = 1e9 bytes/s; #wrong: elements that "
       "differ from the known result, summed over ranks; slowest: the rank with the "
       "largest mean time (out-of-place).\n\n";
  for (CheckOp op : o.ops) {
    s += "### " + std::string(check_op_name(op)) + "\n\n";
    s += "| size (B) | count | type | redop | root | oop time (us) | oop algbw | oop busbw | "
         "oop #wrong | ip time (us) | ip algbw | ip busbw | ip #wrong | slowest rank | "
         "slowest (us) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const Row& row : report.rows) {
      if (row.op != op) continue;
      const Placement& slow = row.out_of_place.ran ? row.out_of_place : row.in_place;
      s += strf("| %llu | %llu | %s | %s | %d |", static_cast<unsigned long long>(row.size),
                static_cast<unsigned long long>(row.count),
                std::string(dtype_name(o.dtype)).c_str(),
                op_reduces(op) ? std::string(comm::reduce_op_name(o.redop)).c_str() : "none",
                row.root);
      s += cells(row.out_of_place) + cells(row.in_place);
      s += strf(" %d | %.2f |\n", slow.slowest_rank, slow.slowest_us);
    }
    s += "\n";
  }

  const std::string latency = latency_table(report);
  if (!latency.empty()) s += "## Latency at small sizes\n\n```\n" + latency + "```\n\n";

  s += health_markdown(report.health);
  s += stress_markdown(report.stress);
  s += "## Gates\n\n";
  if (report.gates.empty()) {
    s += "No thresholds file or baseline: correctness (#wrong) and the per-node checks decide the verdict.\n\n";
  } else {
    s += "| op | kind | size | measured | limit | warn band | status |\n"
         "|---|---|---|---|---|---|---|\n";
    for (const GateResult& g : report.gates) {
      s += strf("| %s | %s | %s | %.2f %s | %.2f | %.0f%% | %s |\n",
                markdown_text(g.name).c_str(), markdown_text(g.kind).c_str(),
                g.size > 0 ? format_size(g.size).c_str() : "-", g.measured,
                g.kind == "latency" ? "us" : "GB/s",
                g.limit, g.warn_band * 100.0, std::string(gate_status_name(g.status)).c_str());
    }
    s += "\n";
  }
  for (const std::string& n : report.notes) s += "Note: " + markdown_text(n) + "\n\n";

  s += "## Verdict\n\n";
  if (report.failures.empty()) {
    s += std::string(verdict_name(report.verdict)) + ": every result was correct";
    if (!report.gates.empty()) s += " and no gate failed";
    s += ".\n";
  } else {
    s += "FAIL:\n\n";
    for (const std::string& f : report.failures) s += "- " + markdown_text(f) + "\n";
  }
  if (!report.unknown.empty()) {
    s += "\nUNKNOWN (could not check):\n\n";
    for (const std::string& u : report.unknown) s += "- " + markdown_text(u) + "\n";
  }
  s += strf("\nTier %s; exit code %d (%s codes).\n", report.options.tier.c_str(), exit_code(report),
            report.options.nagios_exit_codes ? "nagios" : "zt");
  return s;
}

}  // namespace zt::check
