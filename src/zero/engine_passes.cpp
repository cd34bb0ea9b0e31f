// The ZeRO engine's passes: a training micro-step, the step, an evaluation and the last
// position's logits over the model's unit hooks, and the exact parameters to the host
// (gather_full_params). See engine_impl.hpp for how the work is split.
#include <vector>

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::zero {

double Engine::micro_step(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                          int64_t B, int64_t T, bool recompute, double grad_scale,
                          std::span<const int32_t> positions) {
  Impl& e = *impl_;
  e.offload.flush_checkout();
  if (e.micro_done >= e.opt.accum)
    throw Error(strf("micro_step %d of a step with train.accum = %d", e.micro_done + 1,
                     e.opt.accum),
                "call step() after every accum micro-steps");
  e.boundary = e.micro_done + 1 == e.opt.accum;
  e.begin_pass(Impl::Mode::kTrain, e.train_order);
  // LoRA dropout: masks from (optimizer step, micro-step, rank), so a resumed run and
  // every stage draw the same ones.
  e.model.set_dropout_stream((static_cast<uint64_t>(e.steps) * static_cast<uint64_t>(e.opt.accum) +
                              static_cast<uint64_t>(e.micro_done)) * static_cast<uint64_t>(e.n) +
                             static_cast<uint64_t>(e.part.index()));
  // Each rank's gradient enters the sums pre-divided by the world size: the reductions
  // add, and the sum is the mean over ranks (expert parallelism: over every rank of every
  // data-parallel group, engine_experts.cpp).
  double loss = 0;
  try {
    loss = e.model.loss_and_grad(tokens, targets, B, T, recompute,
                                 grad_scale / static_cast<double>(e.n * e.ex.parts()), positions);
    e.end_pass();
  } catch (...) {
    e.abandon_pass();
    throw;
  }
  e.micro_done += 1;
  e.loss_sum += loss;
  e.tally_router();
  e.note_peak();
  return loss;
}

StepStats Engine::step(double lr) { return impl_->step(lr); }

double Engine::eval_loss(std::span<const int32_t> tokens, std::span<const int32_t> targets,
                         int64_t B, int64_t T, std::span<const int32_t> positions) {
  Impl& e = *impl_;
  e.offload.flush_checkout();
  e.begin_pass(Impl::Mode::kEval, e.eval_order);
  double loss = 0;
  try {
    loss = e.model.loss(tokens, targets, B, T, positions);
    e.end_pass();
  } catch (...) {
    e.abandon_pass();
    throw;
  }
  e.note_peak();
  return loss;
}

void Engine::logits_last(std::span<const int32_t> tokens, int64_t T, std::span<float> out) {
  Impl& e = *impl_;
  e.offload.flush_checkout();
  e.begin_pass(Impl::Mode::kEval, e.eval_order);
  try {
    if (e.mem->host_accessible()) {
      e.model.logits_last(tokens, T, model::host_view(out));
    } else if (!e.bf16_weights) {  // into the space, then to the host
      if (e.logits_buf.size() != out.size())
        e.logits_buf = detail::Buf<float>(*e.mem, out.size(), "logits");
      e.model.logits_last(tokens, T, e.mview(e.logits_buf.data(), out.size()));
      e.mem->to_host(out.data(), e.logits_buf.data(), out.size_bytes());
    } else {  // bf16 logits in the space, widened on the host
      if (e.logits_half.size() != out.size())
        e.logits_half = detail::Buf<bf16>(*e.mem, out.size(), "logits");
      e.model.logits_last(tokens, T,
                          {e.logits_half.data(), static_cast<int64_t>(out.size()), DType::kBF16,
                           e.mem->model_space()});
      std::vector<bf16> host(out.size());  // [vocab]
      e.mem->to_host(host.data(), e.logits_half.data(), out.size() * sizeof(bf16));
      for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(host[k]);
    }
    e.end_pass();
  } catch (...) {
    e.abandon_pass();
    throw;
  }
}

void Engine::gather_full_params(model::Parameters<float>& out) {
  Impl& e = *impl_;
  ZT_CHECK(e.mode == Impl::Mode::kIdle, "gather_full_params during a micro-step",
           "call it between steps");
  ZT_CHECK(out.num_units() == e.units, "gather_full_params: a Parameters of another model",
           "make it from this engine's model().layout()");
  e.offload.flush_checkout();
  e.copies.land_all();  // offload: copies up still in flight (the host reads what they wrote)
  e.full_params_to_host(out);
}

void Engine::Impl::full_params_to_host(model::Parameters<float>& out) {
  detail::Buf<float> full;  // bf16_weights at stage 3, or half_up: [max_padded]
  for (int u = 0; u < units; ++u) {
    if (ex.parts() > 1 && layout.unit(u).kind == model::UnitKind::kBlock)
      ex.unit_to_host(layout, u, out.params(u),  // engine_experts.cpp
                      [&](std::span<float> mine) { unit_to_host(u, mine, full); });
    else
      unit_to_host(u, out.params(u), full);
  }
}

void Engine::Impl::unit_to_host(int u, std::span<float> dst, detail::Buf<float>& full) {
  const size_t numel = static_cast<size_t>(part.unit(u).numel);
  ZT_CHECK(dst.size() == numel, "unit_to_host: a buffer of another size than the unit",
           "a bug in the engine.");
  if (opt.stage <= 2 && bf16_master) {
    detail::to_host_widened(*mem, dst.data(), params.compute(u), numel);
  } else if (opt.stage <= 2 && !offload.half_up()) {
    mem->to_host(dst.data(), params.full(u), numel * sizeof(float));
  } else {  // the fp32 master, through a gather slot (bf16_weights: one fp32 buffer for now)
    if (bf16_weights && full.empty())
      full = detail::Buf<float>(*mem, static_cast<size_t>(part.max_padded()), "a full unit");
    float* buf = bf16_weights ? full.data() : gather.slot_full(0);
    if (offload.half_up())
      offload.gather_master(u, buf);  // the store's: no fp32 copy on the device
    else
      gather_exact(u, buf);
    mem->to_host(dst.data(), buf, numel * sizeof(float));
  }
}

// What u's primary gather into `slot` sends (GatherSchedule's Send): the stored shard,
// brought from its offload home first, or with bf16 weights its bf16 copy put into the
// slot's send range.
const float* Engine::Impl::send_shard(int u, int slot) {
  copies.order_up(u);  // offload: the shard's copies up from the last step, if in flight
  if (offload.params_offloaded() && !offload.half_up()) offload.load_shard(u, slot);
  if (offload.params_offloaded() && offload.half_up())
    offload.load_shard_half(u, slot);  // the bf16 shard straight into its send range: no cast
  else if (bf16_weights)
    cast_shard_for_gather(u, slot);
  return bf16_weights ? nullptr : offload.shard_src(u, slot);
}

// The bf16 cast of this rank's fp32 shard of unit u into its place (partition index) in
// the slot's bf16 buffer: the send range of the in-place bf16 all-gather. The padding of
// the shard is zero, and stays zero in bf16.
void Engine::Impl::cast_shard_for_gather(int u, int slot) {
  const size_t shard = static_cast<size_t>(part.unit(u).shard);
  bf16* place = gather.send_half(u, slot);
  if (bf16_master || offload.half_up())  // the stored shard is bf16 already (half_up: its copy up)
    mem->copy(place, params.half(u), shard * sizeof(bf16));
  else
    mem->to_bf16(offload.shard_src(u, slot), shard, place);
}

void Engine::Impl::gather_exact(int u, float* out) {
  const UnitPartition& p = part.unit(u);
  if (bf16_master) {  // the bf16 shards into gather slot 0 (idle: free), widened
    bf16* whole = gather.slot_half(0);  // [padded]
    cast_shard_for_gather(u, 0);
    detail::Handles handles;
    for (int phase = 0; phase < groups.gather_phases(); ++phase) {
      groups.start_gather(phase, gather.send_half(u, 0), whole, static_cast<size_t>(p.shard),
                          DType::kBF16, handles);
      detail::wait_all(handles);
    }
    mem->from_bf16(whole, static_cast<size_t>(p.padded), out);
    return;
  }
  const float* src = params.shard(u);
  if (offload.params_offloaded()) {  // idle: gather slot 0's staging buffer is free
    offload.load_shard(u, 0);
    src = offload.shard_src(u, 0);
  }
  detail::Handles handles;
  for (int phase = 0; phase < groups.gather_phases(); ++phase) {
    groups.start_gather(phase, src, out, static_cast<size_t>(p.shard), DType::kF32, handles);
    detail::wait_all(handles);
  }
}

}  // namespace zt::zero
