#pragma once
// What the ZeRO engine holds on one rank, buffer by buffer (docs/zero.md): a pure function
// of the units' partition, the options, the hpZ group and the memory space. The engine
// allocates from it, `zt estimate` counts it, and the training loop's memory gate sums it.
#include <cstdint>
#include <vector>

#include "zt/zero/options.hpp"
#include "zt/zero/partition.hpp"
#include "zt/zero/stats.hpp"

namespace zt::zero {

// Gradient reductions in flight behind the backward before one must complete.
inline constexpr int kReducesInFlight = 2;

// One unit as the plan sees it: this rank's partition of it, whether it trains (LoRA's
// base units are frozen), and how many identical units it stands for (the estimate plans
// one block for all of them; the engine plans each unit once).
struct PlanUnit {
  UnitPartition part;
  bool trainable = true;
  bool adapters = false;  // LoRA's adapters' unit: used for the whole pass
  int64_t count = 1;
};

// The memory space and the precision: how the engine stores its values.
struct PlanSpace {
  bool host_accessible = true;  // the host reads the space's buffers (false: a device's)
  bool bf16_weights = false;    // the model binds bf16 weights (bf16-mixed, bf16-true)
  bool bf16_master = false;     // bf16-true: bf16 stored parameters, no fp32 master
  const char* name = "host";    // for errors: "the engine on the <name>"
};

// One unit's model states, in elements (fp32 unless named half: bf16).
struct UnitBuffers {
  int64_t full_params = 0, compute_params = 0;  // stages 0-2: fp32, bf16 copy
  int64_t param_shard = 0, param_half = 0;      // stage 3: fp32 or bf16 shard
  int64_t secondary = 0, secondary_half = 0;    // hpZ secondary shard
  int64_t full_grads = 0, grad_shard = 0;       // stages 0-1, stages 2-3
  int64_t moments = 0;                          // each of AdamW m and v
  int64_t frozen_host = 0;                      // half_up: a frozen unit's fp32 owned slice (host)
  int64_t count = 1;                            // the PlanUnit's
};

struct BufferPlan {
  // Offload (engine_offload.cpp): the store holds the optimizer state / the stage-3
  // shards; offload_copies: to and from a space the host cannot read; half_up: the CPU
  // AdamW's bf16 rounding comes up and the fp32 device copies go.
  bool state_offloaded = false, params_offloaded = false, offload_copies = false, half_up = false;
  std::vector<UnitBuffers> units;  // per PlanUnit, for one of its `count`
  int gather_slots = 0;            // stage 3: prefetch + 1 (+1 tied, +1 adapters)
  int reduce_slots = 0;            // stages 2-3: 1 + in flight (+1 tied, +1 adapters)
  int64_t gather = 0;              // elements per gather slot, compute dtype
  bool bf16_gather = false;        // bf16 gather slots (bf16 weights), else fp32
  int64_t gather_q = 0;            // qwZ bytes per gather slot
  int64_t grad_buf = 0;            // stages 2-3: fp32 elements per reduce slot
  int64_t reduce_half = 0;         // bf16 reduce: elements per reduce slot
  int64_t reduce_q = 0;            // qgZ bytes per reduce slot, each of send and receive
  int64_t update_wide = 0;         // bf16-true: fp32 elements of the widest updated slice
  int64_t param_stage = 0;         // params offloaded: fp32 elements per gather slot
  int64_t unit_params = 0;         // params offloaded: one shard on the host, fp32 elements
  int64_t max_shard = 0;
  // The offload store: its options as the engine builds it and its counts, one entry
  // per unit (each PlanUnit `count` times).
  offload::Options store_options;
  std::vector<int64_t> state_counts, param_counts;
  uint64_t store_host = 0;  // offload::store_host_bytes (0 without offload)
  uint64_t nvme = 0;        // offload::nvme_file_bytes

  // Bytes by Engine::memory() category: everything above (the store's host bytes in
  // optimizer, the host shard and frozen_host in param_shards). Not in it: QLoRA's NF4
  // base, the activations, checkpoint checkouts and logits_last's buffers.
  MemoryStats bytes() const;
  uint64_t host_param_bytes() const;  // of bytes().param_shards: host memory
};

// The partition alignment: the quantization block with qwZ / qgZ, else 16 elements.
int partition_align(const EngineOptions& opt);

// The engine's refusals of option combinations its buffers cannot hold (bf16-true with
// offload, qwZ with bf16 weights, stage-3 shards offloaded from a device without the
// optimizer): zt::InputError naming the keys. plan_buffers calls it.
void check_buffer_options(const EngineOptions& opt, const PlanSpace& space);

// opt.stage, prefetch, quantization, reduce dtype and offload homes as the engine runs
// them; hpz: the group in effect; tied: tied embeddings (one more gather / reduce slot).
BufferPlan plan_buffers(const std::vector<PlanUnit>& units, const EngineOptions& opt,
                        const PlanSpace& space, int hpz, bool tied);

// The plan of a model from its configuration on `n` ZeRO ranks (world / expert_parallel),
// rank 0's partition, with every block planned once: what `zt estimate` counts and the
// training loop's memory gate sums (without the QLoRA base).
BufferPlan plan_model(const model::Config& cfg, int n, int hpz, const EngineOptions& opt,
                      const PlanSpace& space);

}  // namespace zt::zero
