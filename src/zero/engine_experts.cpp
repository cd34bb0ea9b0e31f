// Expert parallelism in the ZeRO engine (moe.expert_parallel = N; docs/zero.md "Expert
// parallelism"). The world is D x N ranks: each expert group of N consecutive ranks
// splits every block's experts (its model holds ParamLayout::expert_slice and runs
// ExpertParallelMoe over the group), and ZeRO runs over the D ranks of each group
// position, on units whose expert tensors are that position's slice. So
//   - an expert's gradient is summed over its group's tokens by the layer's backward and
//     over the D groups by ZeRO's reduction: every token of the world, once;
//   - a dense parameter (attention, norms, router, embedding, head) is replicated over
//     the group: ZeRO sums it over D ranks, reduce_dense_grads over the N of the group;
//   - every rank's gradient enters pre-divided by D x N (micro_step), so both are means
//     over the world, as with N = 1.
// Every rank of a group holds the same dense elements after the same update, so they
// stay equal without a broadcast.
#include <algorithm>
#include <vector>

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::zero {

namespace detail {

ExpertSplit split_experts(const model::Config& cfg, comm::Comm& world, const EngineOptions& opt,
                          comm::Comm* control) {
  opt.validate_experts(world.size(), cfg);  // the same on every rank
  ExpertSplit s;
  if (opt.expert_parallel <= 1) return s;
  s.parts = opt.expert_parallel;
  const int r = world.rank();
  s.experts = world.split(r / s.parts, r);
  s.data = world.split(r % s.parts, r);
  if (control) {  // (the same ranks, in the same order, as world's groups)
    s.experts_host = control->split(r / s.parts, r);
    s.data_host = control->split(r % s.parts, r);
  }
  return s;
}

std::unique_ptr<model::TrainableModel> with_experts(std::unique_ptr<model::TrainableModel> m,
                                                    ExpertSplit& split) {
  if (split.parts > 1) m->set_expert_group(*split.experts);
  return m;
}

}  // namespace detail

namespace {

// The owned gradient elements of unit u split at `dense`: [lo, mid) dense, [mid, hi)
// experts, in unit coordinates (lo = the owned slice's first element).
struct OwnedSplit {
  int64_t lo, mid, hi;
};
OwnedSplit owned_split(const UnitPartition& p, int64_t dense) {
  const int64_t lo = std::min(p.begin, p.numel), hi = std::min(p.begin + p.owned, p.numel);
  return {lo, std::clamp(dense, lo, hi), hi};
}

}  // namespace

void Engine::Impl::reduce_dense_grads() {
  for (int u = 0; u < units; ++u) {
    if (!trainable(u)) continue;
    const UnitPartition& p = part.unit(u);
    const size_t i = static_cast<size_t>(u);
    const int64_t dense = layout.dense_numel(u);
    float* g = nullptr;
    size_t count = 0;
    if (opt.stage == 0) {  // AdamW updates the whole unit on every rank
      g = full_grads[i].data();
      count = static_cast<size_t>(dense);
    } else {
      const OwnedSplit s = owned_split(p, dense);
      g = opt.stage == 1 ? full_grads[i].data() + s.lo : grad_shard[i].data();
      count = static_cast<size_t>(s.mid - s.lo);
    }
    // (the same counts on every rank of a group: they share the partition)
    if (count > 0) experts_space->all_reduce(g, g, count, DType::kF32, comm::ReduceOp::kSum);
  }
}

void Engine::Impl::expert_step_sums(double sums[2]) {
  double sq[2] = {0.0, 0.0};  // dense, experts
  for (int part_kind = 0; part_kind < 2; ++part_kind) {
    for (int u = 0; u < units; ++u) {
      if (!trainable(u)) continue;
      const UnitPartition& p = part.unit(u);
      const size_t i = static_cast<size_t>(u);
      const OwnedSplit s = owned_split(p, layout.dense_numel(u));
      const float* g = opt.stage <= 1 ? full_grads[i].data() + s.lo : grad_shard[i].data();
      if (part_kind == 0)
        mem->sum_squares_add(g, static_cast<size_t>(s.mid - s.lo));
      else
        mem->sum_squares_add(g + (s.mid - s.lo), static_cast<size_t>(s.hi - s.mid));
    }
    sq[part_kind] = mem->sum_squares_take();
  }
  sums[0] = sq[0] / static_cast<double>(ex.parts) + sq[1];
  groups.host().all_reduce(sums, sums, 2, DType::kF64, comm::ReduceOp::kSum);
  ex.experts_on_host().all_reduce(sums, sums, 2, DType::kF64, comm::ReduceOp::kSum);
}

void Engine::Impl::share_dense_after_load() {
  for (int u = 0; u < units; ++u) {
    const UnitPartition& p = part.unit(u);
    const size_t i = static_cast<size_t>(u);
    const OwnedSplit s = owned_split(p, layout.dense_numel(u));
    const size_t count = static_cast<size_t>(s.mid - s.lo);
    if (count == 0) continue;  // (the same on every rank of a group: they share the partition)
    experts_space->broadcast(owned_params(u), count, DType::kF32, 0);
    if (!trainable(u)) continue;
    const int64_t mo = opt.stage == 0 ? p.begin : 0;  // stage 0 keeps whole moments
    experts_space->broadcast(adam_m[i].data() + mo, count, DType::kF32, 0);
    experts_space->broadcast(adam_v[i].data() + mo, count, DType::kF32, 0);
  }
}

void Engine::Impl::unit_to_host_all_experts(int u, std::span<float> dst, detail::Buf<float>& full) {
  const model::BlockOffsets& o = layout.block_offsets();
  const int64_t numel = part.unit(u).numel, dense = o.experts_gate_up;
  const int64_t gate_up = o.experts_down - o.experts_gate_up, down = numel - o.experts_down;
  const int64_t whole = dense + ex.parts * (gate_up + down);
  if (static_cast<int64_t>(dst.size()) != whole)
    throw InputError(strf("gather_full_params: unit %d holds %zu elements, the whole unit %lld "
                          "(expert parallelism %d)",
                          u, dst.size(), static_cast<long long>(whole), ex.parts),
                     "make the Parameters from model::ParamLayout(cfg) (every expert), not from "
                     "the engine's model().layout() (this rank's experts)");
  std::vector<float> mine(static_cast<size_t>(numel));  // this rank's unit
  unit_to_host(u, mine, full);
  std::copy_n(mine.begin(), dense, dst.begin());
  // Rank e of the group holds experts [e E/N, (e+1) E/N): rank order is expert order.
  comm::Comm& host = ex.experts_on_host();  // (mine and dst: host memory)
  host.all_gather(mine.data() + dense, dst.data() + dense, static_cast<size_t>(gate_up),
                  DType::kF32);
  host.all_gather(mine.data() + o.experts_down, dst.data() + dense + ex.parts * gate_up,
                  static_cast<size_t>(down), DType::kF32);
}

}  // namespace zt::zero
