#pragma once
// The ZeRO engine: data-parallel training of the built-in model with ZeRO stages 0-3 and
// ZeRO++ (hpZ, qwZ, qgZ), over the comm layer. See docs/zero.md.
//
//   stage 0: parameters, gradients and AdamW state replicated; gradients all-reduced
//   stage 1: AdamW state sharded; gradients reduce-scattered once per step, parameters
//            all-gathered after the update
//   stage 2: gradients sharded too: each micro-batch's gradients are reduce-scattered
//            unit by unit during the backward into fp32 shards
//   stage 3: parameters sharded too: a unit is gathered before each use (forward and
//            backward) with `prefetch` gathers in flight, and released after it
//
// The loop calls, per optimizer step, `accum` times micro_step(...) with this rank's
// micro-batch, then step(lr). All ranks call every method in the same order (they are
// collective), with any micro-batch shapes.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "zt/comm/comm.hpp"
#include "zt/model/config.hpp"
#include "zt/model/init.hpp"
#include "zt/model/model.hpp"
#include "zt/model/trainable.hpp"
#include "zt/zero/options.hpp"
#include "zt/zero/partition.hpp"
#include "zt/zero/plan.hpp"
#include "zt/zero/stats.hpp"

namespace zt::zero {

// This rank's slice of one unit: elements [begin, begin + count) of the unit (no
// padding), with views of the parameters and AdamW moments there. For checkpoints:
// writing every rank's slices writes whole tensors; loading them, then after_load(),
// restores any stage.
struct OwnedSlice {
  int64_t begin = 0;
  int64_t count = 0;
  std::span<float> params;
  std::span<float> m;
  std::span<float> v;
};

class Engine {
 public:
  // Collective over `world`. node / cross: this rank's node communicator and the
  // communicator of the ranks with the same local rank (one per node), e.g. from
  // runtime::Runtime's node() and cross(); both or neither (then one node is assumed).
  // Every node must hold the same number of ranks. The engine makes private copies of
  // them (split), so its byte counters hold its own traffic only. Parameters are
  // initialised from `init` (each rank fills only what it holds; the values equal a
  // single-process init). Throws zt::InputError for bad options. control: a host-memory
  // communicator over the same ranks (e.g. the MpiComm beside an NcclComm world), which
  // carries the engine's small host values (the gradient norm, NaN flags) when `world`
  // takes device memory (NCCL, or MPI staged for a device space: options.device = kCuda);
  // not needed (and unused) when world takes host memory.
  Engine(const model::Config& cfg, comm::Comm& world, comm::Comm* node, comm::Comm* cross,
         const EngineOptions& options, const model::InitOptions& init,
         comm::Comm* control = nullptr);
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Forward + backward of this rank's micro-batch (tokens, targets: [B, T]). Returns its
  // mean loss. grad_scale weighs this micro-batch in the step's gradient (the loop
  // passes 1 / accum, or c_m x ranks / N for masked data: its targets over the step's);
  // the engine averages over ranks. Gradient reductions start during
  // the backward, as each unit's gradient is complete. positions: packed examples
  // (Model::loss_and_grad; empty: none).
  double micro_step(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                    int64_t B, int64_t T, bool recompute, double grad_scale,
                    std::span<const int32_t> positions = {});

  // After exactly options.accum micro_steps: global gradient norm (from the owned
  // shards), clipping, AdamW on the owned shards with learning rate lr, and whatever
  // re-gather the stage needs. Zeroes the gradients for the next step.
  StepStats step(double lr);

  // Forward only: mean loss of this rank's batch (not averaged over ranks).
  double eval_loss(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                   int64_t B, int64_t T, std::span<const int32_t> positions = {});
  // Preference objectives (engine_objective.cpp; Model::set_row_objective,
  // set_adapters_enabled, row_logps): the objective applies to every micro_step until
  // reset (empty); row_logps is a forward pass like eval_loss (collective), writing each
  // row's summed target log-prob and target count.
  void set_row_objective(model::RowObjective objective);
  void set_adapters_enabled(bool on);
  void row_logps(std::span<const int32_t> tokens, std::span<const int32_t> targets, int64_t B,
                 int64_t T, std::span<const int32_t> positions, std::span<double> logp,
                 std::span<int64_t> count);
  // Logits of the last position of one sequence (out.size() == vocab).
  void logits_last(std::span<const int32_t> tokens, int64_t T, std::span<float> out);

  // Every unit's exact parameters (no quantization) into out, on every rank. Collective.
  // For sampling with a separate Model, checkpoints, and tests.
  void gather_full_params(model::Parameters<float>& out);

  // This rank's slice of unit u (see OwnedSlice); after writing the slices of every rank,
  // call after_load() (collective) to rebuild what is replicated or derived.
  OwnedSlice owned(int u);
  void after_load();
  // Whether owned() views the engine's own memory (fp32 state on the host: no offload, no
  // bf16 master, a host-readable space), which only step()'s AdamW changes, unit by
  // unit; else owned() returns copies (ckpt.async then snapshots them).
  bool owned_in_place() const;
  // Called by step() on its thread before AdamW changes unit u's owned parameters and
  // moments (ckpt.async's snapshot-free save copies the unit there, or waits until it
  // wrote the unit). Empty
  // (the default): none. Only the in-place state above calls it.
  void set_update_guard(std::function<void(int unit)> guard);
  // QLoRA: the units leave out the targeted W (ParamLayout(cfg, lora)); a load of the
  // base gives them here instead: full_unit(u) returns unit u of ParamLayout(cfg)
  // (numel elements; only its targeted W are read), asked once per unit that holds one.
  // Quantised NF4 as at construction; every rank calls it with the same values.
  void set_qlora_base(const model::QloraBase::UnitReader& full_unit);
  int64_t steps_done() const;         // optimizer steps taken (AdamW's step - 1)
  void set_steps_done(int64_t steps);  // for resume

  const EngineOptions& options() const;
  const Partition& partition() const;
  const model::TrainableModel& model() const;
  int hpz() const;             // secondary group size in effect (1: no hpZ)
  bool hierarchical() const;   // world collectives run as node + cross phases
  Traffic traffic() const;     // since construction
  MemoryStats memory() const;  // now, with the peak so far
  const BufferPlan& buffer_plan() const;  // what it allocated from (plan.hpp)
  std::string describe() const;  // one line: stage, partition, groups, options

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::zero
