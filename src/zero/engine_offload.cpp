// The offload store behind the engine's optimizer state (offload.*, docs/offload.md):
// construction of the store, the AdamW pass over every home, the stage-3 parameter
// shards on NVMe, and the checkpoint view of offloaded units (owned / after_load).
#include <algorithm>

#include "engine_impl.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"

namespace zt::zero {

void Engine::Impl::init_offload(int rank) {
  isa = offload::default_isa();
  if (!state_offloaded && !params_offloaded) return;
  std::vector<int64_t> state_counts(static_cast<size_t>(units)), param_counts;
  int64_t max_shard = 0;
  for (int u = 0; u < units; ++u) {
    const UnitPartition& p = part.unit(u);
    state_counts[static_cast<size_t>(u)] = p.owned;
    max_shard = std::max(max_shard, p.shard);
  }
  if (params_offloaded)
    for (int u = 0; u < units; ++u) param_counts.push_back(part.unit(u).shard);
  // Preflight (path, room, memlock) and the NVMe file: before any step.
  store = std::make_unique<offload::Store>(opt.offload, state_counts, param_counts, rank);
  if (state_offloaded)
    for (int u = 0; u < units; ++u)  // the master starts as the initial parameters
      store->init_unit(u, opt.stage == 3 ? param_shard[static_cast<size_t>(u)].data()
                                         : params_for_update(u).data());
  if (params_offloaded) {
    for (int u = 0; u < units; ++u) {
      store->write_params(u, param_shard[static_cast<size_t>(u)].data());
      param_shard[static_cast<size_t>(u)].reset();
    }
    param_shard.clear();
    param_stage.assign(gathers.size(), std::vector<float>(static_cast<size_t>(max_shard), 0.0f));
    unit_params.assign(static_cast<size_t>(max_shard), 0.0f);
  }
}

const float* Engine::Impl::shard_src(int u, int slot) const {
  return params_offloaded ? param_stage[static_cast<size_t>(slot)].data()
                          : param_shard[static_cast<size_t>(u)].data();
}

void Engine::Impl::load_shard(int u, int slot) {
  store->read_params(u, param_stage[static_cast<size_t>(slot)].data());
}

// AdamW on every owned element. Without an optimizer store: in place on the engine's
// parameters (the fp32 master) and moments, by the space's AdamW (the CPU kernel on the
// host, kernels/cuda on a device). With one: the store's pipelined pass
// over sub-groups updates master, m, v and the kernel writes the compute parameters in
// the same pass. The same kernel and order serve every home, so the floats are equal.
void Engine::Impl::adamw_update(const model::AdamWConfig& adam, int64_t step) {
  if (!state_offloaded) {
    for (int u = 0; u < units; ++u) {
      std::span<float> g = grads_for_update(u);
      if (g.empty()) continue;  // this rank's shard of u is all padding
      if (params_offloaded) store->read_params(u, unit_params.data());
      mem->adamw(layout, u, update_begin(u), params_for_update(u), g, m_for_update(u),
                 v_for_update(u), adam, step);
      if (params_offloaded) store->write_params(u, unit_params.data());
    }
    return;
  }
  const std::vector<offload::SubGroup>& groups_ = store->subgroups();
  store->update([&](const offload::SubGroup& sg, const offload::StateView& st) {
    const size_t c = static_cast<size_t>(sg.count);
    if (params_offloaded && sg.first == 0) {  // a new unit: its padding must stay zero
      const UnitPartition& p = part.unit(sg.unit);  // (qwZ scales see the whole shard)
      std::fill(unit_params.begin() + p.owned, unit_params.begin() + p.shard, 0.0f);
    }
    float* out = params_offloaded ? unit_params.data() + sg.first
                                  : params_for_update(sg.unit).data() + sg.first;
    offload::adamw_unit_slice(layout, sg.unit, update_begin(sg.unit) + sg.first,
                              {st.master, c}, {grads_for_update(sg.unit).data() + sg.first, c},
                              {st.m, c}, {st.v, c}, offload::ParamCopy{out, nullptr}, adam, step,
                              isa);
    // The unit's last sub-group: its new parameter shard goes to NVMe.
    const bool last = &sg == &groups_.back() || (&sg + 1)->unit != sg.unit;
    if (params_offloaded && last) store->write_params(sg.unit, unit_params.data());
  });
}

OwnedSlice Engine::Impl::checkout(int u) {
  ZT_CHECK(mode == Mode::kIdle, "owned() during a micro-step", "call it between steps");
  if (checkouts.empty()) checkouts.resize(static_cast<size_t>(units));
  Checkout& c = checkouts[static_cast<size_t>(u)];
  const UnitPartition& p = part.unit(u);
  const size_t count = static_cast<size_t>(p.owned);
  if (!c.active) {  // page it in once; later owned(u) calls see the same memory
    c.master.assign(static_cast<size_t>(p.shard), 0.0f);  // padding beyond `owned` stays zero
    if (state_offloaded) {
      c.m.assign(count, 0.0f);
      c.v.assign(count, 0.0f);
      store->read_unit(u, c.master.data(), c.m.data(), c.v.data());
    } else if (params_offloaded) {  // only the parameters are on NVMe (stage 3: moments are shards)
      store->read_params(u, c.master.data());
    } else {  // a space the host cannot read: copies of the owned parameters and moments
      const int64_t mo = opt.stage == 0 ? p.begin : 0;  // stage 0 keeps whole moments
      c.m.assign(count, 0.0f);
      c.v.assign(count, 0.0f);
      mem->to_host(c.master.data(), owned_params(u), count * sizeof(float));
      mem->to_host(c.m.data(), adam_m[static_cast<size_t>(u)].data() + mo, count * sizeof(float));
      mem->to_host(c.v.data(), adam_v[static_cast<size_t>(u)].data() + mo, count * sizeof(float));
    }
    c.active = true;
  }
  OwnedSlice s;
  s.begin = p.begin;
  s.count = p.owned;
  s.params = {c.master.data(), count};
  if (state_offloaded || !c.m.empty()) {
    s.m = {c.m.data(), count};
    s.v = {c.v.data(), count};
  } else {
    s.m = {adam_m[static_cast<size_t>(u)].data(), count};
    s.v = {adam_v[static_cast<size_t>(u)].data(), count};
  }
  return s;
}

// Writes every checked-out unit back (a checkpoint load may have changed it): master, m,
// v to the store, and the master into the compute parameters (fp32 on CPU: a copy).
void Engine::Impl::flush_checkout() {
  for (int u = 0; u < static_cast<int>(checkouts.size()); ++u) {
    Checkout& c = checkouts[static_cast<size_t>(u)];
    if (!c.active) continue;
    c.active = false;
    const UnitPartition& p = part.unit(u);
    if (state_offloaded) store->write_unit(u, c.master.data(), c.m.data(), c.v.data());
    if (params_offloaded) {
      store->write_params(u, c.master.data());
    } else if (!state_offloaded) {  // copies of a space the host cannot read
      const size_t bytes = static_cast<size_t>(p.owned) * sizeof(float);
      const int64_t mo = opt.stage == 0 ? p.begin : 0;
      mem->from_host(owned_params(u), c.master.data(), bytes);
      mem->from_host(adam_m[static_cast<size_t>(u)].data() + mo, c.m.data(), bytes);
      mem->from_host(adam_v[static_cast<size_t>(u)].data() + mo, c.v.data(), bytes);
    } else {
      std::span<float> params = params_for_update(u);
      std::copy_n(c.master.data(), params.size(), params.data());
    }
    std::vector<float>().swap(c.master);
    std::vector<float>().swap(c.m);
    std::vector<float>().swap(c.v);
  }
}

}  // namespace zt::zero
