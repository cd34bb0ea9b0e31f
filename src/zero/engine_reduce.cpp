// Gradient reductions, one unit at a time, started as soon as the backward has finished
// the unit (grad_ready):
//   stage 0      all_reduce of the full gradient (last micro-step of a step only)
//   stage 1      reduce_scatter of the full gradient (last micro-step only), in place
//   stages 2-3   reduce_scatter of the micro-step's full-unit gradient buffer, every
//                micro-step; the result is added into the fp32 gradient shard and the
//                buffer goes back to the pool
// in fp32 or bf16 (zero.reduce_dtype), or with qgZ as quantized all-to-alls: each rank
// quantizes the parts of its gradient that others own and sends them; the receiver
// dequantizes and adds them to its own exact part. Hierarchically that happens twice:
// within the node for the node-local block a rank owns (K blocks of nodes * shard), then
// across nodes for its shard (the node sum of the block is requantized), as in ZeRO++.
// Every rank's gradient is pre-divided by the world size, so all these sums are means.
#include <algorithm>

#include "engine_reduce.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero::detail {

ReduceSchedule::ReduceSchedule(const EngineContext& ctx, const BufferPlan& plan, int units, Done done)
    : c_(ctx), done_(std::move(done)) {
  const size_t slots = static_cast<size_t>(plan.reduce_slots);
  jobs_.resize(slots);
  if (plan.grad_buf > 0) grad_buf_ = make_bufs<float>(c_.mem, slots, static_cast<size_t>(plan.grad_buf), "gradient buffers");
  if (plan.reduce_q > 0) {
    qsend_ = make_bufs<uint8_t>(c_.mem, slots, static_cast<size_t>(plan.reduce_q), "qgZ buffers");
    qrecv_ = make_bufs<uint8_t>(c_.mem, slots, static_cast<size_t>(plan.reduce_q), "qgZ buffers");
  }
  if (plan.reduce_half > 0) half_ = make_bufs<bf16>(c_.mem, slots, static_cast<size_t>(plan.reduce_half), "bf16 reduce buffers");
  fifo_.reserve(slots);
  grad_slot_.assign(static_cast<size_t>(units), -1);
}

size_t ReduceSchedule::grad_bytes() const { return bytes_of(grad_buf_); }
size_t ReduceSchedule::comm_bytes() const { return bytes_of(half_) + bytes_of(qsend_) + bytes_of(qrecv_); }

float* ReduceSchedule::unit_buffer(int u) {
  const size_t i = static_cast<size_t>(u);
  if (grad_slot_[i] < 0) {
    const int slot = acquire();
    grad_slot_[i] = slot;
    // The model adds into its gradient buffer; the padding must be zero too.
    c_.mem.zero(grad_buf_[static_cast<size_t>(slot)].data(), static_cast<size_t>(c_.part.unit(u).padded));
  }
  return grad_buf_[static_cast<size_t>(grad_slot_[i])].data();
}

void ReduceSchedule::start_unit(int u, int64_t epoch) {
  const size_t i = static_cast<size_t>(u);
  const int slot = grad_slot_[i];
  ZT_CHECK(slot >= 0, strf("grad_ready(%d) for a unit without a gradient buffer", u),
           "the model's hook contract changed");
  grad_slot_[i] = -1;
  start(u, slot, grad_buf_[static_cast<size_t>(slot)].data(), epoch);
}

void ReduceSchedule::start_full(int u, float* grad, int64_t epoch) { start(u, acquire(), grad, epoch); }

void ReduceSchedule::pump(int64_t epoch) {
  // Completing a reduction removes it from fifo_ (k then stays).
  for (size_t k = 0; k < fifo_.size();) {
    const int slot = fifo_[k];
    Job& job = jobs_[static_cast<size_t>(slot)];
    if (job.stamp > epoch) {
      ++k;
    } else if (job.phase + 1 < job.phases) {
      advance(job, slot, epoch);
      ++k;
    } else {
      complete(slot);  // erases fifo_[k]
    }
  }
}


int ReduceSchedule::acquire() {
  for (size_t s = 0; s < jobs_.size(); ++s) {
    if (!jobs_[s].busy) {
      jobs_[s].busy = true;
      return static_cast<int>(s);
    }
  }
  // All held: the oldest running reduction completes and gives its slot back.
  ZT_CHECK(!fifo_.empty(), "no free gradient buffer and no reduction running",
           "a bug in the engine's schedule");
  const int s = fifo_.front();
  complete(s);
  jobs_[static_cast<size_t>(s)].busy = true;
  return s;
}

void ReduceSchedule::start(int u, int slot, float* grad, int64_t epoch) {
  Job& job = jobs_[static_cast<size_t>(slot)];
  job.running = true;
  job.unit = u;
  job.grad = grad;
  job.phase = 0;
  job.stamp = epoch + 1;
  if (c_.opt.quantize_grads)
    job.phases = c_.groups.all_to_all_levels();
  else
    job.phases = c_.opt.stage == 0 ? c_.groups.all_reduce_phases() : c_.groups.reduce_scatter_phases();
  if (!c_.opt.quantize_grads && c_.opt.reduce_dtype == DType::kBF16)
    c_.mem.to_bf16(grad, static_cast<size_t>(c_.part.unit(u).padded),
                 half_[static_cast<size_t>(slot)].data());
  start_phase(job, slot);
  fifo_.push_back(slot);
}

// qgZ level `level`: the buffer whose chunks are exchanged, and the chunk size.
//   flat:          level 0: the whole gradient, n chunks of shard
//   hierarchical:  level 0: the whole gradient, K chunks (blocks) of nodes * shard
//                  level 1: this rank's block, `nodes` chunks of shard
void ReduceSchedule::start_phase(Job& job, int slot) {
  const UnitPartition& p = c_.part.unit(job.unit);
  const size_t shard = static_cast<size_t>(p.shard);
  if (c_.opt.quantize_grads) {
    const int level = job.phase;
    const int peers = c_.groups.all_to_all_peers(level);
    const int me = c_.groups.all_to_all_me(level);
    const size_t elems =
        level == 0 ? static_cast<size_t>(p.padded) / static_cast<size_t>(peers) : shard;
    const size_t chunk = packed_bytes(elems, c_.qblock);
    const float* base =
        level == 0 ? job.grad
                   : job.grad + static_cast<size_t>(c_.groups.local() * c_.groups.nodes()) * shard;
    uint8_t* qsend = qsend_[static_cast<size_t>(slot)].data();
    for (int c = 0; c < peers; ++c)
      if (c != me)
        c_.mem.quantize_pack(base + static_cast<size_t>(c) * elems, elems, c_.qblock,
                           qsend + static_cast<size_t>(c) * chunk);
    c_.groups.start_all_to_all(level, qsend, qrecv_[static_cast<size_t>(slot)].data(), chunk,
                            job.handles);
    return;
  }
  const bool half = c_.opt.reduce_dtype == DType::kBF16;
  void* buf = half ? static_cast<void*>(half_[static_cast<size_t>(slot)].data())
                   : static_cast<void*>(job.grad);
  const DType dtype = half ? DType::kBF16 : DType::kF32;
  if (c_.opt.stage == 0)
    c_.groups.start_all_reduce(job.phase, buf, shard, dtype, job.handles);
  else
    c_.groups.start_reduce_scatter(job.phase, buf, shard, dtype, job.handles);
}

void ReduceSchedule::advance(Job& job, int slot, int64_t epoch) {
  wait_all(job.handles);
  if (c_.opt.quantize_grads) {
    // Between the levels (only after level 0): this rank's block += the other node-local
    // ranks' parts of it.
    const UnitPartition& p = c_.part.unit(job.unit);
    const int peers = c_.groups.all_to_all_peers(job.phase);
    const int me = c_.groups.all_to_all_me(job.phase);
    const size_t elems = static_cast<size_t>(p.padded) / static_cast<size_t>(peers);
    const size_t chunk = packed_bytes(elems, c_.qblock);
    const uint8_t* qrecv = qrecv_[static_cast<size_t>(slot)].data();
    float* own = job.grad + static_cast<size_t>(me) * elems;
    for (int c = 0; c < peers; ++c)
      if (c != me) c_.mem.dequantize_add(qrecv + static_cast<size_t>(c) * chunk, elems, c_.qblock, own);
  }
  ++job.phase;
  job.stamp = epoch + 1;
  start_phase(job, slot);
}

float* ReduceSchedule::finish(Job& job, int slot) {
  const UnitPartition& p = c_.part.unit(job.unit);
  const size_t shard = static_cast<size_t>(p.shard);
  float* own = job.grad + p.begin;  // [shard] this rank's part, reduced in place
  if (c_.opt.quantize_grads) {
    const int level = job.phases - 1;
    const int peers = c_.groups.all_to_all_peers(level);
    const int me = c_.groups.all_to_all_me(level);
    const size_t chunk = packed_bytes(shard, c_.qblock);
    const uint8_t* qrecv = qrecv_[static_cast<size_t>(slot)].data();
    for (int c = 0; c < peers; ++c)
      if (c != me) c_.mem.dequantize_add(qrecv + static_cast<size_t>(c) * chunk, shard, c_.qblock, own);
  } else if (c_.opt.reduce_dtype == DType::kBF16) {
    const bf16* half = half_[static_cast<size_t>(slot)].data();
    if (c_.opt.stage == 0)
      c_.mem.from_bf16(half, static_cast<size_t>(p.padded), job.grad);
    else
      c_.mem.from_bf16(half + p.begin, shard, own);
  }
  return own;
}

void ReduceSchedule::complete(int slot) {
  Job& job = jobs_[static_cast<size_t>(slot)];
  while (job.phase + 1 < job.phases) advance(job, slot, job.stamp);
  c_.compute_waits_for(job.handles);  // finish's work is queued on compute
  done_(job.unit, finish(job, slot));
  job.phase = job.phases;
  job.running = false;
  job.busy = false;
  fifo_.erase(std::find(fifo_.begin(), fifo_.end(), slot));
}

void ReduceSchedule::complete_all() {
  while (!fifo_.empty()) complete(fifo_.front());
}

}  // namespace zt::zero::detail
