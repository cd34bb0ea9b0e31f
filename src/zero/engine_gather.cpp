// Stage-3 parameter gathers. A unit is gathered for each use (position of the use
// order) into a gather slot, from
//   - the primary partition (this rank's fp32 shard; world collective, in node + cross
//     phases when hierarchical), as fp32 or, with qwZ, as packed int8 blocks + scales
//     that every rank dequantizes (its own part included, so all ranks compute with the
//     same values); or
//   - the hpZ secondary partition (one all_gather within the hpz group), once a primary
//     gather since the last optimizer step has filled it.
// With bf16 compute weights (bf16_weights: train.precision = bf16-mixed) a primary gather casts
// the fp32 shard into its place in the slot's bf16 buffer and all-gathers bf16 in place
// (half the bytes of fp32); the hpZ secondary holds bf16 too. With offload from a device
// the bf16 shard is what the CPU AdamW copied up (param_half), or with offload.params
// the shard's bf16 rounding copied up straight into the send range (load_shard_half).
#include <algorithm>

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero {

int Engine::Impl::acquire_gather_slot() {
  for (size_t s = 0; s < gathers.size(); ++s)
    if (!gathers[s].busy) return static_cast<int>(s);
  throw Error("no free stage-3 gather buffer", "a bug in the engine's schedule (slots = "
                                               "prefetch + units in use at once)");
}

void Engine::Impl::start_gather(size_t position) {
  ZT_CHECK(position == started, "gathers must start in use order",
           "a bug in the engine's schedule");
  started = position + 1;
  const int u = (*order)[position];
  const size_t i = static_cast<size_t>(u);
  bool from_secondary = false;
  if (hpz > 1) {
    // A primary gather of u still running will fill the secondary: finish it first.
    if (primary_pos[i] >= 0) complete_gather(static_cast<size_t>(primary_pos[i]));
    from_secondary = secondary_valid[i] != 0;
  }
  const int slot = acquire_gather_slot();
  GatherJob& job = gathers[static_cast<size_t>(slot)];
  job.busy = true;
  job.pos = static_cast<int>(position);
  job.unit = u;
  job.from_secondary = from_secondary;
  job.phase = 0;
  job.phases = from_secondary ? 1 : groups.gather_phases();
  job.stamp = epoch;
  pos_slot[position] = slot;
  if (!from_secondary) {
    primary_pos[i] = static_cast<int>(position);
    order_up(u);  // offload: the shard's copies up from the last step, if in flight
    if (params_offloaded && !half_up) load_shard(u, slot);
    if (params_offloaded && half_up) {
      load_shard_half(u, slot);  // the bf16 shard straight into its send range: no cast
    } else if (bf16_weights) {
      cast_shard_for_gather(u, slot);
    } else if (opt.quantize_weights) {
      const UnitPartition& p = part.unit(u);
      const size_t chunk = packed_bytes(static_cast<size_t>(p.shard), qblock);
      uint8_t* q = gather_q[static_cast<size_t>(slot)].data();
      mem->quantize_pack(shard_src(u, slot), static_cast<size_t>(p.shard), qblock,
                         q + static_cast<size_t>(part.index()) * chunk);
    }
  }
  start_gather_phase(job, slot);
  gather_fifo.push_back(slot);
}

void Engine::Impl::start_gather_phase(GatherJob& job, int slot) {
  const UnitPartition& p = part.unit(job.unit);
  const size_t i = static_cast<size_t>(job.unit);
  float* full = bf16_weights ? nullptr : gather_buf[static_cast<size_t>(slot)].data();  // [padded]
  if (job.from_secondary && bf16_weights) {
    job.handles.push_back(groups.hpz().iall_gather(secondary_half[i].data(),
                                                   gather_half[static_cast<size_t>(slot)].data(),
                                                   static_cast<size_t>(p.secondary),
                                                   DType::kBF16));
  } else if (job.from_secondary) {
    job.handles.push_back(groups.hpz().iall_gather(secondary[i].data(), full,
                                                   static_cast<size_t>(p.secondary),
                                                   DType::kF32));
  } else if (bf16_weights) {
    bf16* whole = gather_half[static_cast<size_t>(slot)].data();  // [padded], n shards
    groups.start_gather(job.phase, whole + static_cast<size_t>(part.index()) * p.shard, whole,
                        static_cast<size_t>(p.shard), DType::kBF16, job.handles);
  } else if (opt.quantize_weights) {
    const size_t chunk = packed_bytes(static_cast<size_t>(p.shard), qblock);
    uint8_t* q = gather_q[static_cast<size_t>(slot)].data();  // n chunks, partition order
    groups.start_gather(job.phase, q + static_cast<size_t>(part.index()) * chunk, q, chunk,
                        DType::kU8, job.handles);
  } else {
    groups.start_gather(job.phase, shard_src(job.unit, slot), full, static_cast<size_t>(p.shard),
                        DType::kF32, job.handles);
  }
}

void Engine::Impl::advance_gather(GatherJob& job) {
  detail::wait_all(job.handles);
  ++job.phase;
  job.stamp = epoch + 1;
  start_gather_phase(job, pos_slot[static_cast<size_t>(job.pos)]);
}

int Engine::Impl::complete_gather(size_t position) {
  if (position >= started) start_gather(position);
  const int slot = pos_slot[position];
  GatherJob& job = gathers[static_cast<size_t>(slot)];
  while (job.phase < job.phases) {
    // The next phase is launched from the host, so it waits there; the last one only
    // has to come before the compute that uses the unit (before_use's event wait).
    if (job.phase + 1 < job.phases)
      detail::wait_all(job.handles);
    else
      ctx.compute_waits_for(job.handles);
    ++job.phase;
    if (job.phase < job.phases)
      start_gather_phase(job, slot);
    else
      finish_gather(job, slot);
  }
  return slot;
}

void Engine::Impl::finish_gather(GatherJob& job, int slot) {
  gather_fifo.erase(std::find(gather_fifo.begin(), gather_fifo.end(), slot));
  if (job.from_secondary) return;
  const size_t i = static_cast<size_t>(job.unit);
  const UnitPartition& p = part.unit(job.unit);
  float* full = bf16_weights ? nullptr : gather_buf[static_cast<size_t>(slot)].data();  // [padded]
  if (opt.quantize_weights) {
    const size_t shard = static_cast<size_t>(p.shard);
    const size_t chunk = packed_bytes(shard, qblock);
    const uint8_t* q = gather_q[static_cast<size_t>(slot)].data();
    for (int c = 0; c < n; ++c)
      mem->dequantize(q + static_cast<size_t>(c) * chunk, shard, qblock,
                      full + static_cast<size_t>(c) * shard);
  }
  primary_pos[i] = -1;
  if (hpz > 1 && !secondary_valid[i]) {
    if (bf16_weights)
      mem->copy(secondary_half[i].data(),
                gather_half[static_cast<size_t>(slot)].data() + p.secondary_begin,
                static_cast<size_t>(p.secondary) * sizeof(bf16));
    else
      mem->copy(secondary[i].data(), full + p.secondary_begin,
                static_cast<size_t>(p.secondary) * sizeof(float));
    secondary_valid[i] = 1;
  }
}

// The bf16 cast of this rank's fp32 shard of unit u into its place (partition index) in
// the slot's bf16 buffer: the send range of the in-place bf16 all-gather. The padding of
// the shard is zero, and stays zero in bf16.
void Engine::Impl::cast_shard_for_gather(int u, int slot) {
  const UnitPartition& p = part.unit(u);
  bf16* whole = gather_half[static_cast<size_t>(slot)].data();  // [padded]
  bf16* place = whole + static_cast<size_t>(part.index()) * static_cast<size_t>(p.shard);
  if (bf16_master || half_up)  // the stored shard is bf16 already (half_up: its copy up)
    mem->copy(place, param_half[static_cast<size_t>(u)].data(),
              static_cast<size_t>(p.shard) * sizeof(bf16));
  else
    mem->to_bf16(shard_src(u, slot), static_cast<size_t>(p.shard), place);
}

void Engine::Impl::release_gather(size_t position) {
  const int slot = pos_slot[position];
  GatherJob& job = gathers[static_cast<size_t>(slot)];
  ZT_CHECK(job.busy && job.phase == job.phases, "released a gather that is still running",
           "a bug in the engine's schedule");
  job.busy = false;
  pos_slot[position] = -1;
}

void Engine::Impl::gather_exact(int u, float* out) {
  const UnitPartition& p = part.unit(u);
  if (bf16_master) {  // the bf16 shards into gather slot 0 (idle: free), widened
    bf16* whole = gather_half[0].data();  // [padded]
    cast_shard_for_gather(u, 0);
    detail::Handles handles;
    for (int phase = 0; phase < groups.gather_phases(); ++phase) {
      groups.start_gather(phase, whole + static_cast<size_t>(part.index()) * static_cast<size_t>(p.shard),
                          whole, static_cast<size_t>(p.shard), DType::kBF16, handles);
      detail::wait_all(handles);
    }
    mem->from_bf16(whole, static_cast<size_t>(p.padded), out);
    return;
  }
  const float* src = param_shard.empty() ? nullptr : param_shard[static_cast<size_t>(u)].data();
  if (params_offloaded) {  // idle: gather slot 0's staging buffer is free
    load_shard(u, 0);
    src = shard_src(u, 0);
  }
  detail::Handles handles;
  for (int phase = 0; phase < groups.gather_phases(); ++phase) {
    groups.start_gather(phase, src, out,
                        static_cast<size_t>(p.shard), DType::kF32, handles);
    detail::wait_all(handles);
  }
}

}  // namespace zt::zero
