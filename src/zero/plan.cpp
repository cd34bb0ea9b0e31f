// What the engine holds, buffer by buffer (see plan.hpp).
#include "zt/zero/plan.hpp"

#include <algorithm>
#include <string>

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/model/layout.hpp"
#include "zt/model/lora.hpp"
#include "zt/offload/store.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero {
namespace {

uint64_t u64(int64_t x) { return static_cast<uint64_t>(std::max<int64_t>(x, 0)); }

}  // namespace

int partition_align(const EngineOptions& opt) {
  return (opt.quantize_weights || opt.quantize_grads) ? opt.quantize_block : 16;
}

void check_buffer_options(const EngineOptions& opt, const PlanSpace& space) {
  const bool offload = opt.offload.optimizer != offload::Home::kNone ||
                       opt.offload.params != offload::Home::kNone;
  if (space.bf16_master && offload)
    throw InputError("offload.optimizer / offload.params with train.precision = bf16-true",
                     "the offload store keeps an fp32 master, which bf16-true has not: set "
                     "offload.optimizer = none and offload.params = none, or train.precision = "
                     "bf16-mixed");
  if (space.bf16_weights && opt.quantize_weights)
    throw InputError("zero.quantize_weights = true with train.precision = " + opt.precision,
                     "qwZ dequantizes into fp32 gather buffers; with bf16 compute weights set "
                     "zero.quantize_weights = false (the bf16 gather already halves the bytes)");
  if (opt.offload.params != offload::Home::kNone && opt.offload.optimizer == offload::Home::kNone &&
      !space.host_accessible)
    throw InputError(strf("offload.params = %s with offload.optimizer = none and the engine on the %s",
                          std::string(offload::home_name(opt.offload.params)).c_str(), space.name),
                     "the update would run on the device and need the shards there: set "
                     "offload.optimizer = cpu or nvme (the CPU AdamW updates the offloaded "
                     "shards), or offload.params = none");
}

BufferPlan plan_buffers(const std::vector<PlanUnit>& units, const EngineOptions& opt,
                        const PlanSpace& space, int hpz, bool tied) {
  check_buffer_options(opt, space);
  BufferPlan b;
  const int stage = opt.stage;
  b.state_offloaded = opt.offload.optimizer != offload::Home::kNone;
  // offload.params = cpu on a host space is where the shards are anyway: nothing moves.
  b.params_offloaded = opt.offload.params == offload::Home::kNvme ||
                       (opt.offload.params == offload::Home::kCpu && !space.host_accessible);
  b.offload_copies = b.state_offloaded && !space.host_accessible;
  b.half_up = b.offload_copies && space.bf16_weights;
  bool adapters = false;
  int64_t maxp = 0, maxg = 0, widest = 0;
  for (const PlanUnit& pu : units) {
    const UnitPartition& p = pu.part;
    maxp = std::max(maxp, p.padded);
    b.max_shard = std::max(b.max_shard, p.shard);
    if (pu.trainable) {
      maxg = std::max(maxg, p.padded);
      widest = std::max(widest, stage == 0 ? p.numel : p.owned);
    }
    adapters = adapters || pu.adapters;
    UnitBuffers u;
    u.count = pu.count;
    if (stage <= 2) {  // half_up: the fp32 copy goes (the master is the store's)
      if (!space.bf16_master && !b.half_up) u.full_params = p.padded;
      if (space.bf16_weights) u.compute_params = p.padded;
    } else if (!b.params_offloaded) {
      (space.bf16_master || b.half_up ? u.param_half : u.param_shard) = p.shard;
    }
    if (hpz > 1) (space.bf16_weights ? u.secondary_half : u.secondary) = p.secondary;
    if (pu.trainable) {
      (stage <= 1 ? u.full_grads : u.grad_shard) = stage <= 1 ? p.padded : p.shard;
      if (!b.state_offloaded) u.moments = stage == 0 ? p.padded : p.shard;
    } else if (b.half_up && !b.params_offloaded) {
      u.frozen_host = p.owned;
    }
    b.units.push_back(u);
    for (int64_t i = 0; i < pu.count; ++i) {
      b.state_counts.push_back(pu.trainable ? p.owned : 0);
      if (b.params_offloaded) b.param_counts.push_back(p.shard);
    }
  }
  // Working buffers; the adapters' unit holds one gather and one reduce slot for the
  // whole pass.
  const int extra = adapters ? 1 : 0;
  const int qblock = opt.quantize_block;
  if (stage == 3) {
    b.gather_slots = opt.prefetch + (tied ? 2 : 1) + extra;
    b.gather = maxp;
    b.bf16_gather = space.bf16_weights;
    if (opt.quantize_weights) b.gather_q = static_cast<int64_t>(packed_bytes(u64(maxp), u64(qblock)));
  }
  b.reduce_slots = stage >= 2 ? 1 + kReducesInFlight + (tied ? 1 : 0) + extra : kReducesInFlight;
  if (stage >= 2) b.grad_buf = maxg;
  if (opt.quantize_grads)
    b.reduce_q = static_cast<int64_t>(packed_bytes(u64(maxg), u64(qblock)));
  else if (opt.reduce_dtype == DType::kBF16)
    b.reduce_half = maxg;
  if (space.bf16_master) b.update_wide = widest;
  if (b.params_offloaded) {
    if (!b.half_up) b.param_stage = b.max_shard;  // (half_up: into the gather buffer)
    b.unit_params = b.max_shard;
  }
  // The store, as the engine builds it.
  b.store_options = opt.offload;
  if (!b.params_offloaded) b.store_options.params = offload::Home::kNone;
  b.store_options.pin_buffers = !space.host_accessible;
  if (b.state_offloaded || b.params_offloaded) {
    b.store_host = offload::store_host_bytes(b.store_options, b.state_counts, b.param_counts);
    b.nvme = offload::nvme_file_bytes(b.store_options, b.state_counts, b.param_counts);
  }
  return b;
}

BufferPlan plan_model(const model::Config& cfg, int n, int hpz, const EngineOptions& opt,
                      const PlanSpace& space) {
  // The blocks of one size (dense or routed, linear or full attention) are one unit
  // counted that many times, so the plan does not grow with model.layers.
  const int ep = std::max(1, opt.expert_parallel);
  // QLoRA's base units leave out the targeted W (held as NF4 only).
  const model::ParamLayout layout =
      ep > 1 ? model::ParamLayout::expert_slice(cfg, ep, 0) : model::lora_base_layout(cfg, opt.lora);
  const int align = partition_align(opt);
  const Partition part(layout, n, 0, align, hpz, 0);
  std::vector<PlanUnit> units;  // embedding, a block of each size..., head
  for (int u = 0; u < part.num_units(); ++u) {
    const UnitPartition& p = part.unit(u);
    const bool block = layout.unit(u).kind == model::UnitKind::kBlock;
    const auto same = std::find_if(units.begin() + std::min<size_t>(units.size(), 1), units.end(),
                                   [&](const PlanUnit& q) { return block && q.part.numel == p.numel; });
    if (same != units.end())
      ++same->count;
    else
      units.push_back({p, !opt.lora.enabled(), false, 1});
  }
  if (opt.lora.enabled()) {  // the adapters' unit (of the whole model), partitioned as any
    UnitPartition a;
    a.numel = model::LoraLayout(cfg, opt.lora).numel();
    a.padded = padded_numel(a.numel, n, align);
    a.shard = a.padded / n;
    a.owned = std::min(a.numel, a.shard);
    a.secondary = a.padded / hpz;
    units.push_back({a, true, true, 1});
  }
  return plan_buffers(units, opt, space, hpz, cfg.tied_embeddings);
}

MemoryStats BufferPlan::bytes() const {
  MemoryStats m;
  const auto sum = [&](auto of) {
    uint64_t s = 0;
    for (const UnitBuffers& u : units) s += u64(u.count) * u64(of(u));
    return static_cast<size_t>(s);
  };
  m.full_params = sum([](const UnitBuffers& u) { return 4 * u.full_params + 2 * u.compute_params; });
  m.param_shards = sum([](const UnitBuffers& u) { return 4 * u.param_shard + 2 * u.param_half; }) +
                   static_cast<size_t>(4 * param_stage * gather_slots) + host_param_bytes();
  m.secondary_shards = sum([](const UnitBuffers& u) { return 4 * u.secondary + 2 * u.secondary_half; });
  m.grads = sum([](const UnitBuffers& u) { return 4 * (u.full_grads + u.grad_shard); });
  m.optimizer = sum([](const UnitBuffers& u) { return 8 * u.moments; }) + store_host;
  m.gather_buffers = u64(gather_slots) * u64(gather) * (bf16_gather ? 2 : 4);
  m.grad_buffers = 4 * (u64(reduce_slots) * u64(grad_buf) + u64(update_wide));
  m.comm_buffers = u64(gather_slots) * u64(gather_q) + 2 * u64(reduce_slots) * u64(reduce_half + reduce_q);
  return m;
}

uint64_t BufferPlan::host_param_bytes() const {
  uint64_t b = 4 * u64(unit_params);
  for (const UnitBuffers& u : units) b += 4 * u64(u.count) * u64(u.frozen_host);
  return b;
}

}  // namespace zt::zero
