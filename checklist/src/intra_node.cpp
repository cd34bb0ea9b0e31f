// All-reduce within each node at one size: the NVLink (or shared-memory) bandwidth the
// intra-node thresholds gate (include/zt/check/stages.hpp).
#include <algorithm>
#include <chrono>

#include "buffer.hpp"
#include "zt/check/bandwidth.hpp"
#include "zt/check/stages.hpp"

namespace zt::check {

IntraNode run_intra_node(comm::Comm& bench, comm::Comm& control, const std::vector<RankInfo>& ranks,
                         uint64_t bytes, int iters, int warmup) {
  using Clock = std::chrono::steady_clock;
  IntraNode r;
  r.size = bytes;
  const std::vector<int> leaders = node_leaders(ranks);
  const int me = control.rank();
  const int my_node = ranks[static_cast<size_t>(me)].node;
  const auto on_node = std::count_if(ranks.begin(), ranks.end(),
                                     [&](const RankInfo& x) { return x.node == my_node; });
  int min_ranks = static_cast<int>(on_node);
  int local = min_ranks;
  control.all_reduce(&local, &min_ranks, 1, DType::kI32, comm::ReduceOp::kMin);
  if (min_ranks < 2) {
    r.note = "a node has one rank: nothing to all-reduce within it";
    return r;
  }
  std::unique_ptr<comm::Comm> node_bench = bench.split(my_node, me);
  std::unique_ptr<comm::Comm> node_control = control.split(my_node, me);
  const size_t count = std::max<size_t>(bytes / sizeof(float), 1);
  std::unique_ptr<Buffer> send = make_buffer(bench.memory(), count * sizeof(float));  // [count] f32
  std::unique_ptr<Buffer> recv = make_buffer(bench.memory(), count * sizeof(float));  // [count] f32
  send->zero(count * sizeof(float));
  node_control->barrier();
  for (int i = 0; i < warmup; ++i)
    node_bench->all_reduce(send->data(), recv->data(), count, DType::kF32, comm::ReduceOp::kSum);
  node_bench->synchronize();
  node_control->barrier();
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < iters; ++i)
    node_bench->all_reduce(send->data(), recv->data(), count, DType::kF32, comm::ReduceOp::kSum);
  node_bench->synchronize();
  const double mine = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  double slowest = 0.0;  // the node's time: its slowest rank
  node_control->all_reduce(&mine, &slowest, 1, DType::kF64, comm::ReduceOp::kMax);
  const double busbw = bus_bw_gbs(CheckOp::kAllReduce, count * sizeof(float), slowest,
                                  node_bench->size());
  std::vector<double> per_rank(static_cast<size_t>(control.size()));  // [rank] its node's busbw
  control.all_gather(&busbw, per_rank.data(), 1, DType::kF64);
  for (int leader : leaders) r.busbw.push_back(per_rank[static_cast<size_t>(leader)]);
  r.size = count * sizeof(float);
  r.ran = true;
  return r;
}

}  // namespace zt::check
