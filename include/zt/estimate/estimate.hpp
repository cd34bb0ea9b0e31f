#pragma once
// Memory estimates of ZeRO training (`zt estimate`): bytes per rank (= per GPU) and per
// host for each ZeRO stage, hpZ and offload choice, from the model shape, the micro-batch
// shape and the zero.* options. See docs/estimate.md for every formula.
//
// Every row is the ZeRO engine's own accounting (Engine::memory(), by category) computed
// ahead of time, byte for byte, for what the engine allocates:
//   both devices  fp32 master parameters (4 B), fp32 gradients (4 B), fp32 AdamW m + v
//                 (8 B) per parameter, full or sharded by stage; fp32 gradient buffers.
//   Device::kGpu  with train.precision = bf16-mixed also the bf16 weights the model binds:
//                 a bf16 copy of each full unit at stages 0-2 (counted in params), bf16
//                 stage-3 gather buffers and hpZ secondaries; the GPU model's workspace
//                 (zt/model/device_workspace.hpp, flash attention: no T x T
//                 probabilities) in bf16. With fp32, all fp32. bf16-true: bf16
//                 parameters with no fp32 master (full units at stages 0-2, shards at
//                 3), fp32 gradients and moments, bf16 gathers and workspace, and AdamW's
//                 fp32 work buffer (the widest slice it updates) in grad_buffer_bytes;
//                 no offload rows (the engine refuses offload with it).
//   Device::kCpu  fp32 only; the CPU model's workspace (Model::workspace_bytes).
//
// Padding, shard sizes and buffer slot counts follow zt::zero::Partition and engine.cpp.
// Offload (optimizer / parameters to host memory or NVMe): the engine's offload store,
// sized from Setup::zero.offload (offload.subgroup_bytes, offload.buffers); on the GPU the
// store and the host parameter shard are Row::host_bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "zt/model/config.hpp"
#include "zt/zero/options.hpp"

namespace zt::estimate {

enum class Device { kGpu, kCpu };
enum class Offload { kNone, kCpu, kNvme };
std::string_view device_name(Device d);    // "gpu", "cpu"
std::string_view offload_name(Offload o);  // "none", "cpu", "nvme"

struct Setup {
  model::Config model;
  int64_t micro_batch = 1;  // sequences per rank per forward/backward (train.micro_batch)
  int64_t seq_len = 128;    // tokens per sequence (train.seq_len; capped at model.context)
  int gpus_per_node = 1;    // ranks per node
  int nodes = 1;
  Device device = Device::kGpu;
  // prefetch, hpz_partition_size, quantize_weights/grads, quantize_block, reduce_dtype,
  // precision (train.precision), offload (the stage is chosen per row).
  zero::EngineOptions zero;
  // Device::kCpu: OpenMP threads per rank (the attention backward keeps T*T floats of
  // scratch per thread). Ignored on GPU.
  int threads = 1;

  int world() const { return gpus_per_node * nodes; }
};

// One configuration: bytes held by one rank (one GPU; on Device::kCpu, host memory of one
// rank), by category as in zt::zero::MemoryStats, and what is offloaded.
struct Row {
  int stage = 0;
  int hpz = 1;  // hpZ secondary group size in effect (1: none)
  Offload optimizer = Offload::kNone;
  Offload params = Offload::kNone;

  // per rank, on the device
  uint64_t param_bytes = 0;      // full params (stages 0-2) or shard (3) + hpZ secondary
  uint64_t grad_bytes = 0;
  uint64_t optimizer_bytes = 0;
  uint64_t gather_bytes = 0;     // stage-3 gather buffers
  uint64_t grad_buffer_bytes = 0;  // stage 2-3 full-unit gradient buffers
  uint64_t comm_bytes = 0;       // bf16 staging / quantized payloads
  uint64_t activation_bytes = 0;            // workspace without recompute
  uint64_t activation_recompute_bytes = 0;  // workspace with train.recompute = true
  // Device::kGpu: the libraries' scratch (cuBLASLt, cuDNN attention:
  // model::DeviceLibraryWorkspaces), in total() but not in Engine::memory(); 0 on kCpu.
  uint64_t library_bytes = 0;
  // per rank, elsewhere (offload)
  // Device::kGpu: host (CPU) memory of this rank's offloaded states, as the engine counts
  // them (the store's host bytes in its optimizer, the host parameter shard in its
  // param_shards); 0 on Device::kCpu, where they are in the categories above.
  uint64_t host_bytes = 0;
  uint64_t host_param_bytes = 0;  // of host_bytes: the host parameter shard
  uint64_t nvme_bytes = 0;   // NVMe of this rank's offloaded states

  uint64_t model_states() const { return param_bytes + grad_bytes + optimizer_bytes; }
  uint64_t working() const { return gather_bytes + grad_buffer_bytes + comm_bytes; }
  uint64_t total(bool recompute) const {
    return model_states() + working() + library_bytes +
           (recompute ? activation_recompute_bytes : activation_bytes);
  }
  std::string label() const;  // "stage 3 + hpZ 8, optimizer cpu, params none"
};

// Bytes of the model's activation workspace after one training micro-step of B x T
// (T capped at the context) with or without recompute, elem_bytes per element (4 for
// zt's fp32 CPU model, 2 for bf16), `threads` OpenMP threads (attention backward scratch;
// 0 leaves it out). Same buffers as Model::workspace_bytes. expert_parallel > 1
// (moe.expert_parallel): the ExpertParallelMoe layers keep the routed rows instead (one
// per layer without recompute, plus eval's; one with), counted at balanced routing (each
// rank computes as many routed rows as it sends: N k).
uint64_t activation_bytes(const model::Config& cfg, int64_t B, int64_t T, bool recompute,
                          int elem_bytes, int threads, int expert_parallel = 1);

// One configuration. hpz_request: the hpZ group size asked for (as
// zero.hpz_partition_size: 0 = ranks per node, 1 = off); the effective size follows
// EngineOptions::effective_hpz. Offload rows need stage >= 1 (optimizer) and stage 3
// (params). Throws zt::InputError for an impossible combination.
Row estimate_row(const Setup& setup, int stage, int hpz_request, Offload optimizer,
                 Offload params);

// Every row of the table: stages 0-3 without offload, stage 3 with hpZ (when hpZ does
// something: more than one node), and the offload choices (optimizer cpu/nvme at stages
// 1-3; params at stage 3: nvme on Device::kCpu, cpu/nvme with the optimizer offloaded on
// Device::kGpu).
std::vector<Row> estimate_all(const Setup& setup);

// Whether a row fits: per rank on the device within device_bytes, and the host memory
// of one node (gpus_per_node ranks) within host_bytes. On Device::kCpu the rank's whole
// total is host memory (device_bytes is not used).
struct Fit {
  bool device = false;            // without recompute
  bool device_recompute = false;  // with recompute
  bool host = false;
  bool fits(bool recompute) const { return (recompute ? device_recompute : device) && host; }
};
Fit check_fit(const Row& row, const Setup& setup, uint64_t device_bytes, uint64_t host_bytes);

// `zt generate`'s memory (the fp32 CPU model, one sequence of `capacity` positions, the
// prompt prefilled `chunk` positions at a time): what its preflight counts before
// allocating. cache: model::KvCache::bytes, the keys and values of the attention layers
// only and each Gated DeltaNet layer's conv inputs [Cc, K - 1] and recurrent state
// [Hv, Dk, Dv], whatever the length; workspace: the RoPE tables and one chunk's scratch (a
// bound of the model's workspace: the residual stream, one block of each mixer the model
// has, the logits, the decode scores).
struct GenerationBytes {
  uint64_t cache = 0;
  uint64_t workspace = 0;
  uint64_t total() const { return cache + workspace; }
};
GenerationBytes generation_bytes(const model::Config& cfg, int64_t capacity, int64_t chunk);

}  // namespace zt::estimate
