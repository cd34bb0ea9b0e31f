#pragma once
// The offload store of the ZeRO engine (engine_offload.cpp, offload.*, docs/offload.md):
// the optimizer state in host memory or on NVMe (the store's master, m, v; the update's
// moments stay empty), the stage-3 parameter shards there (offload.params = nvme), the
// host copies of the gradients from a space the host cannot read, the AdamW pass over
// every home, and the checkpoint view of units not held in place (checkout / flush).
// It reads the parameter store, the update, the gather schedule and the copy queue it is
// given (the engine's parts) and owns the rest.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine_context.hpp"
#include "engine_copies.hpp"
#include "engine_gather.hpp"
#include "engine_params.hpp"
#include "engine_update.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/optimizer.hpp"
#include "zt/offload/cpu_adam.hpp"
#include "zt/offload/store.hpp"
#include "zt/zero/engine.hpp"
#include "zt/zero/plan.hpp"
#include "zt/zero/stats.hpp"

namespace zt::zero::detail {

class OffloadStore {
 public:
  // frozen: per unit, 1 for a frozen unit. copies may be declared after this part (it is
  // first used by init).
  OffloadStore(const EngineContext& ctx, const model::ParamLayout& layout, const BufferPlan& plan,
               const std::vector<uint8_t>& frozen, bool bf16_master, ParamStore& params,
               Update& update, GatherSchedule& gather, CopyQueue& copies);

  // After the parameters hold their initial values: the host-memory preflight, the store
  // (the master from the initial parameters), the parameter shards to their home, the
  // fp32 device copies dropped where the bf16 rounding comes up instead.
  void init(int rank);

  // offload.optimizer != none: the store holds master, m, v of the owned elements.
  bool state_offloaded() const { return state_offloaded_; }
  // offload.params = nvme (stage 3): params holds no shards; a gather reads the shard
  // into its slot's staging buffer (load_shard, load_shard_half).
  bool params_offloaded() const { return params_offloaded_; }
  // bf16 weights with the state offloaded from a space the host cannot read: the step
  // copies up the bf16 rounding of the new parameters; the fp32 device copies are gone.
  bool half_up() const { return half_up_; }
  // The state offloaded from a space the host cannot read: the gradients go down to the
  // host (grad_final) and are scaled there by the clipping factor (adamw).
  bool host_grads() const { return offload_copies_; }

  // Engine::set_update_guard: called before AdamW changes a unit.
  void set_update_guard(std::function<void(int)> guard) { update_guard_ = std::move(guard); }
  // AdamW on every owned element, wherever its state lives. clip: the factor of the
  // gradients (1: none); mem's gradients are scaled already, host copies are scaled here.
  void adamw(const model::AdamWConfig& adam, int64_t step, float clip);
  void grad_final(int u);  // u's gradient of this step is complete in mem: down to the host
  OffloadTimes take_times();  // since the last call

  const float* shard_src(int u, int slot);  // the send buffer of u's primary gather
  void load_shard(int u, int slot);         // params offloaded: fill the slot's staging buffer
  void load_shard_half(int u, int slot);    // half_up: u's bf16 shard into the slot's send range
  void gather_master(int u, float* full);   // half_up, idle: the store's fp32 master of u [padded]

  // owned(u) when it is not held in place: paged in (or copied to the host) once and
  // kept until flush_checkout, which writes every checked-out unit back and frees it
  // (every other public method of the engine starts with it). Idle only.
  OwnedSlice checkout(int u);
  void flush_checkout();

  size_t state_bytes() const;  // the store's host bytes and the checked-out copies
  size_t param_bytes() const;  // staging buffers, the host shard, frozen units' fp32 values
  std::string describe() const;  // "" without a store

 private:
  bool trainable(int u) const { return frozen_[static_cast<size_t>(u)] == 0; }
  void preflight_host(const offload::Options& so, const std::vector<int64_t>& state_counts,
                      const std::vector<int64_t>& param_counts, int64_t max_shard);
  std::span<float> params_for_update(int u);  // the parameters AdamW updates (fp32 master)
  int64_t update_begin(int u) const;          // first unit element of those spans

  const EngineContext& c_;
  const model::ParamLayout& layout_;
  const BufferPlan& plan_;
  const std::vector<uint8_t>& frozen_;
  const bool bf16_master_;
  const int units_;
  ParamStore& params_;
  Update& update_;
  GatherSchedule& gather_;
  CopyQueue& copies_;

  offload::Isa isa_ = offload::Isa::kScalar;  // the CPU AdamW level (every home, and none)
  std::unique_ptr<offload::Store> store_;
  const bool state_offloaded_;
  const bool params_offloaded_;
  std::function<void(int)> update_guard_;
  std::vector<Buf<float>> param_stage_;  // params offloaded: per gather slot [shard max], in mem
  std::vector<float> unit_params_;  // params offloaded: one unit's shard [shard max] (host)
  // Offload from a space the host cannot read (state offloaded, mem a device's; on the
  // host-staged space the same code with synchronous copies): the gradient sub-groups
  // are copied to host_grads_ as each unit's reduction completes on the last micro-step,
  // the CPU AdamW runs per sub-group in adamw() and each sub-group's new parameters go
  // back through the pinned pool while the next one is updated.
  bool offload_copies_ = false;
  std::vector<std::vector<float>> host_grads_;  // per unit [owned] fp32, landed copies
  std::vector<std::pair<size_t, size_t>> unit_groups_;  // per unit: [first, end) of its sub-groups
  // half_up: the CPU AdamW rounds each updated sub-group to bf16 (bf16(float), as the
  // device cast) and that comes up, into params' compute owned slice (stages 1-2) or its
  // half shards (stage 3; params offloaded: each shard goes up in bf16 straight into its
  // gather's send range). The fp32 device copies (full, shard, param_stage) are freed:
  // the fp32 master is the store's.
  bool half_up_ = false;
  // half_up with frozen units (LoRA/QLoRA's base) whose shards are not the store's: their
  // exact fp32 values, which nothing else holds once the fp32 device copies go (frozen
  // units have no optimizer state in the store). Per unit [owned] fp32 in host memory
  // (empty for trainable units); their bf16 compute copy came up at construction and
  // comes up again only after a load (flush_checkout): frozen units never change.
  std::vector<std::vector<float>> frozen_host_;
  OffloadTimes times_;  // since the last take_times
  struct Checkout {
    bool active = false;
    std::vector<float> master;  // [shard] (padding zero)
    std::vector<float> m, v;    // [owned] (state offloaded, or copies from a device)
  };
  std::vector<Checkout> checkouts_;  // per unit
};

}  // namespace zt::zero::detail
