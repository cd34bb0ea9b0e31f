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
//   engine_offload.hpp the offload store: the optimizer state and stage-3 parameter
//                      shards in host memory or on NVMe, the gradients' host copies,
//                      AdamW over every home, the checkpoint view (checkout)
//   engine_experts.hpp the expert-parallel space: the expert and data-parallel groups,
//                      the dense gradients' sum over the expert group, the norm, full experts
// The rest of the work is spread over
//   engine.cpp         construction, the public methods, memory figures
//   engine_passes.cpp  micro_step, step, eval_loss, logits_last, gather_full_params,
//                      what a primary gather sends
//   engine_hooks.cpp   the model's unit hooks, the passes' epochs and the pump
//   engine_step.cpp    the optimizer step: global norm, clipping, AdamW on shards
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
#include "engine_offload.hpp"
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
  std::string nonfinite_units();  // after a non-finite step: the units to blame

  // ---- engine_offload.cpp (engine_offload.hpp) ------------------------------------
  // Declared before copies, so copies goes first when the engine does: a copy down
  // still in flight lands in offload's host memory.
  detail::OffloadStore offload;  // the optimizer state and parameter shards offloaded
  // The copies through the pinned pool. The copies up overlap what follows the AdamW;
  // the first use of the unit (the stages 1-2 all-gather in step(), a stage-3 primary
  // gather) orders compute after them (copies.order_up).
  detail::CopyQueue copies;
};

}  // namespace zt::zero
