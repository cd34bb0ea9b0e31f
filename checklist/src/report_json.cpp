// report.json: nccl-tests' key names for the rows (size, count, type, redop, root,
// out_of_place/in_place with time, alg_bw, bus_bw, nwrong), plus zt's environment,
// gates and verdict. Schema: docs/checklist.md.
#include "health_stage.hpp"
#include "stress_stage.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/version.hpp"

namespace zt::check {
namespace {

using nlohmann::json;

json placement_json(const Placement& p) {
  if (!p.ran) return nullptr;
  return json{{"time", p.time_us},         {"alg_bw", p.alg_bw},
              {"bus_bw", p.bus_bw},        {"nwrong", p.nwrong},
              {"slowest_rank", p.slowest_rank}, {"slowest_time", p.slowest_us}};
}

json environment_json(const Environment& env) {
  json ranks = json::array();
  for (const RankInfo& r : env.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"hostname", r.host},
                     {"node", r.node},
                     {"local_rank", r.local_rank},
                     {"device", r.device},
                     {"visible_gpus", r.visible_gpus},
                     {"device_name", r.device_name},
                     {"memlock_bytes", r.memlock_bytes < 0 ? json(nullptr) : json(r.memlock_bytes)},
                     {"shm_bytes", r.shm_bytes}});
  }
  json versions = json::object();
  for (const auto& [name, version] : env.versions) versions[name] = version;
  return json{{"ranks", ranks},
              {"versions", versions},
              {"libfabric_providers", env.fabric_providers},
              {"cuda", env.cuda},
              {"warnings", env.warnings}};
}

json stages_json(const Report& r) {
  json fabric = json::array();
  for (const NodeFabric& f : r.fabric)
    fabric.push_back({{"providers", f.providers}, {"infiniband_sysfs", f.infiniband_sysfs},
                      {"expected", f.expected}, {"nccl_probed", f.nccl_probed}, {"nccl", f.nccl_note},
                      {"status", f.fabric_status}, {"message", f.fabric_message}, {"nics", f.nics},
                      {"affinity_status", f.affinity_status}, {"affinity", f.affinity}});
  json copies = json::array();
  for (const CopyBandwidth& c : r.copies)
    copies.push_back({{"ran", c.ran}, {"note", c.note},
                      {"h2d_gbs", c.ran ? json(c.h2d_gbs) : json(nullptr)},
                      {"d2h_gbs", c.ran ? json(c.d2h_gbs) : json(nullptr)}});
  json io = json::array();
  for (const IoBandwidth& x : r.io)
    io.push_back({{"ran", x.ran}, {"note", x.note}, {"bytes", x.bytes},
                  {"write_gbs", x.ran ? json(x.write_gbs) : json(nullptr)}});
  const PairMatrix& m = r.pairs;
  const Stragglers& st = r.stragglers;
  json nodes = json::array();
  for (const NodeVerdict& v : r.node_verdicts)
    nodes.push_back({{"node", v.node}, {"hostname", v.host}, {"verdict", verdict_name(v.verdict)},
                     {"reasons", v.reasons}, {"line", node_verdict_line(v)}});
  return json{{"fabric", fabric},
              {"copies", copies},
              {"io", io},
              {"intra_node", {{"ran", r.intra.ran}, {"note", r.intra.note}, {"size", r.intra.size},
                              {"busbw", r.intra.busbw}}},
              {"pairs", {{"ran", m.ran}, {"note", m.note}, {"bytes", m.bytes}, {"iters", m.iters}, {"rounds", m.rounds},
                         {"leaders", m.leaders}, {"gbs", m.gbs}, {"slowest", {m.slow_a, m.slow_b}},
                         {"slowest_gbs", m.slowest_gbs}, {"reference_gbs", m.reference_gbs}, {"slow_fraction", m.slow_fraction},
                         {"slow_nodes", m.slow_nodes}}},
              {"stragglers", {{"ran", st.ran}, {"bytes", st.bytes}, {"iters", st.iters},
                              {"factor", st.factor}, {"rank_us", st.rank_us},
                              {"median_us", st.median_us}, {"ranks", st.ranks}}},
              {"nodes", nodes},
              {"plots", r.plots},
              {"plot_note", r.plot_note}};
}

}  // namespace

json report_json(const Report& report) {
  const CheckOptions& o = report.options;
  json ops = json::array();
  for (CheckOp op : o.ops) ops.push_back(check_op_name(op));
  json config = {{"backend", report.backend},
                 {"mpi_collectives", report.backend == "mpi" ? json(o.mpi_collectives())
                                                             : json(nullptr)},
                 {"nranks", report.nranks},
                 {"ops", ops},
                 {"minimum_bytes", o.min_bytes},
                 {"maximum_bytes", o.max_bytes},
                 {"step_factor", o.step_factor},
                 {"warmup_iters", o.warmup},
                 {"iterations", o.iters},
                 {"type", dtype_name(o.dtype)},
                 {"redop", comm::reduce_op_name(o.redop)},
                 {"root", o.root},
                 {"timeout_s", report.timeout_s},
                 {"thresholds_file", o.thresholds ? json(o.thresholds->source) : json(nullptr)},
                 {"baseline_file", o.baseline ? json(o.baseline->source) : json(nullptr)},
                 {"baseline_fraction", o.baseline ? json(o.baseline->fraction) : json(nullptr)},
                 {"pair_bytes", o.pair_bytes},
                 {"burn_seconds", o.burn_seconds},
                 {"io_dir", o.io_dir.empty() ? json(nullptr) : json(o.io_dir)}};

  json results = json::array();
  for (const Row& row : report.rows) {
    results.push_back({{"op", check_op_name(row.op)},
                       {"nominal_size", row.nominal_size},
                       {"size", row.size},
                       {"count", row.count},
                       {"type", dtype_name(o.dtype)},
                       {"redop", op_reduces(row.op) ? comm::reduce_op_name(o.redop) : "none"},
                       {"root", row.root},
                       {"out_of_place", placement_json(row.out_of_place)},
                       {"in_place", placement_json(row.in_place)}});
  }

  json latency = json::array();
  for (const Row& row : report.rows) {
    if (row.nominal_size > o.latency_max_bytes) continue;
    const Placement& p = row.out_of_place.ran ? row.out_of_place : row.in_place;
    latency.push_back({{"op", check_op_name(row.op)}, {"size", row.size}, {"time", p.time_us}});
  }

  json gates = json::array();
  for (const GateResult& g : report.gates) {
    gates.push_back({{"op", g.name},
                     {"kind", g.kind},
                     {"size", g.size},
                     {"measured", g.measured},
                     {"limit", g.limit},
                     {"warn_band", g.warn_band},
                     {"status", gate_status_name(g.status)},
                     {"message", g.message}});
  }

  json out = json{{"zt_version", kVersion},
              {"git_commit", kGitCommit},
              {"config", config},
              {"environment", environment_json(report.environment)},
              {"results", results},
              {"latency", latency},
              {"gates", gates},
              {"failures", report.failures},
              {"unknown", report.unknown},
              {"tier", o.tier},
              {"exit_codes", o.nagios_exit_codes ? "nagios" : "zt"},
              {"health", health_json(report.health)},
              {"stress", stress_json(report.stress)},
              {"notes", report.notes},
              {"verdict", verdict_name(report.verdict)},
              {"exit_code", exit_code(report)}};
  out.update(stages_json(report));
  return out;
}

}  // namespace zt::check
