// The ZeRO engine: construction (partition, buffers, deterministic sharded init), the
// public methods, and the memory figures. See engine_impl.hpp for how the work is split.
#include "zt/zero/engine.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/zero/quantize.hpp"

namespace zt::zero {
namespace {

int ranks_per_node(const comm::Comm& world, const comm::Comm* node) {
  return node ? node->size() : world.size();
}

// Validates before any communicator is split, so bad options fail the same way on every
// rank without a collective.
int checked_hpz(const EngineOptions& opt, const comm::Comm& world, const comm::Comm* node) {
  opt.validate(world.size(), ranks_per_node(world, node));
  return opt.effective_hpz(world.size(), ranks_per_node(world, node));
}

using detail::make_bufs;

std::vector<uint8_t> frozen_units(const model::ParamLayout& layout) {
  std::vector<uint8_t> frozen;
  for (int u = 0; u < layout.num_units(); ++u) frozen.push_back(layout.unit(u).frozen ? 1 : 0);
  return frozen;
}

}  // namespace

Engine::Impl::Impl(const model::Config& cfg, comm::Comm& world, comm::Comm* node,
                   comm::Comm* cross, const EngineOptions& options,
                   const model::InitOptions& init, comm::Comm* control)
    : opt(options),
      mem(detail::make_space(options, offload::default_isa())),
      pinned(std::make_shared<offload::PinnedPool>(options.offload.pinned_bytes,
                                                   mem->model_space() == model::Space::kDevice)),
      ex(cfg, world, options, control, *mem, pinned),
      // With expert parallelism ZeRO runs over the data-parallel group, flat (no node
      // phases, no hpZ: validate_experts refuses it).
      groups(*detail::staged(*mem, pinned, ex.data() ? ex.data() : &world, staged_world),
             ex.data() ? nullptr : detail::staged(*mem, pinned, node, staged_node),
             ex.data() ? nullptr : detail::staged(*mem, pinned, cross, staged_cross),
             checked_hpz(options, ex.data() ? *ex.data() : world, ex.data() ? nullptr : node),
             ex.data() ? ex.data_host() : control),
      n(ex.data() ? ex.data()->size() : world.size()),
      hpz(groups.hpz_size()),
      qblock(static_cast<size_t>(options.quantize_block)),
      model_owner(ex.with_experts(
          mem->make_model(cfg, options.max_batch, options.max_seq, options.lora))),
      model(*model_owner),
      layout(model.layout()),
      part(layout, n, groups.partition_index(),
           (options.quantize_weights || options.quantize_grads) ? options.quantize_block : 16,
           hpz, groups.hpz_index()),
      units(layout.num_units()),
      head(layout.head_unit()),
      tied(cfg.tied_embeddings),
      bf16_weights(model.param_dtype() == DType::kBF16),
      bf16_master(options.precision == "bf16-true"),
      frozen(frozen_units(layout)),
      adapters(layout.adapter_unit()),
      plan(make_plan()),
      gather(ctx, plan, bf16_weights, [this](int u, int slot) { return send_shard(u, slot); }),
      reduce(ctx, plan, units, [this](int u, float* own) { reduced(u, own); }),
      params(ctx, layout, init, bf16_weights, bf16_master),
      update(ctx, plan, frozen),
      offload(ctx, layout, plan, frozen, bf16_master, params, update, gather, copies),
      copies(pinned) {
  const int L = static_cast<int>(cfg.layers);
  order_comms_after_compute();
  // bf16_weights with offload.* from a device (half_up, set by offload.init): the
  // offloaded step copies up the bf16 rounding of the new parameters (stages 1-2: the
  // owned slice of the compute copy; stage 3: the half shards, or with params offloaded each
  // shard into its gather's send range), ordered before their first use by events.
  // The use orders of model.hpp's hook contract (and trainable.hpp's: the adapters'
  // unit first, used until the end of the pass).
  if (adapters >= 0) eval_order.push_back(adapters);
  eval_order.push_back(0);
  for (int l = 0; l < L; ++l) eval_order.push_back(layout.block_unit(l));
  eval_order.push_back(head);
  if (tied) eval_order.push_back(0);
  train_order = eval_order;
  for (int l = L - 1; l >= 0; --l) train_order.push_back(layout.block_unit(l));
  train_order.push_back(0);

  const int stage = opt.stage;
  // Model states. Padding stays zero forever: it is never written but by reductions of
  // zeros, and AdamW only touches real elements.
  params.cast_compute();  // (the parameters and their initial values: ParamStore)

  // The working buffers are the parts' (gather, reduce, update).
  active.reserve(4);

  // Stages 0-2 bind the replicated parameters (and stages 0-1 the gradients) once;
  // the hooks rebind what moves.
  for (int u = 0; u < units; ++u) {
    const size_t numel = static_cast<size_t>(part.unit(u).numel);
    if (stage <= 2)
      model.bind_unit(u, param_view(u, params.replicated(u)),
                      stage <= 1 && trainable(u) ? mview(update.full_grads(u), numel) : model::MutView{});
  }
  offload.init(world.rank());
  {  // QLoRA: the targeted W's initial values (init is by name and element: the same
     // values the whole model's units would hold), one unit at a time.
    const model::ParamLayout base(cfg);
    std::vector<float> unit;  // [numel] of base's unit u
    quantize_base([&](int u) -> std::span<const float> {
      unit.resize(static_cast<size_t>(base.unit(u).numel));
      model::init_unit<float>(base, u, init, unit);
      return unit;
    });
  }
  install_hooks();
  traffic_at_step = groups.traffic();
  note_peak();
}

// What every buffer holds (plan.hpp); refuses what the buffers cannot hold.
BufferPlan Engine::Impl::make_plan() const {
  if (model.grad_dtype() != DType::kF32)
    throw InputError("train.precision = " + opt.precision + ": the model's gradients are " +
                         std::string(dtype_name(model.grad_dtype())) +
                         "; the ZeRO engine reduces fp32 gradients only so far",
                     "set train.precision = bf16-mixed (bf16 weights, fp32 gradients, master "
                     "weights and moments) or fp32");
  std::vector<PlanUnit> plan_units;
  for (int u = 0; u < units; ++u) plan_units.push_back({part.unit(u), trainable(u), u == adapters, 1});
  return plan_buffers(plan_units, opt, {mem->host_accessible(), bf16_weights, bf16_master, mem->name()},
                      hpz, tied);
}

MemoryStats Engine::Impl::memory() const {
  MemoryStats m;
  m.full_params = params.replicated_bytes() +
                  (qlora ? static_cast<size_t>(qlora->bytes()) : 0);  // QLoRA's NF4 base
  m.param_shards = params.shard_bytes();
  m.secondary_shards = gather.secondary_bytes();
  m.grads = update.grad_bytes();
  m.optimizer = update.moment_bytes() + offload.state_bytes();
  m.param_shards += offload.param_bytes();
  m.gather_buffers = gather.buffer_bytes();
  m.grad_buffers = reduce.grad_bytes() + update.wide_bytes();
  m.comm_buffers = gather.comm_bytes() + reduce.comm_bytes() + logits_buf.bytes() + logits_half.bytes();
  m.activations = model.workspace_bytes();
  m.peak_total = std::max(peak, m.total());
  return m;
}

void Engine::Impl::note_peak() { peak = std::max(peak, memory().total()); }

void Engine::Impl::gather_params_in_place(bool trainable_only) {
  if (bf16_master || offload.half_up())
    gather_in_place<bf16>([&](int u) { return params.compute(u); }, trainable_only);
  else
    gather_in_place<float>([&](int u) { return params.full(u); }, trainable_only);
}

// The base's targeted W, NF4 + double quantised from the exact fp32 values (every rank
// holds the whole quantised base: 4 bits a weight; docs/zero.md "Frozen units"), one unit
// of ParamLayout(cfg) at a time: no fp32 copy of all the targeted W exists at once. With
// bf16-true the base is held in bf16, so its W are quantised from their bf16 rounding.
void Engine::Impl::quantize_base(const model::QloraBase::UnitReader& full_unit) {
  if (opt.lora.method != model::FinetuneMethod::kQlora) return;
  const model::ParamLayout base(layout.config());
  std::vector<float> rounded;  // bf16-true: [numel] of the unit read last, rounded to bf16
  const auto read = [&](int u) -> std::span<const float> {
    const std::span<const float> v = full_unit(u);
    if (!bf16_master) return v;
    rounded.resize(v.size());
    for (size_t i = 0; i < v.size(); ++i) rounded[i] = static_cast<float>(bf16(v[i]));
    return rounded;
  };
  qlora.reset();  // the old base goes before the new one is built
  qlora = std::make_unique<model::QloraBase>(model::LoraLayout(layout.config(), opt.lora), base,
                                             model::QloraBase::UnitReader(read));
  model.bind_qlora(*qlora);
}

void Engine::set_qlora_base(const model::QloraBase::UnitReader& full_unit) {
  Impl& e = *impl_;
  ZT_CHECK(e.mode == Impl::Mode::kIdle, "set_qlora_base during a micro-step", "call it between steps");
  ZT_CHECK(e.opt.lora.method == model::FinetuneMethod::kQlora, "set_qlora_base in a run without QLoRA",
           "call it only with finetune.method = qlora");
  e.quantize_base(full_unit);
}

template <class T>
void Engine::Impl::gather_in_place(const std::function<T*(int)>& unit_buf, bool trainable_only) {
  // Phase by phase over all units, so the units' operations overlap.
  std::vector<detail::Handles> handles(static_cast<size_t>(units));
  for (int phase = 0; phase < groups.gather_phases(); ++phase) {
    for (int u = 0; u < units; ++u) {
      if (trainable_only && !trainable(u)) continue;
      const UnitPartition& p = part.unit(u);
      T* full = unit_buf(u);
      if (phase == 0) copies.order_up(u);  // the owned slice's copies up (offload), if in flight
      groups.start_gather(phase, full + p.begin, full, static_cast<size_t>(p.shard),
                          std::is_same_v<T, bf16> ? DType::kBF16 : DType::kF32,
                          handles[static_cast<size_t>(u)]);
    }
    for (detail::Handles& h : handles) detail::wait_all(h);
  }
}

// ---- Engine ------------------------------------------------------------------------

Engine::Engine(const model::Config& cfg, comm::Comm& world, comm::Comm* node, comm::Comm* cross,
               const EngineOptions& options, const model::InitOptions& init,
               comm::Comm* control)
    : impl_(std::make_unique<Impl>(cfg, world, node, cross, options, init, control)) {}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

OwnedSlice Engine::owned(int u) {
  Impl& e = *impl_;
  if (!owned_in_place()) {
    ZT_CHECK(e.mode == Impl::Mode::kIdle, "owned() during a micro-step", "call it between steps");
    return e.offload.checkout(u);
  }
  const UnitPartition& p = e.part.unit(u);
  const size_t count = static_cast<size_t>(p.owned);
  OwnedSlice s;
  s.begin = p.begin;
  s.count = p.owned;
  s.params = {e.params.owned(u), count};
  if (!e.trainable(u)) return s;  // frozen: no moments
  s.m = {e.update.owned_m(u), count};
  s.v = {e.update.owned_v(u), count};
  return s;
}

bool Engine::owned_in_place() const {
  const Impl& e = *impl_;
  return !(e.offload.state_offloaded() || e.offload.params_offloaded() || e.bf16_master || !e.mem->host_accessible());
}

void Engine::set_update_guard(std::function<void(int unit)> guard) { impl_->offload.set_update_guard(std::move(guard)); }

void Engine::after_load() {
  Impl& e = *impl_;
  ZT_CHECK(e.mode == Impl::Mode::kIdle, "after_load during a micro-step", "call it between steps");
  e.offload.flush_checkout();
  if (e.ex.parts() > 1)  // engine_experts.cpp
    e.ex.share_dense_after_load(e.ctx, e.layout, e.update, [&](int u) { return e.params.owned(u); });
  if (e.opt.stage <= 2) e.gather_params_in_place();
  e.params.cast_compute();
  if (e.opt.stage == 0) {  // (frozen units have no moments)
    e.gather_in_place<float>([&](int u) { return e.update.m(u).data(); }, true);
    e.gather_in_place<float>([&](int u) { return e.update.v(u).data(); }, true);
  }
  e.gather.invalidate_secondaries();
  // (QLoRA: the units hold no targeted W; the loader gives them: set_qlora_base.)
}

int64_t Engine::steps_done() const { return impl_->steps; }
void Engine::set_steps_done(int64_t steps) {
  if (steps < 0)
    throw InputError(strf("optimizer steps done = %lld", static_cast<long long>(steps)),
                     "a checkpoint's step count is 0 or more");
  impl_->steps = steps;
}

const EngineOptions& Engine::options() const { return impl_->opt; }
const Partition& Engine::partition() const { return impl_->part; }
const model::TrainableModel& Engine::model() const { return impl_->model; }
int Engine::hpz() const { return impl_->hpz; }
bool Engine::hierarchical() const { return impl_->groups.hierarchical(); }
Traffic Engine::traffic() const { return impl_->groups.traffic(); }
MemoryStats Engine::memory() const { return impl_->memory(); }
const BufferPlan& Engine::buffer_plan() const { return impl_->plan; }

std::string Engine::describe() const {
  const Impl& e = *impl_;
  const detail::Groups& g = e.groups;
  const std::string offload = e.offload.describe();
  return strf("ZeRO stage %d on %d ranks (%d node%s x %d, %s collectives), partition %d, "
              "memory %s, hpZ %s, prefetch %d, qwZ %s, qgZ %s (block %d), reduce %s, accum %d; "
              "%lld parameters, %lld padded",
              e.opt.stage, e.n, g.nodes(), g.nodes() == 1 ? "" : "s", g.local_size(),
              g.hierarchical() ? "node + cross" : "flat", g.partition_index(), e.mem->name(),
              e.hpz > 1 ? strf("%d", e.hpz).c_str() : "off", e.opt.prefetch,
              e.opt.quantize_weights ? "on" : "off", e.opt.quantize_grads ? "on" : "off",
              e.opt.quantize_block, std::string(dtype_name(e.opt.reduce_dtype)).c_str(),
              e.opt.accum, static_cast<long long>(e.part.total_numel()),
              static_cast<long long>(e.part.total_padded())) + offload + e.ex.describe(e.layout);
}

}  // namespace zt::zero
