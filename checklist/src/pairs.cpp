// The pair matrix: bandwidth between the leaders of every pair of nodes, one pair at a
// time, and which pair and node are slow (include/zt/check/stages.hpp).
#include <algorithm>
#include <chrono>

#include "buffer.hpp"
#include "zt/check/stages.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/progress.hpp"

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
    if (best[k] < m.slow_fraction * m.reference_gbs) m.slow_nodes.push_back(static_cast<int>(k));
}

std::vector<std::vector<std::pair<int, int>>> pair_rounds(int n) {
  std::vector<std::vector<std::pair<int, int>>> rounds;
  if (n < 2) return rounds;
  const int m = n % 2 == 0 ? n : n + 1;  // with a resting slot m-1 when n is odd
  for (int r = 0; r < m - 1; ++r) {
    std::vector<std::pair<int, int>> round;
    // Slot m-1 stays put; the others turn one place each round.
    auto add = [&](int a, int b) {
      if (a >= n || b >= n) return;  // the resting slot
      round.emplace_back(std::min(a, b), std::max(a, b));
    };
    add(m - 1, r);
    for (int i = 1; i < m / 2; ++i) add((r + i) % (m - 1), (r - i + (m - 1)) % (m - 1));
    std::sort(round.begin(), round.end());
    rounds.push_back(round);
  }
  return rounds;
}

namespace {

// `iters` timed exchanges of `bytes` with `peer` after one warm-up; the fastest one's
// seconds (a slow link slows every exchange, a busy host only some).
double exchange_with(comm::Comm& bench, Buffer& send, Buffer& recv, int peer, uint64_t bytes, int iters) {
  using Clock = std::chrono::steady_clock;
  bench.sendrecv(send.data(), peer, recv.data(), peer, bytes, DType::kU8);  // warm-up
  bench.synchronize();
  double best = 0.0;
  for (int i = 0; i < iters; ++i) {
    const Clock::time_point t0 = Clock::now();
    bench.sendrecv(send.data(), peer, recv.data(), peer, bytes, DType::kU8);
    bench.synchronize();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    best = i == 0 ? t : std::min(best, t);
  }
  return best;
}

double gbs_of(uint64_t bytes, double seconds) {
  return seconds > 0.0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

}  // namespace

PairMatrix run_pairs(comm::Comm& bench, comm::Comm& control, const std::vector<RankInfo>& ranks,
                     uint64_t bytes, int iters, bool rounds, double slow_fraction) {
  PairMatrix m;
  m.slow_fraction = slow_fraction;
  m.bytes = bytes;
  m.iters = iters;
  m.rounds = rounds;
  m.leaders = node_leaders(ranks);
  const size_t n = m.leaders.size();
  if (n < 2) {
    m.note = "one node: no pairs to measure";
    return m;
  }
  ZT_CHECK(bytes > 0 && iters > 0, "pair test needs bytes > 0 and iters > 0", "see --pair-bytes");
  const int me = bench.rank();
  const auto mine = std::find(m.leaders.begin(), m.leaders.end(), me);
  const int my_node = mine == m.leaders.end() ? -1 : static_cast<int>(mine - m.leaders.begin());
  std::unique_ptr<Buffer> send, recv;  // [bytes] each, on leaders only
  if (my_node >= 0) {
    send = make_buffer(bench.memory(), bytes);
    recv = make_buffer(bench.memory(), bytes);
    send->zero(bytes);
  }
  m.gbs.assign(n, std::vector<double>(n, 0.0));
  // Pairs measured, on rank 0; the last pair's bandwidth rides in each line.
  Progress progress("check pairs", n * (n - 1) / 2, ProgressUnit::kPairs);
  auto measured = [&](size_t a, size_t b, size_t count) {
    progress.note(strf("nodes %zu-%zu %.2f GB/s", a, b, m.gbs[a][b]));
    progress.advance(count);
  };
  if (rounds) {
    std::vector<double> seconds(static_cast<size_t>(control.size()));  // [rank] this round's time
    for (const auto& round : pair_rounds(static_cast<int>(n))) {
      double my_seconds = 0.0;
      control.barrier();
      for (const auto& [a, b] : round)
        if (a == my_node || b == my_node)
          my_seconds = exchange_with(bench, *send, *recv, m.leaders[static_cast<size_t>(a == my_node ? b : a)],
                                     bytes, iters);
      control.all_gather(&my_seconds, seconds.data(), 1, DType::kF64);
      for (const auto& [a, b] : round) {
        const double t = std::max(seconds[static_cast<size_t>(m.leaders[static_cast<size_t>(a)])],
                                  seconds[static_cast<size_t>(m.leaders[static_cast<size_t>(b)])]);
        m.gbs[static_cast<size_t>(a)][static_cast<size_t>(b)] = m.gbs[static_cast<size_t>(b)][static_cast<size_t>(a)] =
            gbs_of(bytes, t);
      }
      if (!round.empty())
        measured(static_cast<size_t>(round.back().first), static_cast<size_t>(round.back().second), round.size());
    }
  } else {
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = a + 1; b < n; ++b) {
        const int ra = m.leaders[a], rb = m.leaders[b];
        double my_seconds = 0.0;
        control.barrier();
        if (me == ra || me == rb) my_seconds = exchange_with(bench, *send, *recv, me == ra ? rb : ra, bytes, iters);
        double seconds = 0.0;  // the slower of the two leaders
        control.all_reduce(&my_seconds, &seconds, 1, DType::kF64, comm::ReduceOp::kMax);
        m.gbs[a][b] = m.gbs[b][a] = gbs_of(bytes, seconds);
        measured(a, b, 1);
      }
    }
  }
  progress.finish();
  m.ran = true;
  analyse_pairs(m);
  return m;
}

}  // namespace zt::check
