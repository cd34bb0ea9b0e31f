// report.md sections for the stages beyond the sweep: per-node verdicts, fabric, copies
// and I/O, intra-node all-reduce, the pair matrix, stragglers, plots
// (report_md.cpp calls these).
#include "join.hpp"
#include "report_md_stages.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/escape.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {
std::string host_of_node(const Report& r, int node) {
  const std::vector<int> leaders = node_leaders(r.environment.ranks);
  if (node < 0 || node >= static_cast<int>(leaders.size())) return "?";
  return r.environment.ranks[static_cast<size_t>(leaders[static_cast<size_t>(node)])].host;
}

namespace {
// A node's host name as Markdown text.
std::string md_host(const Report& r, int node) { return markdown_text(host_of_node(r, node)); }
}  // namespace

std::string status_line(int status, const std::string& text) {
  if (status < 0) return text;
  return std::string(status == 0 ? "PASS" : status == 1 ? "WARN" : "FAIL") + ": " + text;
}

std::string node_verdicts_md(const Report& r) {
  if (r.node_verdicts.empty()) return {};
  std::string s = "## Per node\n\nWhat can be pinned on a node: its fabric, GPU-NIC affinity, copies, I/O "
                  "directory, host warnings, stragglers among its ranks, its pairs. Results of the "
                  "world collectives are in the gates below.\n\n";
  for (const NodeVerdict& v : r.node_verdicts) s += "- " + markdown_text(node_verdict_line(v)) + "\n";
  return s + "\n";
}

std::string stages_md(const Report& r) {
  std::string s = "## Fabric\n\n| node | host | libfabric providers | /sys/class/infiniband | expects | NCCL network | GPU-NIC affinity |\n"
                  "|---|---|---|---|---|---|---|\n";
  for (size_t k = 0; k < r.fabric.size(); ++k) {
    const NodeFabric& f = r.fabric[k];
    s += strf("| %zu | %s | %s | %s | %s | %s | %s |\n", k, md_host(r, static_cast<int>(k)).c_str(),
              f.providers.empty() ? "(none)" : markdown_text(join(f.providers, ", ")).c_str(), f.infiniband_sysfs ? "yes" : "no",
              markdown_text(f.expected).c_str(), markdown_text(status_line(f.fabric_status, f.nccl_probed ? f.fabric_message : f.nccl_note)).c_str(),
              markdown_text(status_line(f.affinity_status, f.affinity)).c_str());
  }
  s += "\n## Host-device copies and I/O directory\n\n| rank | node | h2d (GB/s) | d2h (GB/s) | note |\n|---|---|---|---|---|\n";
  for (size_t rank = 0; rank < r.copies.size(); ++rank) {
    const CopyBandwidth& c = r.copies[rank];
    const int node = rank < r.environment.ranks.size() ? r.environment.ranks[rank].node : -1;
    s += c.ran ? strf("| %zu | %d | %.2f | %.2f | %s |\n", rank, node, c.h2d_gbs, c.d2h_gbs, markdown_text(c.note).c_str())
               : strf("| %zu | %d | - | - | %s |\n", rank, node, markdown_text(c.note).c_str());
  }
  s += "\n| node | host | io-dir write (GB/s) | bytes | note |\n|---|---|---|---|---|\n";
  for (size_t k = 0; k < r.io.size(); ++k) {
    const IoBandwidth& io = r.io[k];
    s += io.ran ? strf("| %zu | %s | %.2f | %s | %s |\n", k, md_host(r, static_cast<int>(k)).c_str(), io.write_gbs,
                       format_size_approx(io.bytes).c_str(), markdown_text(io.note).c_str())
                : strf("| %zu | %s | - | - | %s |\n", k, md_host(r, static_cast<int>(k)).c_str(), markdown_text(io.note).c_str());
  }
  s += "\n## All-reduce within each node\n\n";
  if (!r.intra.ran) {
    s += markdown_text(r.intra.note) + ".\n\n";
  } else {
    s += "| node | host | size | busbw (GB/s) |\n|---|---|---|---|\n";
    for (size_t k = 0; k < r.intra.busbw.size(); ++k)
      s += strf("| %zu | %s | %s | %.2f |\n", k, md_host(r, static_cast<int>(k)).c_str(),
                format_size(r.intra.size).c_str(), r.intra.busbw[k]);
    s += "\n";
  }
  const PairMatrix& m = r.pairs;
  s += "## Pairs between nodes\n\n";
  if (!m.ran) {
    s += markdown_text(m.note) + ".\n\n";
  } else {
    s += strf("The leaders (lowest rank) of each pair of nodes exchange %s both ways at once, %d times "
              "(the fastest counts), %s; GB/s per direction.\n\n| node |", format_size(m.bytes).c_str(), m.iters,
              m.rounds ? "in rounds of disjoint pairs" : "one pair at a time");
    for (size_t b = 0; b < m.gbs.size(); ++b) s += strf(" %zu %s |", b, md_host(r, static_cast<int>(b)).c_str());
    s += "\n|---|";
    for (size_t b = 0; b < m.gbs.size(); ++b) s += "---|";
    s += "\n";
    for (size_t a = 0; a < m.gbs.size(); ++a) {
      s += strf("| %zu %s (rank %d) |", a, md_host(r, static_cast<int>(a)).c_str(), m.leaders[a]);
      for (size_t b = 0; b < m.gbs.size(); ++b) s += a == b ? " - |" : strf(" %.2f |", m.gbs[a][b]);
      s += "\n";
    }
    s += strf("\nSlowest pair: node %d (%s, rank %d) <-> node %d (%s, rank %d), %.2f GB/s; median of each "
              "node's best pair %.2f GB/s.\n",
              m.slow_a, md_host(r, m.slow_a).c_str(), m.leaders[static_cast<size_t>(m.slow_a)], m.slow_b,
              md_host(r, m.slow_b).c_str(), m.leaders[static_cast<size_t>(m.slow_b)], m.slowest_gbs,
              m.reference_gbs);
    for (int k : m.slow_nodes)
      s += strf("Slow node: node %d (%s, rank %d): even its best pair is under %.2f x that median.\n", k,
                md_host(r, k).c_str(), m.leaders[static_cast<size_t>(k)], m.slow_fraction);
    s += "\n";
  }
  const Stragglers& st = r.stragglers;
  if (st.ran && st.rank_us.size() == r.environment.ranks.size()) {
    s += strf("## Stragglers\n\nEach rank's mean time of %d rounds of (barrier, all_reduce of %s); a rank above "
              "%.1fx the median (%.1f us) is a straggler.\n\n| rank | node | host | time (us) | x median |\n"
              "|---|---|---|---|---|\n",
              st.iters, format_size(st.bytes).c_str(), st.factor, st.median_us);
    for (size_t rank = 0; rank < st.rank_us.size(); ++rank) {
      const RankInfo& info = r.environment.ranks[rank];
      s += strf("| %zu | %d | %s | %.1f | %.2f |\n", rank, info.node, markdown_text(info.host).c_str(), st.rank_us[rank],
                st.median_us > 0.0 ? st.rank_us[rank] / st.median_us : 0.0);
    }
    s += st.ranks.empty() ? "\nNo straggler.\n\n" : "\n";
    for (int rank : st.ranks) s += strf("Straggler: rank %d (node %d, %s).\n", rank,
                                        r.environment.ranks[static_cast<size_t>(rank)].node,
                                        markdown_text(r.environment.ranks[static_cast<size_t>(rank)].host).c_str());
    if (!st.ranks.empty()) s += "\n";
  }
  s += "## Plots\n\n";
  if (r.plots.empty()) s += (r.plot_note.empty() ? std::string("No plots (no --report directory).") : markdown_text(r.plot_note)) + "\n\n";
  for (const std::string& png : r.plots) s += "![" + png.substr(0, png.find('.')) + "](" + png + ")\n\n";
  return s;
}

}  // namespace zt::check
