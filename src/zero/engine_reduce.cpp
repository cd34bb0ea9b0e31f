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

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero {

int Engine::Impl::acquire_reduce_slot() {
  for (size_t s = 0; s < reduces.size(); ++s) {
    if (!reduces[s].busy) {
      reduces[s].busy = true;
      return static_cast<int>(s);
    }
  }
  // All held: the oldest running reduction completes and gives its slot back.
  ZT_CHECK(!reduce_fifo.empty(), "no free gradient buffer and no reduction running",
           "a bug in the engine's schedule");
  const int s = reduce_fifo.front();
  complete_reduce(s);
  reduces[static_cast<size_t>(s)].busy = true;
  return s;
}

void Engine::Impl::start_reduce(int u, int slot, float* grad) {
  ReduceJob& job = reduces[static_cast<size_t>(slot)];
  job.running = true;
  job.unit = u;
  job.grad = grad;
  job.phase = 0;
  job.stamp = epoch + 1;
  if (opt.quantize_grads)
    job.phases = groups.all_to_all_levels();
  else
    job.phases = opt.stage == 0 ? groups.all_reduce_phases() : groups.reduce_scatter_phases();
  if (!opt.quantize_grads && opt.reduce_dtype == DType::kBF16)
    mem->to_bf16(grad, static_cast<size_t>(part.unit(u).padded),
                 reduce_half[static_cast<size_t>(slot)].data());
  start_reduce_phase(job, slot);
  reduce_fifo.push_back(slot);
}

// qgZ level `level`: the buffer whose chunks are exchanged, and the chunk size.
//   flat:          level 0: the whole gradient, n chunks of shard
//   hierarchical:  level 0: the whole gradient, K chunks (blocks) of nodes * shard
//                  level 1: this rank's block, `nodes` chunks of shard
void Engine::Impl::start_reduce_phase(ReduceJob& job, int slot) {
  const UnitPartition& p = part.unit(job.unit);
  const size_t shard = static_cast<size_t>(p.shard);
  if (opt.quantize_grads) {
    const int level = job.phase;
    const int peers = groups.all_to_all_peers(level);
    const int me = groups.all_to_all_me(level);
    const size_t elems =
        level == 0 ? static_cast<size_t>(p.padded) / static_cast<size_t>(peers) : shard;
    const size_t chunk = packed_bytes(elems, qblock);
    const float* base =
        level == 0 ? job.grad
                   : job.grad + static_cast<size_t>(groups.local() * groups.nodes()) * shard;
    uint8_t* qsend = reduce_qsend[static_cast<size_t>(slot)].data();
    for (int c = 0; c < peers; ++c)
      if (c != me)
        mem->quantize_pack(base + static_cast<size_t>(c) * elems, elems, qblock,
                           qsend + static_cast<size_t>(c) * chunk);
    groups.start_all_to_all(level, qsend, reduce_qrecv[static_cast<size_t>(slot)].data(), chunk,
                            job.handles);
    return;
  }
  const bool half = opt.reduce_dtype == DType::kBF16;
  void* buf = half ? static_cast<void*>(reduce_half[static_cast<size_t>(slot)].data())
                   : static_cast<void*>(job.grad);
  const DType dtype = half ? DType::kBF16 : DType::kF32;
  if (opt.stage == 0)
    groups.start_all_reduce(job.phase, buf, shard, dtype, job.handles);
  else
    groups.start_reduce_scatter(job.phase, buf, shard, dtype, job.handles);
}

void Engine::Impl::advance_reduce(ReduceJob& job, int slot) {
  detail::wait_all(job.handles);
  if (opt.quantize_grads) {
    // Between the levels (only after level 0): this rank's block += the other node-local
    // ranks' parts of it.
    const UnitPartition& p = part.unit(job.unit);
    const int peers = groups.all_to_all_peers(job.phase);
    const int me = groups.all_to_all_me(job.phase);
    const size_t elems = static_cast<size_t>(p.padded) / static_cast<size_t>(peers);
    const size_t chunk = packed_bytes(elems, qblock);
    const uint8_t* qrecv = reduce_qrecv[static_cast<size_t>(slot)].data();
    float* own = job.grad + static_cast<size_t>(me) * elems;
    for (int c = 0; c < peers; ++c)
      if (c != me) mem->dequantize_add(qrecv + static_cast<size_t>(c) * chunk, elems, qblock, own);
  }
  ++job.phase;
  job.stamp = epoch + 1;
  start_reduce_phase(job, slot);
}

void Engine::Impl::finish_reduce(ReduceJob& job, int slot) {
  const UnitPartition& p = part.unit(job.unit);
  const size_t shard = static_cast<size_t>(p.shard);
  float* own = job.grad + p.begin;  // [shard] this rank's part, reduced in place
  if (opt.quantize_grads) {
    const int level = job.phases - 1;
    const int peers = groups.all_to_all_peers(level);
    const int me = groups.all_to_all_me(level);
    const size_t chunk = packed_bytes(shard, qblock);
    const uint8_t* qrecv = reduce_qrecv[static_cast<size_t>(slot)].data();
    for (int c = 0; c < peers; ++c)
      if (c != me) mem->dequantize_add(qrecv + static_cast<size_t>(c) * chunk, shard, qblock, own);
  } else if (opt.reduce_dtype == DType::kBF16) {
    const bf16* half = reduce_half[static_cast<size_t>(slot)].data();
    if (opt.stage == 0)
      mem->from_bf16(half, static_cast<size_t>(p.padded), job.grad);
    else
      mem->from_bf16(half + p.begin, shard, own);
  }
  if (opt.stage >= 2) {
    mem->add(grad_shard[static_cast<size_t>(job.unit)].data(), own, shard);  // [shard] fp32
  }
}

void Engine::Impl::complete_reduce(int slot) {
  ReduceJob& job = reduces[static_cast<size_t>(slot)];
  while (job.phase + 1 < job.phases) advance_reduce(job, slot);
  detail::wait_all(job.handles);
  finish_reduce(job, slot);
  if (boundary) offload_grad_final(job.unit);  // the step's gradient: down to the host
  job.phase = job.phases;
  job.running = false;
  job.busy = false;
  reduce_fifo.erase(std::find(reduce_fifo.begin(), reduce_fifo.end(), slot));
}

void Engine::Impl::complete_all_reduces() {
  while (!reduce_fifo.empty()) complete_reduce(reduce_fifo.front());
}

}  // namespace zt::zero
