// The model's unit hooks and the schedule of in-flight gathers and reductions (the rule
// is described in engine_impl.hpp).
#include <algorithm>

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::zero {

// Every collective the engine launches waits, on the device, for the compute queued
// before its launch. That is the event each one needs: a stage-3 gather is launched when
// its slot is free (every use of the slot's previous unit was queued before), a
// gradient reduction at grad_ready (the unit's backward was queued before), and the
// casts and quantizations feeding a collective are queued before it.
void Engine::Impl::order_comms_after_compute() {
  groups.order_after(mem->compute_stream());
  ex.order_after(mem->compute_stream());
}

// At the end of a pass the host waits for the operations compute waited for on the
// device (long done by then): their errors and timeouts surface here.
void Engine::Impl::check_retired() { detail::wait_all(retired); }

void Engine::Impl::install_hooks() {
  model::UnitHooks hooks;
  hooks.before_use = [this](int u) { before_use(u); };
  hooks.after_use = [this](int u) { after_use(u); };
  hooks.grad_ready = [this](int u) { grad_ready(u); };
  model.set_hooks(std::move(hooks));
}

void Engine::Impl::begin_pass(Mode m, const std::vector<int>& use_order) {
  if (broken)
    throw Error("the ZeRO engine failed during an earlier pass and cannot continue",
                "see the first error; the ranks may disagree on what is in flight");
  ZT_CHECK(mode == Mode::kIdle, "a pass of the model began inside another",
           "the engine's methods are not reentrant");
  ZT_CHECK(gather.idle() && reduce.idle() && active.empty(),
           "operations left in flight by an earlier pass",
           "an earlier micro_step or eval failed half-way; the engine cannot continue");
  mode = m;
  order = &use_order;
  pos = 0;
  grads_phase = false;
  gather.begin_pass(use_order);
}

void Engine::Impl::end_pass() {
  if (pos != order->size())
    throw Error(strf("the model used %zu units where the engine expected %zu", pos, order->size()),
                "the model's hook order changed (see model.hpp, UnitHooks); update the "
                "engine's use orders");
  reduce.complete_all();
  check_retired();
  ZT_CHECK(gather.idle() && active.empty(), "gathers left in flight after a pass",
           "a bug in the engine's schedule");
  mode = Mode::kIdle;
}

void Engine::Impl::abandon_pass() {
  if (pos != 0 || !gather.idle() || !reduce.idle()) broken = true;
  mode = Mode::kIdle;
}

void Engine::Impl::before_use(int u) {
  ZT_CHECK(mode != Mode::kIdle, "the model used a unit outside the engine's methods",
           "call micro_step / eval_loss / logits_last on the engine, not the model");
  if (pos >= order->size() || (*order)[pos] != u)
    throw Error(strf("the model used unit %d at use %zu; the engine expected unit %d", u, pos,
                     pos < order->size() ? (*order)[pos] : -1),
                "the model's hook order changed (see model.hpp, UnitHooks); update the "
                "engine's use orders");
  ++epoch;
  if (mode == Mode::kTrain && u == head) grads_phase = true;
  const size_t numel = static_cast<size_t>(part.unit(u).numel);

  const void* weights = nullptr;  // the compute weights (fp32, or bf16 when bf16_weights)
  if (opt.stage == 3) {
    weights = gather.use(pos, epoch);  // (and the next zero.prefetch gathers start)
  } else {
    weights = params.replicated(u);
  }

  float* grads = nullptr;
  if (mode != Mode::kTrain || !trainable(u)) {
    // no gradient: eval, or a frozen unit
  } else if (opt.stage <= 1) {
    grads = update.full_grads(u);
  } else if (grads_phase || u == adapters) {  // the adapters' one use spans the backward
    grads = reduce.unit_buffer(u);
  }
  if (opt.stage == 3 || opt.stage == 2)
    model.bind_unit(u, param_view(u, weights), grads ? mview(grads, numel) : model::MutView{});
  active.push_back(static_cast<int>(pos));
  ++pos;
}

void Engine::Impl::after_use(int u) {
  // The latest open use of u ends (the head's uses nest: H, then 0 when tied).
  auto it = std::find_if(active.rbegin(), active.rend(),
                         [&](int p) { return (*order)[static_cast<size_t>(p)] == u; });
  ZT_CHECK(it != active.rend(), strf("after_use(%d) without before_use", u),
           "the model's hook contract changed");
  const size_t position = static_cast<size_t>(*it);
  active.erase(std::next(it).base());
  if (opt.stage == 3) gather.release(position);
  pump();
}

void Engine::Impl::grad_ready(int u) {
  if (mode != Mode::kTrain || !trainable(u)) return;  // frozen: never reduced
  if (opt.stage >= 2)
    reduce.start_unit(u, epoch);
  else if (boundary)
    reduce.start_full(u, update.full_grads(u), epoch);
}

void Engine::Impl::reduced(int u, float* own) {
  if (opt.stage >= 2)
    mem->add(update.grad_shard(u), own, static_cast<size_t>(part.unit(u).shard));
  if (boundary) offload.grad_final(u);  // the step's gradient: down to the host
}

void Engine::Impl::pump() {
  const int64_t e = epoch;
  gather.pump(e);
  reduce.pump(e);
}

}  // namespace zt::zero
