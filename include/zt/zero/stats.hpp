#pragma once
// What the ZeRO engine reports: bytes sent per communicator (from the comm layer's own
// counters, see docs/comm.md), memory per category, and per-step figures.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "zt/comm/comm.hpp"

namespace zt::zero {

// The engine's communicators. world: all ranks (primary partition); node: the ranks of
// one node; cross: one rank per node, those with the same local rank; hpz: one hpZ
// secondary group (a part of a node).
enum class Group : uint8_t { kWorld, kNode, kCross, kHpz };
inline constexpr int kGroupCount = 4;
std::string_view group_name(Group g);  // "world", "node", "cross", "hpz"

// Comm counters of the engine's own communicators (the engine splits private copies, so
// they count its traffic only). node and cross traffic is intra- and inter-node by
// construction; world traffic crosses nodes when the job spans more than one node
// (its collectives are then split into node + cross phases where possible, see
// docs/zero.md, and what is left on world is small or K == 1).
struct Traffic {
  comm::Counters groups[kGroupCount];
  bool world_spans_nodes = false;

  const comm::Counters& of(Group g) const { return groups[static_cast<int>(g)]; }
  uint64_t bytes(Group g) const { return of(g).total_bytes(); }
  uint64_t total_bytes() const;
  uint64_t intra_node_bytes() const;  // node + hpz (+ world on one node)
  uint64_t inter_node_bytes() const;  // cross (+ world across nodes)
  Traffic minus(const Traffic& earlier) const;  // counters since `earlier`
  std::string summary() const;  // "world 1.2 MB, node 0 B, ... (intra ..., inter ...)"
};

// Bytes held by this rank, by category. Model states are what ZeRO partitions; the
// working buffers are bounded by the prefetch depth and the largest unit, not by the
// model's depth.
struct MemoryStats {
  // model states
  size_t full_params = 0;       // replicated full units (stages 0-2)
  size_t param_shards = 0;      // this rank's shard of every unit (stage 3; within the
                                // full units at stages 0-2, so 0 there)
  size_t secondary_shards = 0;  // hpZ secondary shards (stage 3 with hpZ)
  size_t grads = 0;             // full gradients (stages 0-1) or fp32 gradient shards (2-3)
  size_t optimizer = 0;         // AdamW m and v (full at stage 0, shards at 1-3)
  // working memory
  size_t gather_buffers = 0;    // stage 3: full units being gathered or used
  size_t grad_buffers = 0;      // stages 2-3: full-unit gradients of the backward, until reduced
  size_t comm_buffers = 0;      // bf16 staging and quantized payloads
  size_t activations = 0;       // the model's workspace (Model::workspace_bytes)

  size_t peak_total = 0;  // largest total() seen so far (activations grow once)

  size_t model_states() const;
  size_t total() const;
  std::string summary() const;
};

// The categories of MemoryStats, in order: every writer and reader of them (the summary,
// the step's maximum over ranks, the metrics JSON) walks this one table.
struct MemoryField {
  const char* key;    // JSON key and member name: "full_params"
  const char* label;  // for people: "full params"
  size_t MemoryStats::*bytes;
  bool model_state;   // a model state (partitioned by ZeRO), else working memory
};
inline constexpr MemoryField kMemoryFields[] = {
    {"full_params", "full params", &MemoryStats::full_params, true},
    {"param_shards", "param shards", &MemoryStats::param_shards, true},
    {"secondary_shards", "secondary", &MemoryStats::secondary_shards, true},
    {"grads", "grads", &MemoryStats::grads, true},
    {"optimizer", "optimizer", &MemoryStats::optimizer, true},
    {"gather_buffers", "gather", &MemoryStats::gather_buffers, false},
    {"grad_buffers", "grad buffers", &MemoryStats::grad_buffers, false},
    {"comm_buffers", "comm", &MemoryStats::comm_buffers, false},
    {"activations", "activations", &MemoryStats::activations, false},
};

// One optimizer step.
// What the offload of the optimizer state cost in one step (docs/offload.md, "Phase
// times"), this rank's figures since the previous step():
//   d2h_s    time the device-to-host copies of gradient sub-groups spent moving
//   adam_s   wall time of the CPU AdamW on the offloaded state
//   h2d_s    time the host-to-device copies (updated parameters; stage-3 shards read
//            from offload.params before their gathers) spent moving
//   stall_s  time the engine's thread waited for a copy to land (a full pinned pool,
//            the gradients before the AdamW, the parameters before the next work)
// On a device the copies run on a stream of their own beside the compute (times from
// CUDA events); on the host-staged test space they are synchronous memcpys (their time
// is in d2h_s / h2d_s, none in stall_s); on the host space nothing is copied: 0.
struct OffloadTimes {
  bool active = false;  // offload.optimizer or offload.params is not none
  double d2h_s = 0, adam_s = 0, h2d_s = 0, stall_s = 0;
  uint64_t d2h_bytes = 0, h2d_bytes = 0;
};

// Mixture of experts: the routing of one optimizer step, over every block, micro-step and
// rank (model::RouterStats summed; Engine::step).
struct RouterStep {
  std::vector<double> tokens;  // [E] rows routed to each expert
  double imbalance = 0;        // max over mean of tokens (1: balanced)
  double aux = 0;              // the load-balancing loss (before its coefficient), mean over
                               // micro-steps and ranks
};

struct StepStats {
  int64_t step = 0;      // optimizer steps done (1 after the first)
  double loss = 0;       // mean micro-batch loss of the step, averaged over ranks
  double grad_norm = 0;  // global gradient norm before clipping
  double clip_coef = 1;  // factor applied to the gradients (1: not clipped)
  // A NaN or Inf in the loss or a gradient: the update was skipped (parameters, moments
  // and AdamW's step count unchanged); bad_units names the units whose gradient was not
  // finite, e.g. "layers.3 (model.layers.3.*)".
  bool skipped = false;
  std::string bad_units;
  Traffic traffic;       // sent by this rank since the previous step() (or construction)
  MemoryStats memory;
  OffloadTimes offload;
  std::optional<RouterStep> router;  // a model with experts only
};

}  // namespace zt::zero
