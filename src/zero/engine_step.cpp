// The optimizer step: the global gradient norm from the owned shards (sum of squares of
// the real elements each rank owns, one all_reduce, sqrt), clipping by that norm,
// AdamW on the owned elements, then what the stage re-derives from the new shards:
// stages 1-2 all-gather the updated parameters into the replicated full units; stage 3
// marks the hpZ secondary copies stale (the next primary gather rebuilds them).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/zero/clip.hpp"

namespace zt::zero {

// Names of the units whose gradient holds a NaN or Inf on some rank ("layers.3
// (model.layers.3.*)"), from one all_reduce of per-unit flags; only after a bad step.
std::string Engine::Impl::nonfinite_units() {
  std::vector<int32_t> bad(static_cast<size_t>(units), 0);  // [units] 1: non-finite here
  for (int u = 0; u < units; ++u) {
    if (trainable(u) && !update.grads_finite(u)) bad[static_cast<size_t>(u)] = 1;
  }
  groups.host().all_reduce(bad.data(), bad.data(), bad.size(), DType::kI32, comm::ReduceOp::kMax);
  std::string names;
  for (int u = 0; u < units; ++u) {
    if (!bad[static_cast<size_t>(u)]) continue;
    const model::UnitInfo& info = layout.unit(u);
    std::string hf;  // the unit's Hugging Face tensors: "model.layers.3.*", "lm_head.weight"
    for (int t = info.first_tensor; t < info.first_tensor + info.num_tensors; ++t) {
      std::string name = layout.tensors()[static_cast<size_t>(t)].name;
      if (info.kind == model::UnitKind::kBlock) {
        hf = strf("model.layers.%d.*", info.layer);
        break;
      }
      if (info.kind == model::UnitKind::kAdapters) {  // LoRA: every adapter, not named one by one
        hf = "*.lora_A.weight, *.lora_B.weight";
        break;
      }
      hf += (hf.empty() ? "" : ", ") + name;
    }
    names += (names.empty() ? "" : ", ") + info.name + " (" + hf + ")";
  }
  return names.empty() ? "none (the loss alone is not finite)" : names;
}

void Engine::Impl::tally_router() {
  const model::RouterStats* r = model.router_stats();
  if (!r) return;
  const size_t E = r->tokens.size();
  router_sum.resize(E + 1, 0.0);
  for (size_t e = 0; e < E; ++e) router_sum[e] += r->tokens[e];
  router_sum[E] += r->aux;
}

// The step's routing summed over ranks (one all-reduce of E + 1 doubles over the host
// communicator, on every rank alike: they hold the same model); the sums reset.
std::optional<RouterStep> Engine::Impl::take_router() {
  if (router_sum.empty()) return std::nullopt;
  groups.host().all_reduce(router_sum.data(), router_sum.data(), router_sum.size(), DType::kF64,
                           comm::ReduceOp::kSum);
  ex.sum_on_host(router_sum.data(), router_sum.size());  // each rank counted its own tokens
  RouterStep r;
  const size_t E = router_sum.size() - 1;
  r.tokens.assign(router_sum.begin(), router_sum.begin() + static_cast<ptrdiff_t>(E));
  r.aux = router_sum[E] / static_cast<double>(opt.accum * n * ex.parts());
  model::RouterStats s;
  s.tokens = r.tokens;
  r.imbalance = s.imbalance();
  std::fill(router_sum.begin(), router_sum.end(), 0.0);
  return r;
}

StepStats Engine::Impl::step(double lr) {
  ZT_CHECK(mode == Mode::kIdle, "step() during a micro-step", "the engine is not reentrant");
  offload.flush_checkout();
  copies.land_all();  // offload from a device: the last gradient copies land in host memory
  if (micro_done != opt.accum)
    throw Error(strf("step() after %d micro_steps; train.accum is %d", micro_done, opt.accum),
                "call micro_step exactly accum times per optimizer step");

  // Global norm over the owned, real elements (the norm of the mean gradient), and the
  // mean loss over ranks, in one all_reduce. Stage 0 has the whole reduced gradient on
  // every rank; it sums its partition's slice like the other stages.
  double sums[2] = {0.0, loss_sum / static_cast<double>(opt.accum)};
  if (ex.parts() > 1) {  // the dense gradients summed over the expert group first
    ex.reduce_dense_grads(ctx, layout, update);  // engine_experts.cpp
    ex.step_sums(ctx, layout, update, sums);
  } else {
    update.add_sum_squares();  // (frozen units have no gradient)
    update.all_reduce_sums(sums);
  }
  StepStats stats;
  stats.router = take_router();
  stats.grad_norm = std::sqrt(sums[0]);
  stats.loss = sums[1] / static_cast<double>(n * ex.parts());
  stats.clip_coef = clip_coefficient(stats.grad_norm, opt.grad_clip);

  // What ends every step, taken or skipped: gradients zeroed for the next one, the
  // micro-step count and loss reset, the step's traffic and memory.
  const auto finish = [&](bool took_update) {
    update.zero_grads();
    if (took_update) steps += 1;
    micro_done = 0;
    loss_sum = 0.0;
    stats.step = steps;
    const Traffic now = groups.traffic();
    stats.traffic = now.minus(traffic_at_step);
    traffic_at_step = now;
    if (took_update) note_peak();
    stats.memory = memory();
    stats.offload = offload.take_times();
    return stats;
  };

  // A NaN or Inf in the loss or any gradient (every rank sees the same reduced sums, so
  // all decide alike): skip the update. Parameters, AdamW moments and AdamW's step count
  // stay as they were; the gradients are dropped.
  if (!std::isfinite(sums[0]) || !std::isfinite(sums[1])) {
    stats.skipped = true;
    stats.bad_units = nonfinite_units();
    return finish(false);
  }

  model::AdamWConfig adam = opt.adamw;
  adam.lr = lr;
  const float clip = static_cast<float>(stats.clip_coef);
  if (stats.clip_coef != 1.0 && !offload.host_grads())  // (host copies: scaled by offload.adamw)
    update.scale_grads(clip);
  // The offload store's CPU AdamW (same floats as model::adamw_unit_slice) on the owned
  // elements, wherever their state lives (engine_offload.cpp).
  offload.adamw(adam, steps + 1, clip);

  if (opt.stage == 1 || opt.stage == 2) gather_params_in_place(/*trainable_only=*/true);
  params.cast_compute();  // bf16_weights, stages 0-2: the bf16 weights of the next forward
  gather.invalidate_secondaries();
  return finish(true);
}

}  // namespace zt::zero
