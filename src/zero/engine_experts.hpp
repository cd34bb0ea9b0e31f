#pragma once
// The expert-parallel space of the ZeRO engine (moe.expert_parallel = parts > 1;
// engine_experts.cpp): the world as D x parts ranks. Rank r is position r % parts of
// expert group r / parts (consecutive ranks: its all_to_alls stay within a node when a
// node holds whole groups) and rank r / parts of data-parallel group r % parts, over
// which the engine runs ZeRO. parts 1: nothing split, and no method below but parts()
// and the model's wiring is called.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine_context.hpp"
#include "engine_update.hpp"
#include "zt/model/trainable.hpp"

namespace zt::zero::detail {

class ExpertSpace {
 public:
  // Checks moe.expert_parallel (EngineOptions::validate_experts) on every rank alike, then
  // splits (collective over world, and over control when given). The expert group's
  // collectives on the space's memory are staged when the space stages them.
  ExpertSpace(const model::Config& cfg, comm::Comm& world, const EngineOptions& opt,
              comm::Comm* control, Space& mem, const std::shared_ptr<offload::PinnedPool>& pinned);

  int parts() const { return parts_; }
  // The D ranks of this position (null: parts 1), and the same over `control`.
  comm::Comm* data() const { return data_.get(); }
  comm::Comm* data_host() const { return data_host_.get(); }
  // The model with its expert slice over the expert group (parts 1: unchanged).
  std::unique_ptr<model::TrainableModel> with_experts(std::unique_ptr<model::TrainableModel> m);
  // The expert group's collectives on the space wait for `stream` (engine_hooks.cpp).
  void order_after(void* stream);
  // sums [count] of host memory summed over the expert group (parts 1: unchanged).
  void sum_on_host(double* sums, size_t count);

  // Adds the replicated (dense) gradients over the expert group: of the owned elements
  // (stages 1-3), of whole units at stage 0, which updates whole units.
  void reduce_dense_grads(const EngineContext& c, const model::ParamLayout& layout, Update& update);
  // The step's sums: sums[0] the squared norm counting every parameter once (dense
  // elements weigh 1/parts: each group holds them parts times), sums[1] the loss, both
  // summed over the data-parallel and the expert group.
  void step_sums(const EngineContext& c, const model::ParamLayout& layout, Update& update,
                 double sums[2]);
  // Block unit u's whole tensors into dst [ParamLayout(cfg)'s numel]: mine(out) writes
  // this rank's unit, its experts all-gathered over the expert group (collective over it).
  void unit_to_host(const model::ParamLayout& layout, int u, std::span<float> dst,
                    const std::function<void(std::span<float>)>& mine);
  // After a load: the replicated (dense) owned elements, which only the expert group's
  // first rank read (ckpt's WriteContents::slices), from it to the group (owned_params(u):
  // the unit's owned parameters in the space; and the moments).
  void share_dense_after_load(const EngineContext& c, const model::ParamLayout& layout,
                              Update& update, const std::function<float*(int)>& owned_params);
  // "; expert parallel N (experts [a, b) of E here)", or empty.
  std::string describe(const model::ParamLayout& layout) const;

 private:
  comm::Comm& experts_on_host() { return experts_host_ ? *experts_host_ : *experts_; }

  int parts_ = 1;
  std::unique_ptr<comm::Comm> data_;     // the D ranks of this position (parts > 1)
  std::unique_ptr<comm::Comm> experts_;  // this rank's expert group (parts > 1)
  // The same two groups over the engine's host-memory `control` communicator, when one
  // is given (a world on device memory: NCCL, or a device space's staged MPI): the small
  // host values (norms, flags) and the host copies of checkpoints go over these.
  std::unique_ptr<comm::Comm> data_host_, experts_host_;
  // The expert group on the space's memory (the dense gradients' all-reduce, the load's
  // broadcasts): experts_, or its staging wrapper staged_.
  std::unique_ptr<comm::Comm> staged_;
  comm::Comm* on_space_ = nullptr;
};

}  // namespace zt::zero::detail
