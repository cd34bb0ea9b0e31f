#pragma once
// The ZeRO engine's options. Each field mirrors one configuration key (the training
// loop maps `zero.*` and the few `train.*` keys the engine needs onto this struct).
// validate() throws zt::InputError naming the key and its valid values.
#include <cstdint>
#include <string>
#include <string_view>

#include "zt/core/dtype.hpp"
#include "zt/model/config.hpp"
#include "zt/model/lora.hpp"
#include "zt/model/optimizer.hpp"
#include "zt/offload/options.hpp"

namespace zt::zero {

struct EngineOptions {
  // zero.stage: 0 replicate everything (DDP), 1 shard the optimizer state, 2 also the
  // gradients, 3 also the parameters.
  int stage = 0;
  // zero.hpz_partition_size: ranks holding one secondary copy of the parameters (hpZ,
  // stage 3). 0 = the ranks per node (the default), 1 = off. Must divide the ranks per
  // node. A secondary group as large as the world is the primary partition again: no-op.
  int hpz_partition_size = 0;
  // zero.prefetch: stage-3 gathers kept in flight ahead of the unit that computes.
  int prefetch = 2;
  // zero.quantize_weights (qwZ): stage-3 parameter gathers move int8 blocks + scales.
  bool quantize_weights = false;
  // zero.quantize_grads (qgZ): gradient reduce-scatters move int8 blocks + scales
  // (all-to-all, intra-node then inter-node). Stages 1-3.
  bool quantize_grads = false;
  // zero.reduce_dtype: element type of unquantized gradient reductions: fp32 or bf16.
  DType reduce_dtype = DType::kF32;
  // zero.quantize_block: elements per quantization block (one fp32 scale each);
  // a multiple of 16 in [16, 65536].
  int quantize_block = 256;

  // moe.expert_parallel (docs/zero.md "Expert parallelism"): ranks of one expert group,
  // which splits every block's experts (rank e of a group holds experts [e E/N, (e+1)
  // E/N)); ZeRO runs over the world / N ranks of the same group position. 1: off.
  int expert_parallel = 1;

  // From train.*: micro-batches per optimizer step (train.accum), clipping threshold of
  // the global gradient norm (train.grad_clip; <= 0 disables), AdamW hyper-parameters
  // (the learning rate is passed to each Engine::step), and the largest micro-batch
  // shape, which sizes the activation workspace up front.
  int accum = 1;
  double grad_clip = 1.0;
  model::AdamWConfig adamw;
  int64_t max_batch = 1;
  int64_t max_seq = 0;

  // train.device / train.precision as the engine sees them: the memory space it holds
  // its state in and computes on (docs/zero.md, "Memory spaces"). kHostStaged: host
  // memory whose collectives go through the pinned-host staging path a device space on
  // the MPI backend takes (tests of that path on a CPU). precision: fp32 everywhere;
  // bf16-mixed (bf16 compute weights cast from the fp32 master, fp32 gradients and
  // moments) on the device space, and on host-staged through a test model that widens
  // the bf16 weights to fp32; the host space refuses it by name. bf16-true: not yet.
  enum class Device : uint8_t { kHost, kHostStaged, kCuda };
  Device device = Device::kHost;
  std::string precision = "fp32";

  // offload.*: homes of the optimizer state and the stage-3 parameter shards
  // (docs/offload.md). Checked against the stage by validate().
  offload::Options offload;

  // finetune.* / lora.* (zt/model/lora.hpp): with lora.enabled() the model's layout has
  // the base units frozen and the adapters' unit last (docs/zero.md "Frozen units").
  model::LoraConfig lora;

  // Throws zt::InputError for the first bad key. world_size is the number of ranks,
  // ranks_per_node the ranks of one node (world_size when the caller gives no node
  // communicators).
  void validate(int world_size, int ranks_per_node) const;

  // moe.expert_parallel against the world and the model's experts (0: none) and the
  // options it cannot combine with (hpZ, offload, LoRA, other devices and precisions):
  // zt::InputError naming both numbers or the other key, and what to do. Called before
  // validate(), with the whole world.
  void validate_experts(int world_size, int64_t experts) const;
  // The whole rule, as the engine applies it: the above with cfg's experts (0 without),
  // then the model's block (expert parallelism has Mixtral's: every layer routed,
  // renormalised top-k, experts of the MLP's width, no shared expert). `zt estimate`
  // calls it with the configured options, so it refuses what `zt train` refuses.
  void validate_experts(int world_size, const model::Config& cfg) const;

  // The hpZ group size in effect: 1 when hpZ does nothing (stage < 3, off, or the
  // group would be the whole world), else the resolved hpz_partition_size.
  int effective_hpz(int world_size, int ranks_per_node) const;
};

// "fp32" / "f32" / "float" -> kF32, "bf16" / "bfloat16" -> kBF16. Throws zt::InputError
// naming zero.reduce_dtype and the valid values.
DType parse_reduce_dtype(std::string_view name);

}  // namespace zt::zero
