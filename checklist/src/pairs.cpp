// The pair matrix: bandwidth between the leaders of every pair of nodes, one pair at a
// time, and which pair and node are slow (include/zt/check/stages.hpp).
#include <algorithm>
#include <chrono>

#include "buffer.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::check {
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<int> node_leaders(const std::vector<RankInfo>& ranks) {
  int nodes = 0;
  for (const RankInfo& r : ranks) nodes = std::max(nodes, r.node + 1);
  std::vector<int> leaders(static_cast<size_t>(nodes), -1);
  for (const RankInfo& r : ranks) {
    int& leader = leaders[static_cast<size_t>(r.node)];
    if (leader < 0 || r.rank < leader) leader = r.rank;
  }
  return leaders;
}

void analyse_pairs(PairMatrix& m) {
  const size_t n = m.gbs.size();
  m.slow_a = m.slow_b = -1;
  m.slow_nodes.clear();
  std::vector<double> best(n, 0.0);  // [node] its fastest pair
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const double g = m.gbs[a][b];
      if (m.slow_a < 0 || g < m.slowest_gbs) {
        m.slow_a = static_cast<int>(a);
        m.slow_b = static_cast<int>(b);
        m.slowest_gbs = g;
      }
      best[a] = std::max(best[a], g);
      best[b] = std::max(best[b], g);
    }
  }
  m.reference_gbs = median_of(best);
  if (n < 3) return;  // with two nodes the slow pair has no slow end to name
  for (size_t k = 0; k < n; ++k)
    if (best[k] < 0.5 * m.reference_gbs) m.slow_nodes.push_back(static_cast<int>(k));
}

PairMatrix run_pairs(comm::Comm& bench, comm::Comm& control, const std::vector<RankInfo>& ranks,
                     uint64_t bytes, int iters) {
  using Clock = std::chrono::steady_clock;
  PairMatrix m;
  m.bytes = bytes;
  m.iters = iters;
  m.leaders = node_leaders(ranks);
  const size_t n = m.leaders.size();
  if (n < 2) {
    m.note = "one node: no pairs to measure";
    return m;
  }
  ZT_CHECK(bytes > 0 && iters > 0, "pair test needs bytes > 0 and iters > 0", "see --pair-bytes");
  const int me = bench.rank();
  const bool leader = std::find(m.leaders.begin(), m.leaders.end(), me) != m.leaders.end();
  std::unique_ptr<Buffer> send, recv;  // [bytes] each, on leaders only
  if (leader) {
    send = make_buffer(bench.memory(), bytes);
    recv = make_buffer(bench.memory(), bytes);
    send->zero(bytes);
  }
  m.gbs.assign(n, std::vector<double>(n, 0.0));
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const int ra = m.leaders[a], rb = m.leaders[b];
      double my_seconds = 0.0;
      control.barrier();
      if (me == ra || me == rb) {
        const int peer = me == ra ? rb : ra;
        bench.sendrecv(send->data(), peer, recv->data(), peer, bytes, DType::kU8);  // warm-up
        bench.synchronize();
        // Each exchange timed alone; the fastest one counts: a slow link makes every
        // exchange slow, while a shared or oversubscribed host only delays some.
        std::vector<double> times;  // [iters] seconds
        for (int i = 0; i < iters; ++i) {
          const Clock::time_point t0 = Clock::now();
          bench.sendrecv(send->data(), peer, recv->data(), peer, bytes, DType::kU8);
          bench.synchronize();
          times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        my_seconds = *std::min_element(times.begin(), times.end());
      }
      double seconds = 0.0;  // the slower of the two leaders
      control.all_reduce(&my_seconds, &seconds, 1, DType::kF64, comm::ReduceOp::kMax);
      const double g = seconds > 0.0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
      m.gbs[a][b] = m.gbs[b][a] = g;
    }
  }
  m.ran = true;
  analyse_pairs(m);
  return m;
}

}  // namespace zt::check
