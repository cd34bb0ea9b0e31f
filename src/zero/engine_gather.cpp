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
// the bf16 shard is what the CPU AdamW copied up (params.half), or with offload.params
// the shard's bf16 rounding copied up straight into the send range (load_shard_half).
// What a primary gather sends comes from the engine's parameters (Engine::Impl::send_shard).
#include "engine_gather.hpp"

#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero::detail {

GatherSchedule::GatherSchedule(const EngineContext& ctx, const BufferPlan& plan, bool half, Send send)
    : c_(ctx), half_weights_(half), send_(std::move(send)) {
  const size_t slots = static_cast<size_t>(plan.gather_slots);
  const size_t each = static_cast<size_t>(plan.gather);
  jobs_.resize(slots);
  if (half_weights_) half_ = make_bufs<bf16>(c_.mem, slots, each, "stage-3 gather buffers");
  else full_ = make_bufs<float>(c_.mem, slots, each, "stage-3 gather buffers");
  if (plan.gather_q > 0) q_ = make_bufs<uint8_t>(c_.mem, slots, static_cast<size_t>(plan.gather_q), "qwZ buffers");
  fifo_.reserve(slots);
  const int units = c_.part.num_units();
  primary_pos_.assign(static_cast<size_t>(units), -1);
  secondary_valid_.assign(static_cast<size_t>(units), 0);
  if (c_.part.hpz() > 1)
    for (const UnitBuffers& b : plan.units) {
      if (half_weights_) secondary_half_.emplace_back(c_.mem, static_cast<size_t>(b.secondary_half), "hpZ secondary shards");
      else secondary_.emplace_back(c_.mem, static_cast<size_t>(b.secondary), "hpZ secondary shards");
    }
}

size_t GatherSchedule::secondary_bytes() const { return bytes_of(secondary_) + bytes_of(secondary_half_); }
size_t GatherSchedule::buffer_bytes() const { return bytes_of(full_) + bytes_of(half_); }
size_t GatherSchedule::comm_bytes() const { return bytes_of(q_); }

bf16* GatherSchedule::send_half(int u, int slot) {
  const size_t shard = static_cast<size_t>(c_.part.unit(u).shard);
  return slot_half(slot) + static_cast<size_t>(c_.part.index()) * shard;
}

void GatherSchedule::begin_pass(const std::vector<int>& order) {
  order_ = &order;
  started_ = 0;
  pos_slot_.assign(order.size(), -1);
}

const void* GatherSchedule::use(size_t position, int64_t epoch) {
  const size_t s = static_cast<size_t>(complete(position, epoch));
  // Keep `prefetch` gathers in flight ahead of this use.
  const size_t last = std::min(order_->size(), position + 1 + static_cast<size_t>(c_.opt.prefetch));
  while (started_ < last) start(started_, epoch);
  return half_weights_ ? static_cast<const void*>(half_[s].data()) : full_[s].data();
}

void GatherSchedule::pump(int64_t epoch) {
  for (int slot : fifo_) {
    Job& job = jobs_[static_cast<size_t>(slot)];
    if (job.stamp <= epoch && job.phase + 1 < job.phases) advance(job, epoch);
  }
}

int GatherSchedule::acquire() {
  for (size_t s = 0; s < jobs_.size(); ++s)
    if (!jobs_[s].busy) return static_cast<int>(s);
  throw Error("no free stage-3 gather buffer", "a bug in the engine's schedule (slots = "
                                               "prefetch + units in use at once)");
}

void GatherSchedule::start(size_t position, int64_t epoch) {
  ZT_CHECK(position == started_, "gathers must start in use order",
           "a bug in the engine's schedule");
  started_ = position + 1;
  const int u = (*order_)[position];
  const size_t i = static_cast<size_t>(u);
  bool from_secondary = false;
  if (c_.part.hpz() > 1) {
    // A primary gather of u still running will fill the secondary: finish it first.
    if (primary_pos_[i] >= 0) complete(static_cast<size_t>(primary_pos_[i]), epoch);
    from_secondary = secondary_valid_[i] != 0;
  }
  const int slot = acquire();
  Job& job = jobs_[static_cast<size_t>(slot)];
  job.busy = true;
  job.pos = static_cast<int>(position);
  job.unit = u;
  job.from_secondary = from_secondary;
  job.src = nullptr;
  job.phase = 0;
  job.phases = from_secondary ? 1 : c_.groups.gather_phases();
  job.stamp = epoch;
  pos_slot_[position] = slot;
  if (!from_secondary) {
    primary_pos_[i] = static_cast<int>(position);
    job.src = send_(u, slot);
    if (!half_weights_ && c_.opt.quantize_weights) {
      const UnitPartition& p = c_.part.unit(u);
      const size_t chunk = packed_bytes(static_cast<size_t>(p.shard), c_.qblock);
      uint8_t* q = q_[static_cast<size_t>(slot)].data();
      c_.mem.quantize_pack(job.src, static_cast<size_t>(p.shard), c_.qblock,
                           q + static_cast<size_t>(c_.part.index()) * chunk);
    }
  }
  start_phase(job, slot);
  fifo_.push_back(slot);
}

void GatherSchedule::start_phase(Job& job, int slot) {
  const UnitPartition& p = c_.part.unit(job.unit);
  const size_t i = static_cast<size_t>(job.unit);
  float* full = half_weights_ ? nullptr : full_[static_cast<size_t>(slot)].data();  // [padded]
  if (job.from_secondary && half_weights_) {
    job.handles.push_back(c_.groups.hpz().iall_gather(secondary_half_[i].data(), slot_half(slot),
                                                      static_cast<size_t>(p.secondary), DType::kBF16));
  } else if (job.from_secondary) {
    job.handles.push_back(c_.groups.hpz().iall_gather(secondary_[i].data(), full,
                                                      static_cast<size_t>(p.secondary), DType::kF32));
  } else if (half_weights_) {
    bf16* whole = slot_half(slot);  // [padded], n shards
    c_.groups.start_gather(job.phase, send_half(job.unit, slot), whole, static_cast<size_t>(p.shard),
                           DType::kBF16, job.handles);
  } else if (c_.opt.quantize_weights) {
    const size_t chunk = packed_bytes(static_cast<size_t>(p.shard), c_.qblock);
    uint8_t* q = q_[static_cast<size_t>(slot)].data();  // n chunks, partition order
    c_.groups.start_gather(job.phase, q + static_cast<size_t>(c_.part.index()) * chunk, q, chunk,
                           DType::kU8, job.handles);
  } else {
    c_.groups.start_gather(job.phase, job.src, full, static_cast<size_t>(p.shard), DType::kF32,
                           job.handles);
  }
}

void GatherSchedule::advance(Job& job, int64_t epoch) {
  wait_all(job.handles);
  ++job.phase;
  job.stamp = epoch + 1;
  start_phase(job, pos_slot_[static_cast<size_t>(job.pos)]);
}

int GatherSchedule::complete(size_t position, int64_t epoch) {
  if (position >= started_) start(position, epoch);
  const int slot = pos_slot_[position];
  Job& job = jobs_[static_cast<size_t>(slot)];
  while (job.phase < job.phases) {
    // The next phase is launched from the host, so it waits there; the last one only
    // has to come before the compute that uses the unit (before_use's event wait).
    if (job.phase + 1 < job.phases)
      wait_all(job.handles);
    else
      c_.compute_waits_for(job.handles);
    ++job.phase;
    if (job.phase < job.phases)
      start_phase(job, slot);
    else
      finish(job, slot);
  }
  return slot;
}

void GatherSchedule::finish(Job& job, int slot) {
  fifo_.erase(std::find(fifo_.begin(), fifo_.end(), slot));
  if (job.from_secondary) return;
  const size_t i = static_cast<size_t>(job.unit);
  const UnitPartition& p = c_.part.unit(job.unit);
  float* full = half_weights_ ? nullptr : full_[static_cast<size_t>(slot)].data();  // [padded]
  if (c_.opt.quantize_weights) {
    const size_t shard = static_cast<size_t>(p.shard);
    const size_t chunk = packed_bytes(shard, c_.qblock);
    const uint8_t* q = q_[static_cast<size_t>(slot)].data();
    for (int c = 0; c < c_.part.parts(); ++c)
      c_.mem.dequantize(q + static_cast<size_t>(c) * chunk, shard, c_.qblock,
                        full + static_cast<size_t>(c) * shard);
  }
  primary_pos_[i] = -1;
  if (c_.part.hpz() > 1 && !secondary_valid_[i]) {
    if (half_weights_)
      c_.mem.copy(secondary_half_[i].data(), slot_half(slot) + p.secondary_begin,
                  static_cast<size_t>(p.secondary) * sizeof(bf16));
    else
      c_.mem.copy(secondary_[i].data(), full + p.secondary_begin,
                  static_cast<size_t>(p.secondary) * sizeof(float));
    secondary_valid_[i] = 1;
  }
}

void GatherSchedule::release(size_t position) {
  const int slot = pos_slot_[position];
  Job& job = jobs_[static_cast<size_t>(slot)];
  ZT_CHECK(job.busy && job.phase == job.phases, "released a gather that is still running",
           "a bug in the engine's schedule");
  job.busy = false;
  pos_slot_[position] = -1;
}

}  // namespace zt::zero::detail
