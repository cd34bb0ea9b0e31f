// Validation of the ZeRO engine's options: every error names the configuration key and
// the values it accepts.
#include "zt/zero/options.hpp"

#include <cmath>
#include <string>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/moe_parallel.hpp"

namespace zt::zero {
namespace {

// "1, 2, 4" for the divisors of k greater than 1.
std::string divisors_above_one(int k) {
  std::string s;
  for (int d = 2; d <= k; ++d) {
    if (k % d != 0) continue;
    if (!s.empty()) s += ", ";
    s += std::to_string(d);
  }
  return s;
}

}  // namespace

void EngineOptions::validate(int world_size, int ranks_per_node) const {
  ZT_CHECK(world_size >= 1 && ranks_per_node >= 1 && world_size % ranks_per_node == 0,
           strf("world %d, ranks per node %d", world_size, ranks_per_node),
           "the caller passes the communicator sizes");
  if (stage < 0 || stage > 3)
    throw InputError(strf("zero.stage = %d is not a ZeRO stage; valid values: 0, 1, 2, 3", stage),
                     "0 replicates everything (DDP), 1 shards the optimizer state, 2 also the "
                     "gradients, 3 also the parameters");
  const int k = ranks_per_node;
  if (hpz_partition_size < 0 || hpz_partition_size > k ||
      (hpz_partition_size > 0 && k % hpz_partition_size != 0)) {
    const std::string divisors = divisors_above_one(k);
    throw InputError(
        strf("zero.hpz_partition_size = %d does not fit %d ranks per node (world %d); valid "
             "values: 0 (the ranks per node), 1 (off)%s%s",
             hpz_partition_size, k, world_size, divisors.empty() ? "" : ", ", divisors.c_str()),
        "the hpZ secondary group must lie within one node and divide it; set --ranks-per-node "
        "to simulate nodes on one host");
  }
  if (prefetch < 0 || prefetch > 16)
    throw InputError(strf("zero.prefetch = %d: valid values: 0 to 16", prefetch),
                     "the number of stage-3 unit gathers kept in flight ahead of the computing "
                     "unit; 2 overlaps both phases of a hierarchical gather");
  if (quantize_weights && stage != 3)
    throw InputError(strf("zero.quantize_weights = true needs zero.stage = 3 (it is %d); valid "
                          "values at stages 0-2: false",
                          stage),
                     "qwZ quantizes the stage-3 parameter gathers");
  if (quantize_grads && stage == 0)
    throw InputError("zero.quantize_grads = true needs zero.stage = 1, 2 or 3 (it is 0); valid "
                     "values at stage 0: false",
                     "qgZ quantizes gradient reduce-scatters; stage 0 all-reduces full gradients");
  if (reduce_dtype != DType::kF32 && reduce_dtype != DType::kBF16)
    throw InputError(strf("zero.reduce_dtype = %s: valid values: fp32, bf16",
                          std::string(dtype_name(reduce_dtype)).c_str()),
                     "the element type of the gradient reductions");
  if (quantize_block < 16 || quantize_block > 65536 || quantize_block % 16 != 0)
    throw InputError(strf("zero.quantize_block = %d: valid values: multiples of 16 from 16 to "
                          "65536",
                          quantize_block),
                     "elements per quantization block (one fp32 scale each); 256 or 2048 are "
                     "usual");
  if (accum < 1)
    throw InputError(strf("train.accum = %d: valid values: 1 or more", accum),
                     "micro-batches per optimizer step");
  if (!std::isfinite(grad_clip))
    throw InputError("train.grad_clip is not a finite number; valid values: a number (<= 0 "
                     "disables clipping)",
                     "");
  if (max_batch < 1 || max_seq < 0)
    throw InputError(strf("micro-batch shape %lld x %lld: the batch must be >= 1 and the "
                          "sequence >= 0",
                          static_cast<long long>(max_batch), static_cast<long long>(max_seq)),
                     "train.micro_batch and train.seq_len size the activation workspace");
  offload.validate(stage);
}

void EngineOptions::validate_experts(int world_size, int64_t experts) const {
  const int n = expert_parallel;
  if (n == 1) return;
  if (n < 1 || world_size % n != 0)
    throw InputError(strf("moe.expert_parallel = %d does not divide the world of %d ranks", n,
                          world_size),
                     "set moe.expert_parallel to a divisor of the ranks (the expert groups tile "
                     "the world), or launch a multiple of it");
  if (experts <= 0 || experts % n != 0)
    throw InputError(strf("moe.expert_parallel = %d does not divide the model's %lld experts", n,
                          static_cast<long long>(experts)),
                     experts <= 0 ? "the model has no experts: set moe.expert_parallel = 1"
                                  : "set moe.expert_parallel to a divisor of model.experts");
  const auto refuse = [&](const std::string& what, const char* hint) {
    throw InputError(strf("moe.expert_parallel = %d with %s", n, what.c_str()), hint);
  };
  // The host model (train.device = cpu) and the GPU model (cuda; its exchanges over NCCL,
  // or staged through the host with comm.backend = mpi) have it; the host-staged space's
  // model is the host one behind a staging copy, not built for it.
  if (device == Device::kHostStaged)
    refuse("the host-staged memory space", "set moe.expert_parallel = 1, or train.device = cpu "
           "or cuda");
  if (precision != "fp32")
    refuse("train.precision = " + precision, "expert parallelism runs in fp32 (the GPU's bf16 "
           "exchanges are not verified yet): set train.precision = fp32 or "
           "moe.expert_parallel = 1");
  if (hpz_partition_size > 1)
    refuse(strf("zero.hpz_partition_size = %d", hpz_partition_size),
           "hpZ's secondary groups are not built over the data-parallel groups of expert "
           "parallelism: set zero.hpz_partition_size = 1 (or 0) or moe.expert_parallel = 1");
  if (offload.optimizer != offload::Home::kNone || offload.params != offload::Home::kNone)
    refuse("offload.optimizer / offload.params", "set offload.optimizer = none and "
           "offload.params = none, or moe.expert_parallel = 1");
  if (lora.enabled()) model::refuse_expert_parallel_lora(n);
}

void EngineOptions::validate_experts(int world_size, const model::Config& cfg) const {
  validate_experts(world_size, cfg.moe() ? cfg.experts : 0);
  if (expert_parallel <= 1) return;
  model::check_expert_parallel_block(cfg, expert_parallel);
}

int EngineOptions::effective_hpz(int world_size, int ranks_per_node) const {
  if (stage != 3) return 1;
  const int h = hpz_partition_size == 0 ? ranks_per_node : hpz_partition_size;
  return (h <= 1 || h >= world_size) ? 1 : h;
}

DType parse_reduce_dtype(std::string_view name) {
  if (name == "fp32" || name == "f32" || name == "float") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  throw InputError("zero.reduce_dtype = \"" + std::string(name) + "\": valid values: fp32, bf16",
                   "the element type of the gradient reductions");
}

}  // namespace zt::zero
