// Expert parallelism in the ZeRO engine (moe.expert_parallel = N; docs/zero.md "Expert
// parallelism"). The world is D x N ranks: each expert group of N consecutive ranks
// splits every block's experts (its model holds ParamLayout::expert_slice and runs
// ExpertParallelMoe over the group), and ZeRO runs over the D ranks of each group
// position, on units whose expert tensors are that position's slice. So
//   - an expert's gradient is summed over its group's tokens by the layer's backward and
//     over the D groups by ZeRO's reduction: every token of the world, once;
//   - a dense parameter (attention, norms, router, embedding, head, the dense layers'
//     MLP, qwen2_moe's shared expert and its gate) is replicated over the group: ZeRO
//     sums it over D ranks, reduce_dense_grads over the N of the group;
//   - every rank's gradient enters pre-divided by D x N (micro_step), so both are means
//     over the world, as with N = 1.
// Every rank of a group holds the same dense elements after the same update, so they
// stay equal without a broadcast.
#include <algorithm>
#include <vector>

#include "engine_experts.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::zero::detail {

ExpertSpace::ExpertSpace(const model::Config& cfg, comm::Comm& world, const EngineOptions& opt,
                         comm::Comm* control, Space& mem,
                         const std::shared_ptr<offload::PinnedPool>& pinned) {
  opt.validate_experts(world.size(), cfg);  // the same on every rank
  if (opt.expert_parallel <= 1) return;
  parts_ = opt.expert_parallel;
  const int r = world.rank();
  experts_ = world.split(r / parts_, r);
  data_ = world.split(r % parts_, r);
  if (control) {  // (the same ranks, in the same order, as world's groups)
    experts_host_ = control->split(r / parts_, r);
    data_host_ = control->split(r % parts_, r);
  }
  on_space_ = staged(mem, pinned, experts_.get(), staged_);
}

std::unique_ptr<model::TrainableModel> ExpertSpace::with_experts(
    std::unique_ptr<model::TrainableModel> m) {
  if (parts_ > 1) m->set_expert_group(*experts_);
  return m;
}

void ExpertSpace::order_after(void* stream) {
  if (on_space_) on_space_->order_after(stream);  // the dense all-reduce
}

void ExpertSpace::sum_on_host(double* sums, size_t count) {
  if (parts_ > 1) experts_on_host().all_reduce(sums, sums, count, DType::kF64, comm::ReduceOp::kSum);
}

namespace {

// Elements [lo, hi) of unit u (unit coordinates: its owned slice, or the whole unit)
// around its experts: [lo, eb) and [ee, hi) replicated (dense), [eb, ee) this rank's
// experts. The dense part may sit on both sides (qwen2_moe's shared expert follows the
// experts); the pieces are empty where they do not meet [lo, hi).
struct Split {
  int64_t lo, eb, ee, hi;
  // f(first element relative to lo, count) for each non-empty dense piece.
  template <class F>
  void dense(F&& f) const {
    if (eb > lo) f(0, eb - lo);
    if (hi > ee) f(ee - lo, hi - ee);
  }
};
Split split(int64_t lo, int64_t hi, model::ParamLayout::ElementRange experts) {
  return {lo, std::clamp(experts.begin, lo, hi), std::clamp(experts.end, lo, hi), hi};
}
// The owned elements of a unit partition (owned_grads(u) and owned_params(u) start at lo
// whenever a piece is non-empty).
Split owned_split(const UnitPartition& p, model::ParamLayout::ElementRange experts) {
  return split(std::min(p.begin, p.numel), std::min(p.begin + p.owned, p.numel), experts);
}

}  // namespace

void ExpertSpace::reduce_dense_grads(const EngineContext& c, const model::ParamLayout& layout,
                                     Update& update) {
  for (int u = 0; u < c.part.num_units(); ++u) {
    if (!update.trainable(u)) continue;
    const model::ParamLayout::ElementRange experts = layout.expert_range(u);
    // Stage 0: AdamW updates the whole unit on every rank; else this rank's owned slice.
    const Split s = c.opt.stage == 0 ? split(0, c.part.unit(u).numel, experts)
                                     : owned_split(c.part.unit(u), experts);
    float* g = c.opt.stage == 0 ? update.full_grads(u) : update.owned_grads(u);
    // (the same pieces on every rank of a group: they share the partition)
    s.dense([&](int64_t at, int64_t n) {
      on_space_->all_reduce(g + at, g + at, static_cast<size_t>(n), DType::kF32, comm::ReduceOp::kSum);
    });
  }
}

void ExpertSpace::step_sums(const EngineContext& c, const model::ParamLayout& layout,
                            Update& update, double sums[2]) {
  double sq[2] = {0.0, 0.0};  // dense, experts
  for (int part_kind = 0; part_kind < 2; ++part_kind) {
    for (int u = 0; u < c.part.num_units(); ++u) {
      if (!update.trainable(u)) continue;
      const Split s = owned_split(c.part.unit(u), layout.expert_range(u));
      const float* g = update.owned_grads(u);
      if (part_kind == 0)
        s.dense([&](int64_t at, int64_t n) { c.mem.sum_squares_add(g + at, static_cast<size_t>(n)); });
      else if (s.ee > s.eb)
        c.mem.sum_squares_add(g + (s.eb - s.lo), static_cast<size_t>(s.ee - s.eb));
    }
    sq[part_kind] = c.mem.sum_squares_take();
  }
  sums[0] = sq[0] / static_cast<double>(parts_) + sq[1];
  c.groups.host().all_reduce(sums, sums, 2, DType::kF64, comm::ReduceOp::kSum);
  experts_on_host().all_reduce(sums, sums, 2, DType::kF64, comm::ReduceOp::kSum);
}

void ExpertSpace::share_dense_after_load(const EngineContext& c, const model::ParamLayout& layout,
                                         Update& update,
                                         const std::function<float*(int)>& owned_params) {
  for (int u = 0; u < c.part.num_units(); ++u) {
    const Split s = owned_split(c.part.unit(u), layout.expert_range(u));
    // (the same pieces on every rank of a group: they share the partition)
    s.dense([&](int64_t at, int64_t n) {
      const size_t count = static_cast<size_t>(n);
      on_space_->broadcast(owned_params(u) + at, count, DType::kF32, 0);
      if (!update.trainable(u)) return;
      on_space_->broadcast(update.owned_m(u) + at, count, DType::kF32, 0);
      on_space_->broadcast(update.owned_v(u) + at, count, DType::kF32, 0);
    });
  }
}

void ExpertSpace::unit_to_host(const model::ParamLayout& layout, int u, std::span<float> dst,
                               const std::function<void(std::span<float>)>& mine_of) {
  const model::UnitInfo& info = layout.unit(u);
  const model::ParamLayout::ElementRange experts = layout.expert_range(u);
  const int64_t numel = info.numel, slice = experts.end - experts.begin;
  const int64_t whole = numel + (parts_ - 1) * slice;
  if (static_cast<int64_t>(dst.size()) != whole)
    throw InputError(strf("gather_full_params: unit %d holds %zu elements, the whole unit %lld "
                          "(expert parallelism %d)",
                          u, dst.size(), static_cast<long long>(whole), parts_),
                     "make the Parameters from model::ParamLayout(cfg) (every expert), not from "
                     "the engine's model().layout() (this rank's experts)");
  std::vector<float> mine(static_cast<size_t>(numel));  // this rank's unit
  mine_of(mine);
  // The dense elements before and after the experts, where they sit in the whole unit.
  std::copy_n(mine.begin(), experts.begin, dst.begin());
  std::copy(mine.begin() + experts.end, mine.end(), dst.begin() + experts.begin + parts_ * slice);
  // Every expert tensor (weights, and gpt-oss's biases), each whole in the whole unit's
  // order. Rank e of the group holds experts [e E/N, (e+1) E/N): rank order is expert order.
  comm::Comm& host = experts_on_host();  // (mine and dst: host memory)
  int64_t at = experts.begin;
  for (int t = info.first_tensor; t < info.first_tensor + info.num_tensors; ++t) {
    const model::TensorInfo& ti = layout.tensors()[static_cast<size_t>(t)];
    if (ti.offset < experts.begin || ti.offset >= experts.end) continue;
    host.all_gather(mine.data() + ti.offset, dst.data() + at, static_cast<size_t>(ti.numel),
                    DType::kF32);
    at += parts_ * ti.numel;
  }
}

std::string ExpertSpace::describe(const model::ParamLayout& layout) const {
  if (parts_ <= 1) return std::string();
  const int64_t E = layout.config().experts;
  return strf("; expert parallel %d (experts [%lld, %lld) of %lld here)", parts_,
              static_cast<long long>(layout.first_expert()),
              static_cast<long long>(layout.first_expert() + E / parts_), static_cast<long long>(E));
}

}  // namespace zt::zero::detail
