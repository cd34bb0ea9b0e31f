#pragma once
// The ZeRO engine's state (private to zt_zero). Parts with their own private state,
// which Engine::Impl holds and wires (each reads the EngineContext, engine_context.hpp):
//   engine_gather.hpp  the gather schedule: stage-3 gathers in flight (primary, qwZ, hpZ
//                      secondary), their slots and buffers, the secondaries
//   engine_reduce.hpp  the reduce schedule: gradient reductions in flight (all-reduce,
//                      reduce-scatter, bf16, qgZ), their slots and buffers
//   engine_params.hpp  the parameter store: each unit's stored parameters (fp32, bf16)
//   engine_update.hpp  the update: the gradients, their norm and clipping, the AdamW
//                      moments, the bf16-true work buffer
//   engine_copies.hpp  offload's copies between the space and host memory through the
//                      pinned pool, landed in order
//   engine_experts.hpp the expert-parallel space: the expert and data-parallel groups,
//                      the dense gradients' sum over the expert group, the norm, full experts
// The rest of the work is spread over
//   engine.cpp         construction, the public methods, memory figures
//   engine_passes.cpp  micro_step, step, eval_loss, logits_last, gather_full_params,
//                      what a primary gather sends
//   engine_hooks.cpp   the model's unit hooks, the passes' epochs and the pump
//   engine_step.cpp    the optimizer step: global norm, clipping, AdamW on shards
//   engine_offload.cpp the offload store behind the optimizer state (offload.*)
//   memory.cpp, memory_cuda.cpp, staged_comm.cpp
//                      the memory space of every buffer below and its element-wise work
//                      (host, host-staged, device; memory.hpp)
//
// The schedule. Every use of a unit by the model is bracketed by before_use/after_use;
// uses come in a fixed order (`order`, from model.hpp's hook contract), so every rank
// starts the same operations in the same order. An operation (gather or reduction) runs
// in phases (one per communicator level, see groups.hpp). Each before_use opens a
// compute "epoch"; an operation records the epoch of the first compute it overlaps
// (`stamp`). At after_use of epoch e, every operation stamped <= e that is not in its
// last phase is advanced (wait, host work, start the next phase), and every reduction
// in its last phase is completed. Gathers complete when their unit is needed. All of this
// depends only on program order, never on timing, so it is identical on every rank.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "engine_context.hpp"
#include "engine_copies.hpp"
#include "engine_experts.hpp"
#include "engine_params.hpp"
#include "engine_gather.hpp"
#include "engine_reduce.hpp"
#include "engine_update.hpp"
#include "groups.hpp"
#include "memory.hpp"
#include "offload_copy.hpp"
#include "zt/core/dtype.hpp"
#include "zt/model/model.hpp"
#include "zt/model/trainable.hpp"
#include "zt/offload/cpu_adam.hpp"
#include "zt/offload/store.hpp"
#include "zt/zero/engine.hpp"
#include "zt/zero/plan.hpp"

namespace zt::zero {

struct Engine::Impl {
  enum class Mode : uint8_t { kIdle, kTrain, kEval };

  Impl(const model::Config& cfg, comm::Comm& world, comm::Comm* node, comm::Comm* cross,
       const EngineOptions& options, const model::InitOptions& init, comm::Comm* control);

  // ---- configuration --------------------------------------------------------------
  EngineOptions opt;
  // The memory space of every engine buffer (declared first: buffers release into it).
  std::unique_ptr<detail::Space> mem;
  // The one pool of pinned host buffers between mem and host memory (offload copies,
  // staged collectives), bounded by offload.pinned_bytes; declared before its users.
  std::shared_ptr<offload::PinnedPool> pinned;
  // Expert parallelism (declared before groups, which run over ex.data() when split).
  detail::ExpertSpace ex;
  // Staging wrappers of the caller's communicators when mem->stages() them (else null);
  // groups splits its private copies from them, so every engine collective is staged.
  std::unique_ptr<comm::Comm> staged_world, staged_node, staged_cross;
  detail::Groups groups;
  int n = 1;        // ranks
  int hpz = 1;      // secondary group size in effect
  size_t qblock = 256;
  std::unique_ptr<model::TrainableModel> model_owner;
  model::TrainableModel& model;  // computes on mem's buffers (mem->make_model)
  const model::ParamLayout& layout;
  Partition part;
  int units = 0;
  int head = 0;     // the head unit, L + 1
  bool tied = false;
  // bf16 compute (train.precision = bf16-mixed): the model binds bf16 weights, cast from
  // the fp32 master; stage 3 casts its shard before the gather, so gathers move bf16.
  bool bf16_weights = false; // model.param_dtype() is bf16
  // train.precision = bf16-true: the stored parameters are bf16 and there is no fp32
  // master (params: ParamStore's compute and half copies alone). AdamW widens the
  // parameters it updates into update.wide, runs the space's fp32 AdamW on them and
  // rounds the result back (docs/zero.md, "bf16-true").
  bool bf16_master = false;
  // LoRA (docs/zero.md "Frozen units"): frozen units hold parameters only (sharded and
  // gathered as any unit at stage 3; no gradient buffers, reductions, moments, AdamW,
  // norm or NaN check); the adapters' unit (-1: none) is an ordinary unit whose one use
  // spans the whole pass, so its gradient buffer is bound at its before_use.
  std::vector<uint8_t> frozen;   // per unit
  int adapters = -1;
  bool trainable(int u) const { return frozen[static_cast<size_t>(u)] == 0; }
  BufferPlan plan;  // what every buffer below holds (plan.hpp)
  BufferPlan make_plan() const;  // refuses what the buffers cannot hold
  detail::Handles retired;  // operations compute waits for on the device, not yet host-checked
  detail::EngineContext ctx{opt, *mem, groups, part, qblock, retired};
  // QLoRA: the NF4 base the model reads the targeted W from (the units leave them out:
  // ParamLayout(cfg, lora)), quantised from a reader of ParamLayout(cfg)'s units one at a
  // time: the initial values at construction, the base's file at a load (set_qlora_base).
  std::unique_ptr<model::QloraBase> qlora;
  void quantize_base(const model::QloraBase::UnitReader& full_unit);
  // Every unit's exact fp32 parameters into out, from wherever the stage and precision
  // keep them. Collective at stage 3 and with half_up.
  void full_params_to_host(model::Parameters<float>& out);
  // Unit u's exact fp32 parameters into dst [numel] (full: [max_padded], allocated here
  // when bf16 weights need an fp32 gather buffer). Collective as full_params_to_host.
  void unit_to_host(int u, std::span<float> dst, detail::Buf<float>& full);
  std::vector<int> train_order;  // unit of each use in loss_and_grad
  std::vector<int> eval_order;   // unit of each use in loss / logits_last

  // ---- working buffers (allocated once, in `mem`) ---------------------------------
  detail::Buf<float> logits_buf;  // logits_last on a space the host cannot read: [vocab]
  detail::Buf<bf16> logits_half;  // same, bf16_weights: [vocab] (the model's logits are bf16)

  // ---- schedule state ---------------------------------------------------------------
  std::vector<int> active;         // positions between before_use and after_use
  Mode mode = Mode::kIdle;
  const std::vector<int>* order = nullptr;
  size_t pos = 0;                  // next position of the order
  int64_t epoch = 0;
  bool grads_phase = false;        // the head has been reached: uses need gradients
  bool boundary = false;           // this micro-step ends the accumulation
  int micro_done = 0;
  double loss_sum = 0;
  // Mixture of experts: the micro-steps' router statistics, summed ([E] tokens per
  // expert, then the aux losses); empty without experts (tally_router, take_router).
  std::vector<double> router_sum;
  void tally_router();
  std::optional<RouterStep> take_router();
  int64_t steps = 0;
  Traffic traffic_at_step;         // counters at the previous step()
  size_t peak = 0;

  // ---- engine.cpp -------------------------------------------------------------------
  MemoryStats memory() const;
  void note_peak();
  std::span<float> params_for_update(int u);  // the parameters AdamW updates (fp32 master)
  int64_t update_begin(int u) const;          // first unit element of those spans
  // Gathers unit_buf(u) (each [padded], this rank's part in place) for every unit.
  template <class T>
  void gather_in_place(const std::function<T*(int)>& unit_buf, bool trainable_only = false);
  // The stored parameters of stages 0-2 (params' full, or compute with bf16_master/half_up);
  // trainable_only: those of the units that are not frozen (after a step).
  void gather_params_in_place(bool trainable_only = false);
  // What the model binds for unit u: the compute weights at `p` (a gather slot's or the
  // unit's replicated copy), of the compute dtype.
  model::ConstView param_view(int u, const void* p) const {
    return {p, part.unit(u).numel, bf16_weights ? DType::kBF16 : DType::kF32, mem->model_space()};
  }
  // Views of mem's buffers for the model.
  model::MutView mview(float* p, size_t count) const {
    return {p, static_cast<int64_t>(count), DType::kF32, mem->model_space()};
  }

  // ---- engine_hooks.cpp -------------------------------------------------------------
  void install_hooks();
  void begin_pass(Mode m, const std::vector<int>& use_order);
  void end_pass();
  // After an exception inside a pass: harmless when no unit was used yet (e.g. the
  // model rejected the batch shape); otherwise operations may be left in flight on
  // some ranks only, and the engine refuses further work.
  void abandon_pass();
  bool broken = false;
  void before_use(int u);
  void after_use(int u);
  void grad_ready(int u);
  void pump();  // the after_use rule above
  // Ordering against the compute stream (no-ops on the host, whose compute is
  // synchronous; docs/zero.md "Streams and events"):
  void order_comms_after_compute();
  void check_retired();

  // ---- engine_gather.cpp (engine_gather.hpp) --------------------------------------
  detail::GatherSchedule gather;
  // GatherSchedule's Send (engine_passes.cpp): the send buffer of u's primary gather.
  const float* send_shard(int u, int slot);
  void cast_shard_for_gather(int u, int slot);  // bf16_weights: the bf16 send range of a gather
  // The exact (unquantized) full unit u into out [padded], blocking. Idle only.
  void gather_exact(int u, float* out);

  // ---- engine_reduce.cpp (engine_reduce.hpp) --------------------------------------
  detail::ReduceSchedule reduce;
  void reduced(int u, float* own);  // ReduceSchedule's Done: into the shard, down to the host

  // ---- engine_params.cpp, engine_update.cpp ----------------------------------------
  detail::ParamStore params;  // every unit's stored parameters
  detail::Update update;  // gradients, their norm and clipping, AdamW moments

  // ---- engine_step.cpp --------------------------------------------------------------
  StepStats step(double lr);

  // ---- engine_offload.cpp -----------------------------------------------------------
  // offload.optimizer != none: the store holds master, m, v of the owned elements (the update's
  // moments stay empty) and the step writes the compute parameters from the master.
  // offload.params = nvme (stage 3): params holds no shards; a gather reads the shard
  // into its slot's param_stage buffer.
  offload::Isa isa = offload::Isa::kScalar;  // the CPU AdamW level (every home, and none)
  std::unique_ptr<offload::Store> store;
  bool state_offloaded = false;
  std::function<void(int)> update_guard;  // Engine::set_update_guard: before AdamW on a unit
  bool params_offloaded = false;
  std::vector<detail::Buf<float>> param_stage;  // params offloaded: per gather slot [shard max], in mem
  std::vector<float> unit_params;  // params offloaded: one unit's shard [shard max] (host)
  // Offload from a space the host cannot read (state offloaded, mem a device's; on the
  // host-staged space the same code with synchronous copies): the gradient sub-groups
  // are copied to host_grads as each unit's reduction completes on the last micro-step,
  // the CPU AdamW runs per sub-group in step() and each sub-group's new parameters go
  // back through the pinned pool while the next one is updated.
  bool offload_copies = false;
  std::vector<std::vector<float>> host_grads;  // per unit [owned] fp32, landed copies
  std::vector<std::pair<size_t, size_t>> unit_groups;  // per unit: [first, end) of its sub-groups
  // bf16_weights with offload_copies: the CPU AdamW rounds each updated sub-group to bf16
  // (bf16(float), as the device cast) and that comes up, into params' compute owned
  // slice (stages 1-2) or its half shards (stage 3; params offloaded: each shard goes up in
  // bf16 straight into its gather's send range). The fp32 device copies (full,
  // shard, param_stage) are freed: the fp32 master is the store's.
  bool half_up = false;
  // half_up with frozen units (LoRA/QLoRA's base) whose shards are not the store's: their
  // exact fp32 values, which nothing else holds once the fp32 device copies go (frozen
  // units have no optimizer state in the store). Per unit [owned] fp32 in host memory
  // (empty for trainable units); their bf16 compute copy came up at construction and
  // comes up again only after a load (flush_checkout): frozen units never change.
  std::vector<std::vector<float>> frozen_host;
  // The copies through the pinned pool. The copies up overlap what follows the AdamW;
  // the first use of the unit (the stages 1-2 all-gather in step(), a stage-3 primary
  // gather) orders compute after them (copies.order_up).
  detail::CopyQueue copies;
  OffloadTimes offload_times;      // since the last step
  // owned(u) of an offloaded unit, or of any unit in a space the host cannot read: its
  // state, paged in (or copied to the host) for a checkpoint and kept (the
  // checkpoint code holds every unit's slice at once); written back and freed by
  // flush_checkout() (every other public method starts with it).
  struct Checkout {
    bool active = false;
    std::vector<float> master;  // [shard] (padding zero)
    std::vector<float> m, v;    // [owned] (state offloaded, or copies from a device)
  };
  std::vector<Checkout> checkouts;  // per unit
  void init_offload(int rank);
  void preflight_host(const offload::Options& so, const std::vector<int64_t>& state_counts,
                      const std::vector<int64_t>& param_counts, int64_t max_shard);
  // clip: the factor of the gradients (1: none); mem's gradients are scaled already,
  // host_grads are scaled here.
  void adamw_update(const model::AdamWConfig& adam, int64_t step, float clip);
  void offload_grad_final(int u);  // u's gradient of this step is complete in mem
  OffloadTimes take_offload_times();
  const float* shard_src(int u, int slot);  // the send buffer of u's primary gather
  void load_shard(int u, int slot);               // params on NVMe: fill param_stage[slot]
  void load_shard_half(int u, int slot);          // half_up: u's bf16 shard into the slot's send range
  void gather_master(int u, float* full);         // half_up, idle: the store's fp32 master of u [padded]
  OwnedSlice checkout(int u);
  void flush_checkout();
  std::string nonfinite_units();  // after a non-finite step: the units to blame
};

}  // namespace zt::zero
