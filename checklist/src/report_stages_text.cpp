// Plain-text rendering of the stages beyond the sweep, for stdout
// (include/zt/check/report_writer.hpp).
#include "join.hpp"
#include "report_md_stages.hpp"
#include "zt/check/report_writer.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"

namespace zt::check {

std::string fabric_text(const Report& r) {
  std::string s = "#\n# fabric (per node, from its leader)\n";
  for (size_t k = 0; k < r.fabric.size(); ++k) {
    const NodeFabric& f = r.fabric[k];
    const std::string providers = join(f.providers, ",");
    s += strf("#   node %zu (%s): providers %s; /sys/class/infiniband %s; expects %s\n", k,
              host_of_node(r, static_cast<int>(k)).c_str(), providers.empty() ? "(none)" : providers.c_str(),
              f.infiniband_sysfs ? "yes" : "no", f.expected.c_str());
    s += "#     NCCL network: " + status_line(f.fabric_status, f.nccl_probed ? f.fabric_message : f.nccl_note) + "\n";
    s += "#     affinity: " + status_line(f.affinity_status, f.affinity) + "\n";
  }
  return s;
}

std::string node_text(const Report& r) {
  std::string s = "#\n# host<->device copies (pinned) and I/O directory write\n";
  for (size_t rank = 0; rank < r.copies.size(); ++rank) {
    const CopyBandwidth& c = r.copies[rank];
    if (c.ran)
      s += strf("#   rank %zu: h2d %.2f GB/s  d2h %.2f GB/s  (%s)\n", rank, c.h2d_gbs, c.d2h_gbs, c.note.c_str());
    else if (rank == 0 || c.note != r.copies[0].note)
      s += strf("#   rank %zu: %s\n", rank, c.note.c_str());
  }
  for (size_t k = 0; k < r.io.size(); ++k) {
    const IoBandwidth& io = r.io[k];
    if (io.ran)
      s += strf("#   node %zu (%s): io-dir write %.2f GB/s (%s, %s)\n", k,
                host_of_node(r, static_cast<int>(k)).c_str(), io.write_gbs,
                format_size_approx(io.bytes).c_str(), io.note.c_str());
    else
      s += strf("#   node %zu (%s): io-dir %s\n", k, host_of_node(r, static_cast<int>(k)).c_str(), io.note.c_str());
  }
  return s;
}

std::string pairs_text(const Report& r) {
  std::string s = "#\n# all_reduce within each node\n";
  if (!r.intra.ran) {
    s += "#   " + r.intra.note + "\n";
  } else {
    for (size_t k = 0; k < r.intra.busbw.size(); ++k)
      s += strf("#   node %zu (%s): busbw %.2f GB/s @ %s\n", k, host_of_node(r, static_cast<int>(k)).c_str(),
                r.intra.busbw[k], format_size(r.intra.size).c_str());
  }
  const PairMatrix& m = r.pairs;
  s += "#\n# pairs: node leaders exchange " + format_size(m.bytes) + " both ways (GB/s per direction; " +
       (m.rounds ? "rounds of disjoint pairs" : "one pair at a time") + ")\n";
  if (!m.ran) return s + "#   " + m.note + "\n";
  s += "#   node ";
  for (size_t b = 0; b < m.gbs.size(); ++b) s += strf(" %8zu", b);
  s += "\n";
  for (size_t a = 0; a < m.gbs.size(); ++a) {
    s += strf("#   %4zu ", a);
    for (size_t b = 0; b < m.gbs.size(); ++b) s += a == b ? strf(" %8s", "-") : strf(" %8.2f", m.gbs[a][b]);
    s += "\n";
  }
  s += strf("#   slowest pair: node %d (%s, rank %d) <-> node %d (%s, rank %d): %.2f GB/s; median node best %.2f GB/s\n",
            m.slow_a, host_of_node(r, m.slow_a).c_str(), m.leaders[static_cast<size_t>(m.slow_a)], m.slow_b,
            host_of_node(r, m.slow_b).c_str(), m.leaders[static_cast<size_t>(m.slow_b)], m.slowest_gbs,
            m.reference_gbs);
  for (int k : m.slow_nodes)
    s += strf("#   slow node: node %d (%s, rank %d): even its best pair is under %.2f x the median node's best\n",
              k, host_of_node(r, k).c_str(), m.leaders[static_cast<size_t>(k)], m.slow_fraction);
  return s;
}

std::string stragglers_text(const Report& r) {
  const Stragglers& st = r.stragglers;
  if (!st.ran) return {};
  std::string s = strf("#\n# stragglers: per-rank time of all_reduce %s, %d rounds (us); straggler above %.1fx median %.1f\n#  ",
                       format_size(st.bytes).c_str(), st.iters, st.factor, st.median_us);
  for (size_t rank = 0; rank < st.rank_us.size(); ++rank) s += strf(" r%zu:%.1f", rank, st.rank_us[rank]);
  s += "\n";
  if (st.ranks.empty()) s += "#   none\n";
  for (int rank : st.ranks) {
    if (static_cast<size_t>(rank) >= r.environment.ranks.size()) continue;
    const RankInfo& info = r.environment.ranks[static_cast<size_t>(rank)];
    s += strf("#   straggler: rank %d (node %d, %s): %.1f us\n", rank, info.node, info.host.c_str(),
              st.rank_us[static_cast<size_t>(rank)]);
  }
  return s;
}

}  // namespace zt::check
