// Gates on the stages beyond the sweep (thresholds' stage tables and a baseline) and the
// one-line verdict of each node. Called by evaluate_report (checklist.cpp).
#include <algorithm>
#include <map>
#include <set>

#include "verdict.hpp"
#include "join.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
namespace {

// Where each node's reasons collect while the gates run.
struct NodeNotes {
  std::vector<NodeVerdict> nodes;
  void add(int node, Verdict v, const std::string& reason) {
    if (node < 0 || node >= static_cast<int>(nodes.size())) return;
    NodeVerdict& n = nodes[static_cast<size_t>(node)];
    n.verdict = std::max(n.verdict, v);
    n.reasons.push_back(reason);
  }
};

GateResult stage_gate(const StageThresholds& t, double measured, const std::string& what) {
  GateResult g;
  g.name = std::string(stage_name(t.stage));
  g.kind = t.stage == Stage::kIntraNodeAllReduce ? "busbw" : "bw";
  g.size = t.size;
  g.measured = measured;
  g.limit = t.min_gbs;
  g.warn_band = t.warn_band;
  g.status = judge_minimum(measured, t.min_gbs, t.warn_band);
  g.message = strf("%s %s: %.2f GB/s, minimum %.2f (warn below %.2f): %s", g.name.c_str(),
                   what.c_str(), measured, t.min_gbs, t.min_gbs * (1.0 + t.warn_band),
                   std::string(gate_status_name(g.status)).c_str());
  return g;
}

Verdict verdict_of(GateStatus s) {
  return s == GateStatus::kFail ? Verdict::kFail : s == GateStatus::kWarn ? Verdict::kWarn : Verdict::kPass;
}

void pairs_gate(Report& r, const StageThresholds& t, NodeNotes& notes) {
  const PairMatrix& m = r.pairs;
  if (!m.ran) {
    r.notes.push_back("gate pairs not evaluated: " + m.note);
    return;
  }
  GateResult g = stage_gate(t, m.slowest_gbs, strf("slowest pair node %d <-> node %d", m.slow_a, m.slow_b));
  r.gates.push_back(g);
  if (g.status == GateStatus::kPass) return;
  // Pairs below the limit (or in the band); the node in every one of them is the culprit.
  const size_t n = m.gbs.size();
  std::vector<std::pair<int, int>> bad;
  std::map<int, int> seen;
  for (size_t a = 0; a < n; ++a)
    for (size_t b = a + 1; b < n; ++b)
      if (judge_minimum(m.gbs[a][b], t.min_gbs, t.warn_band) == g.status) {
        bad.emplace_back(static_cast<int>(a), static_cast<int>(b));
        ++seen[static_cast<int>(a)];
        ++seen[static_cast<int>(b)];
      }
  std::set<int> blamed;
  for (const auto& [node, count] : seen)
    if (bad.size() >= 2 && count == static_cast<int>(bad.size())) blamed.insert(node);
  if (blamed.empty())
    for (const auto& [node, count] : seen) blamed.insert(node);
  for (int node : blamed) {
    std::string pairs;
    for (const auto& [a, b] : bad)
      if (a == node || b == node)
        pairs += strf("%s%d-%d %.2f GB/s", pairs.empty() ? "" : ", ", a, b, m.gbs[static_cast<size_t>(a)][static_cast<size_t>(b)]);
    notes.add(node, verdict_of(g.status),
              strf("pairs below %.2f GB/s: %s", t.min_gbs * (g.status == GateStatus::kWarn ? 1.0 + t.warn_band : 1.0),
                   pairs.c_str()));
  }
}

void per_node_gate(Report& r, const StageThresholds& t, const std::vector<double>& per_node,
                   const std::vector<bool>& measured, NodeNotes& notes, const std::string& what) {
  double worst = 0.0;
  bool any = false;
  for (size_t k = 0; k < per_node.size(); ++k) {
    if (!measured[k]) continue;
    worst = any ? std::min(worst, per_node[k]) : per_node[k];
    any = true;
    const GateStatus s = judge_minimum(per_node[k], t.min_gbs, t.warn_band);
    if (s != GateStatus::kPass)
      notes.add(static_cast<int>(k), verdict_of(s),
                strf("%s %s %.2f GB/s, minimum %.2f", std::string(stage_name(t.stage)).c_str(),
                     what.c_str(), per_node[k], t.min_gbs));
  }
  if (!any) {
    r.notes.push_back("gate " + std::string(stage_name(t.stage)) + " not evaluated: nothing measured");
    return;
  }
  r.gates.push_back(stage_gate(t, worst, "worst node"));
}

void stage_gates(Report& r, NodeNotes& notes) {
  if (!r.options.thresholds) return;
  const size_t nodes = notes.nodes.size();
  for (const StageThresholds& t : r.options.thresholds->stages) {
    switch (t.stage) {
      case Stage::kPairs:
        pairs_gate(r, t, notes);
        break;
      case Stage::kIntraNodeAllReduce: {
        if (!r.intra.ran) {
          r.notes.push_back("gate intra_node_all_reduce not evaluated: " + r.intra.note);
          break;
        }
        per_node_gate(r, t, r.intra.busbw, std::vector<bool>(r.intra.busbw.size(), true), notes,
                      "busbw @ " + format_size(r.intra.size));
        break;
      }
      case Stage::kH2D:
      case Stage::kD2H: {
        // Per node: its slowest GPU.
        std::vector<double> worst(nodes, 0.0);
        std::vector<bool> measured(nodes, false);
        for (size_t rank = 0; rank < r.copies.size() && rank < r.environment.ranks.size(); ++rank) {
          const CopyBandwidth& c = r.copies[rank];
          if (!c.ran) continue;
          const size_t k = static_cast<size_t>(r.environment.ranks[rank].node);
          const double v = t.stage == Stage::kH2D ? c.h2d_gbs : c.d2h_gbs;
          worst[k] = measured[k] ? std::min(worst[k], v) : v;
          measured[k] = true;
        }
        per_node_gate(r, t, worst, measured, notes, "slowest GPU");
        break;
      }
      case Stage::kIoWrite: {
        std::vector<double> bw(nodes, 0.0);
        std::vector<bool> measured(nodes, false);
        for (size_t k = 0; k < r.io.size() && k < nodes; ++k) {
          bw[k] = r.io[k].write_gbs;
          measured[k] = r.io[k].ran;
        }
        per_node_gate(r, t, bw, measured, notes, "write");
        break;
      }
    }
  }
}

// Worse of the placements that ran, or -1.
double worse_busbw(const Row& row) {
  double w = -1.0;
  for (const Placement* p : {&row.out_of_place, &row.in_place})
    if (p->ran) w = w < 0.0 ? p->bus_bw : std::min(w, p->bus_bw);
  return w;
}

void baseline_gates(Report& r, NodeNotes& notes) {
  if (!r.options.baseline) return;
  const Baseline& b = *r.options.baseline;
  const double band = kDefaultWarnBand;
  for (CheckOp op : b.ops) {
    // The largest size both runs measured.
    const BaselineRow* base = nullptr;
    const Row* row = nullptr;
    for (const BaselineRow& br : b.rows) {
      if (br.op != op) continue;
      for (const Row& x : r.rows)
        if (x.op == op && x.nominal_size == br.nominal_size && (!base || br.nominal_size > base->nominal_size)) {
          base = &br;
          row = &x;
        }
    }
    if (base == nullptr) {
      r.notes.push_back("baseline gate for " + std::string(check_op_name(op)) +
                        " not evaluated: no size measured by both runs");
      continue;
    }
    GateResult g;
    g.op = op;
    g.name = std::string(check_op_name(op));
    g.kind = "baseline";
    g.size = base->nominal_size;
    g.measured = worse_busbw(*row);
    g.limit = b.fraction * base->bus_bw;
    g.warn_band = band;
    g.status = judge_minimum(g.measured, g.limit, band);
    g.message = strf("%s busbw @ %s: %.2f GB/s, baseline %.2f x %.2f = %.2f (%s): %s", g.name.c_str(),
                     format_size(g.size).c_str(), g.measured, base->bus_bw, b.fraction, g.limit,
                     b.source.c_str(), std::string(gate_status_name(g.status)).c_str());
    r.gates.push_back(g);
  }
  if (b.slowest_pair_gbs > 0.0 && r.pairs.ran) {
    StageThresholds t;
    t.stage = Stage::kPairs;
    t.min_gbs = b.fraction * b.slowest_pair_gbs;
    t.warn_band = band;
    const size_t before = r.gates.size();
    pairs_gate(r, t, notes);
    if (r.gates.size() > before) {
      r.gates.back().kind = "baseline";
      r.gates.back().message += strf(" (baseline slowest pair %.2f x %.2f)", b.slowest_pair_gbs, b.fraction);
    }
  }
}

}  // namespace

std::string node_verdict_line(const NodeVerdict& v) {
  const std::string reasons = join(v.reasons, "; ");
  return strf("node %d (%s): %s \xE2\x80\x94 %s", v.node, v.host.c_str(),
              std::string(verdict_name(v.verdict)).c_str(), reasons.empty() ? "ok" : reasons.c_str());
}

void evaluate_stages(Report& r) {
  const std::vector<int> leaders = node_leaders(r.environment.ranks);
  NodeNotes notes;
  for (size_t k = 0; k < leaders.size(); ++k) {
    NodeVerdict v;
    v.node = static_cast<int>(k);
    v.host = leaders[k] >= 0 ? r.environment.ranks[static_cast<size_t>(leaders[k])].host : "?";
    notes.nodes.push_back(v);
  }
  // Fabric and affinity, judged on each node.
  for (size_t k = 0; k < r.fabric.size() && k < leaders.size(); ++k) {
    const NodeFabric& f = r.fabric[k];
    if (f.fabric_status == 2) notes.add(static_cast<int>(k), Verdict::kFail, "fabric: " + f.fabric_message);
    if (f.fabric_status == 1) notes.add(static_cast<int>(k), Verdict::kWarn, "fabric: " + f.fabric_message);
    if (f.affinity_status == 1) notes.add(static_cast<int>(k), Verdict::kWarn, "affinity: " + f.affinity);
  }
  for (size_t k = 0; k < r.io.size() && k < leaders.size(); ++k)
    if (!r.io[k].ran && r.io[k].note.rfind("error", 0) == 0)
      notes.add(static_cast<int>(k), Verdict::kFail, "io-dir " + r.io[k].note);
  // Environment warnings name their host.
  for (const std::string& w : r.environment.warnings)
    for (NodeVerdict& v : notes.nodes)
      if (w.rfind("host " + v.host + ":", 0) == 0)
        notes.add(v.node, Verdict::kWarn, w.substr(0, w.find(';')));
  // Stragglers and slow nodes of the pair matrix (relative rules, warnings).
  if (r.stragglers.ran)
    for (int rank : r.stragglers.ranks)
      if (static_cast<size_t>(rank) < r.environment.ranks.size())
        notes.add(r.environment.ranks[static_cast<size_t>(rank)].node, Verdict::kWarn,
                  strf("rank %d straggles: %.1f us per all_reduce, median %.1f us (> %.1fx)", rank,
                       r.stragglers.rank_us[static_cast<size_t>(rank)], r.stragglers.median_us,
                       r.stragglers.factor));
  if (r.pairs.ran)
    for (int node : r.pairs.slow_nodes) {
      double best = 0.0;
      for (double g : r.pairs.gbs[static_cast<size_t>(node)]) best = std::max(best, g);
      notes.add(node, Verdict::kWarn,
                strf("slow network: its best pair %.2f GB/s, under %.2f x the median node's %.2f GB/s",
                     best, r.pairs.slow_fraction, r.pairs.reference_gbs));
    }
  stage_gates(r, notes);
  baseline_gates(r, notes);
  r.node_verdicts = notes.nodes;
  for (const NodeVerdict& v : r.node_verdicts)
    if (v.verdict == Verdict::kFail) r.failures.push_back(node_verdict_line(v));
}

}  // namespace zt::check
