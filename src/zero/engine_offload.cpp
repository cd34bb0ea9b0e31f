// The offload store behind the engine's optimizer state (offload.*, docs/offload.md):
// construction of the store and the host-memory preflight, the AdamW pass over every
// home, the stage-3 parameter shards in host memory or on NVMe, the copies between a
// device's memory and host memory through the pinned pool (gradient sub-groups down as
// each unit's reduction completes, updated parameter sub-groups and shards up), the
// per-phase times of the step, and the checkpoint view of offloaded units (owned /
// after_load).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine_offload.hpp"
#include "zt/core/error.hpp"
#include "zt/core/log.hpp"
#include "zt/core/units.hpp"
#include "zt/offload/preflight.hpp"

namespace zt::zero::detail {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

OffloadStore::OffloadStore(const EngineContext& ctx, const model::ParamLayout& layout,
                           const BufferPlan& plan, const std::vector<uint8_t>& frozen,
                           bool bf16_master, ParamStore& params, Update& update,
                           GatherSchedule& gather, CopyQueue& copies)
    : c_(ctx), layout_(layout), plan_(plan), frozen_(frozen), bf16_master_(bf16_master),
      units_(layout.num_units()), params_(params), update_(update), gather_(gather),
      copies_(copies), state_offloaded_(plan.state_offloaded),
      params_offloaded_(plan.params_offloaded) {}

int64_t OffloadStore::update_begin(int u) const {
  return c_.opt.stage == 0 ? 0 : c_.part.unit(u).begin;
}

// Stage 0 updates the whole unit on every rank; stages 1-3 only the owned elements.
std::span<float> OffloadStore::params_for_update(int u) {
  const UnitPartition& p = c_.part.unit(u);
  switch (c_.opt.stage) {
    case 0: return {params_.full(u), static_cast<size_t>(p.numel)};
    case 3:  // with offload.params = nvme: the staging copy adamw fills
      return {params_offloaded_ ? unit_params_.data() : params_.shard(u), static_cast<size_t>(p.owned)};
    default: return {params_.owned(u), static_cast<size_t>(p.owned)};
  }
}

size_t OffloadStore::state_bytes() const {
  size_t b = store_ ? store_->host_bytes() : 0;
  for (const Checkout& c : checkouts_)
    b += (c.master.capacity() + c.m.capacity() + c.v.capacity()) * sizeof(float);
  return b;
}

size_t OffloadStore::param_bytes() const {
  size_t b = bytes_of(param_stage_) + unit_params_.capacity() * sizeof(float);
  for (const std::vector<float>& f : frozen_host_) b += f.capacity() * sizeof(float);  // (host memory)
  return b;
}

std::string OffloadStore::describe() const { return store_ ? "; " + store_->describe() : std::string(); }

void OffloadStore::init(int rank) {
  isa_ = offload::default_isa();
  if (!state_offloaded_ && !params_offloaded_) return;
  offload::Options so = plan_.store_options;  // the store's options and counts: plan.hpp
  offload_copies_ = plan_.offload_copies;
  half_up_ = plan_.half_up;
  if (!c_.mem.host_accessible()) {
    // Every copy is one sub-group of fp32 values (a piece of a parameter shard, or of a
    // unit's gradient): the pool holds two, so one lands while the next is filled.
    const uint64_t piece = static_cast<uint64_t>(offload::subgroup_elements(so)) * sizeof(float);
    if (so.pinned_bytes < 2 * piece)
      throw InputError(strf("offload.pinned_bytes = %s holds fewer than two sub-groups of fp32 "
                            "values (%s each, from offload.subgroup_bytes = %s)",
                            format_size(so.pinned_bytes).c_str(), format_size_approx(piece).c_str(),
                            format_size(so.subgroup_bytes).c_str()),
                       "raise offload.pinned_bytes to at least offload.subgroup_bytes * 2 / 3, or "
                       "lower offload.subgroup_bytes.");
    copies_.start(c_.mem);
  }
  preflight_host(so, plan_.state_counts, plan_.param_counts, plan_.max_shard);
  // Preflight (path, room, memlock) and the NVMe file: before any step.
  store_ = std::make_unique<offload::Store>(so, plan_.state_counts, plan_.param_counts, rank);
  std::vector<float> host;  // one unit's values read out of a space the host cannot read
  const auto host_copy = [&](const float* src, int64_t count) -> const float* {
    if (c_.mem.host_accessible()) return src;
    host.resize(static_cast<size_t>(count));
    c_.mem.to_host(host.data(), src, host.size() * sizeof(float));
    return host.data();
  };
  if (state_offloaded_)
    for (int u = 0; u < units_; ++u)  // the master starts as the initial parameters
      if (trainable(u))
      store_->init_unit(u, host_copy(c_.opt.stage == 3 ? params_.shard(u) : params_for_update(u).data(),
                                    c_.part.unit(u).owned));
  if (params_offloaded_) {
    for (int u = 0; u < units_; ++u) {
      store_->write_params(u, host_copy(params_.shard(u), c_.part.unit(u).shard));
      params_.drop_shard(u);
    }
    params_.drop_fp32();  // (stage 3: the shards)
    if (plan_.param_stage > 0)  // (half_up: the bf16 shard goes up straight into the gather buffer)
      for (int s = 0; s < gather_.slots(); ++s)
        param_stage_.emplace_back(c_.mem, static_cast<size_t>(plan_.param_stage), "offloaded parameter staging");
    unit_params_.assign(static_cast<size_t>(plan_.unit_params), 0.0f);
  }
  if (half_up_ && !params_offloaded_) {  // frozen units: their fp32 values to host memory first
    frozen_host_.resize(static_cast<size_t>(units_));
    for (int u = 0; u < units_; ++u)
      if (plan_.units[static_cast<size_t>(u)].frozen_host > 0) {
        std::vector<float>& f = frozen_host_[static_cast<size_t>(u)];
        f.resize(static_cast<size_t>(plan_.units[static_cast<size_t>(u)].frozen_host));
        c_.mem.to_host(f.data(), params_.owned(u), f.size() * sizeof(float));
      }
  }
  if (half_up_) {  // the bf16 compute copy is what comes up from now on; the fp32 one goes
    if (c_.opt.stage == 3 && !params_offloaded_) params_.add_half_shards(plan_);
    params_.drop_fp32();
  }
  if (offload_copies_) {
    copies_.track_units(units_);
    host_grads_.resize(static_cast<size_t>(units_));
    for (int u = 0; u < units_; ++u)
      host_grads_[static_cast<size_t>(u)].assign(static_cast<size_t>(trainable(u) ? c_.part.unit(u).owned : 0), 0.0f);
    unit_groups_.assign(static_cast<size_t>(units_), {0, 0});
    const std::vector<offload::SubGroup>& sgs = store_->subgroups();
    for (size_t k = 0; k < sgs.size(); ++k) {
      auto& range = unit_groups_[static_cast<size_t>(sgs[k].unit)];
      if (range.first == range.second) range.first = k;
      range.second = k + 1;
    }
  }
}

// Host bytes of the offloaded state on this rank, before any is allocated, against
// MemAvailable (x the ranks of this node) and the pinned pool against the memlock limit.
void OffloadStore::preflight_host(const offload::Options& so, const std::vector<int64_t>& state_counts,
                                  const std::vector<int64_t>& param_counts, int64_t max_shard) {
  offload::HostNeed need;
  offload::Options state_only = so, params_only = so;
  state_only.params = offload::Home::kNone;
  params_only.optimizer = offload::Home::kNone;
  need.state = offload::store_host_bytes(state_only, state_counts, {});
  need.params = params_offloaded_ ? offload::store_host_bytes(params_only, {}, param_counts) : 0;
  if (offload_copies_)
    for (int64_t c : state_counts) need.grads += static_cast<uint64_t>(c) * sizeof(float);
  if (params_offloaded_) need.staging = static_cast<uint64_t>(max_shard) * sizeof(float);
  need.pinned = c_.mem.host_accessible() ? 0 : so.pinned_bytes;
  need.ranks_on_node = c_.groups.local_size();
  offload::preflight_host_memory(need);
}

const float* OffloadStore::shard_src(int u, int slot) {
  return params_offloaded_ ? param_stage_[static_cast<size_t>(slot)].data()
                          : params_.shard(u);
}

// A shard from its home into the gather slot's staging buffer; on a space the host
// cannot read, through host memory and the pinned pool, landed before the gather starts.
void OffloadStore::load_shard(int u, int slot) {
  float* dst = param_stage_[static_cast<size_t>(slot)].data();
  if (c_.mem.host_accessible()) {
    store_->read_params(u, dst);
    return;
  }
  store_->read_params(u, unit_params_.data());
  copies_.to_space(dst, unit_params_.data(), static_cast<size_t>(c_.part.unit(u).shard),
                  static_cast<size_t>(offload::subgroup_elements(store_->options())));
  copies_.land_all();
}

// half_up, params offloaded: u's shard from its home, rounded to bf16 on the host
// (bf16(float): the rounding of the device cast it replaces) and copied up through the
// pool, in sub-group pieces, into its place in the slot's bf16 gather buffer: the send
// range of the in-place all-gather (half the bytes of the fp32 shard, and no cast). The
// gather is ordered after the copies on the device; the host does not wait for them.
void OffloadStore::load_shard_half(int u, int slot) {
  const UnitPartition& p = c_.part.unit(u);
  const size_t shard = static_cast<size_t>(p.shard);
  bf16* place = gather_.send_half(u, slot);  // [shard] in mem
  store_->read_params(u, unit_params_.data());  // [shard] fp32, padding zero
  const size_t piece = static_cast<size_t>(offload::subgroup_elements(store_->options()));
  for (size_t first = 0; first < shard; first += piece) {
    const size_t c = std::min(piece, shard - first);
    const int pslot = copies_.acquire(c * sizeof(bf16));
    bf16* half = static_cast<bf16*>(copies_.buffer(pslot));  // [c]
    for (size_t k = 0; k < c; ++k) half[k] = bf16(unit_params_[first + k]);
    copies_.up(pslot, place + first, c * sizeof(bf16), u);
  }
  copies_.order_up(u);
  copies_.land_ready();
}

// half_up, idle: unit u's fp32 master (the store's) gathered into full [padded] in mem:
// this rank's shard of it (owned elements, padding zero) at its place, then the
// in-place all-gather. gather_full_params returns this: the fp32 master, as the fp32
// device copy gave before half_up dropped it.
void OffloadStore::gather_master(int u, float* full) {
  const UnitPartition& p = c_.part.unit(u);
  const size_t shard = static_cast<size_t>(p.shard), owned = static_cast<size_t>(p.owned);
  std::vector<float> master(shard, 0.0f), m(owned), v(owned);  // [shard], [owned], [owned]
  if (trainable(u))
    store_->read_unit(u, master.data(), m.data(), v.data());
  else if (params_offloaded_)  // frozen: no optimizer state; the shard's home holds it
    store_->read_params(u, master.data());
  else
    std::copy(frozen_host_[static_cast<size_t>(u)].begin(), frozen_host_[static_cast<size_t>(u)].end(),
              master.begin());
  float* place = full + static_cast<size_t>(c_.part.index()) * shard;
  c_.mem.from_host(place, master.data(), shard * sizeof(float));
  detail::Handles handles;
  for (int phase = 0; phase < c_.groups.gather_phases(); ++phase) {
    c_.groups.start_gather(phase, place, full, shard, DType::kF32, handles);
    detail::wait_all(handles);
  }
}

// Unit u's gradient of this step is complete in mem (its reduction on the last
// micro-step finished): its owned elements go down, one copy per sub-group, while the
// backward goes on; they land in host_grads by the step at the latest.
void OffloadStore::grad_final(int u) {
  if (!offload_copies_) return;
  const float* g = update_.grads(u).data();  // [owned] in mem
  const auto [k0, k1] = unit_groups_[static_cast<size_t>(u)];
  const std::vector<offload::SubGroup>& sgs = store_->subgroups();
  for (size_t k = k0; k < k1; ++k) {
    const offload::SubGroup& sg = sgs[k];
    copies_.down(host_grads_[static_cast<size_t>(u)].data() + sg.first, g + sg.first,
                static_cast<size_t>(sg.count));
  }
  copies_.land_ready();
}

OffloadTimes OffloadStore::take_times() {
  OffloadTimes t = times_;
  t.active = store_ != nullptr;
  copies_.take_times(t);
  times_ = {};
  return t;
}

// AdamW on every owned element. Without an optimizer store: in place on the engine's
// parameters (the fp32 master) and moments, by the space's AdamW (the CPU kernel on the
// host, kernels/cuda on a device). With one: the store's pipelined pass
// over sub-groups updates master, m, v and the kernel writes the compute parameters in
// the same pass. The same kernel and order serve every home, so the floats are equal.
// From a device (offload_copies): the gradients are the landed host copies, scaled here
// by the clipping factor as the space scales its own; each sub-group's new parameters
// are written into a pinned buffer and copied up while the next sub-group is updated:
// fp32 into the compute parameters, or with half_up their bf16 rounding (ParamCopy::half,
// bf16(float) as the device cast: bitwise what casting the fp32 copy gave) into the bf16
// compute copy, half the bytes. Nothing waits for the copies up here: they overlap what
// follows, and each unit's first use orders compute after them (order_up: the stages 1-2
// all-gather of the owned slices in step(), bf16 at half_up; a stage-3 primary gather).
void OffloadStore::adamw(const model::AdamWConfig& adam, int64_t step, float clip) {
  if (!state_offloaded_) {
    for (int u = 0; u < units_; ++u) {
      if (!trainable(u)) continue;  // frozen: no AdamW
      if (update_guard_) update_guard_(u);  // ckpt.async: unit u written before it changes
      std::span<float> g = update_.grads(u);
      if (g.empty()) continue;  // this rank's shard of u is all padding
      if (params_offloaded_) store_->read_params(u, unit_params_.data());
      const Clock::time_point t0 = Clock::now();
      if (bf16_master_) {  // fp32 AdamW on the widened bf16 parameters, rounded back
        const std::span<bf16> half = params_.half_for_update(u);
        const std::span<float> wide = update_.wide(half.size());
        c_.mem.from_bf16(half.data(), half.size(), wide.data());
        c_.mem.adamw(layout_, u, update_begin(u), wide, g, update_.m(u), update_.v(u), adam, step);
        c_.mem.to_bf16(wide.data(), wide.size(), half.data());
      } else {
        c_.mem.adamw(layout_, u, update_begin(u), params_for_update(u), g, update_.m(u), update_.v(u),
                   adam, step);
      }
      times_.adam_s += since(t0);
      if (params_offloaded_) store_->write_params(u, unit_params_.data());
    }
    return;
  }
  if (offload_copies_) {
    copies_.land_all();
    if (clip != 1.0f)  // the loop of the host space's scale(): the same floats
      for (std::vector<float>& g : host_grads_)
        for (float& x : g) x *= clip;
  }
  const std::vector<offload::SubGroup>& sgs_all = store_->subgroups();
  store_->update([&](const offload::SubGroup& sg, const offload::StateView& st) {
    const size_t c = static_cast<size_t>(sg.count);
    if (params_offloaded_ && sg.first == 0) {  // a new unit: its padding must stay zero
      const UnitPartition& p = c_.part.unit(sg.unit);  // (qwZ scales see the whole shard)
      std::fill(unit_params_.begin() + p.owned, unit_params_.begin() + p.shard, 0.0f);
    }
    const float* g = offload_copies_ ? host_grads_[static_cast<size_t>(sg.unit)].data() + sg.first
                                    : update_.grads(sg.unit).data() + sg.first;
    int slot = -1;  // a pinned buffer for the copy up
    float* out = nullptr;
    bf16* half = nullptr;  // half_up: [c] the bf16 rounding, in the pinned buffer
    const size_t up_bytes = c * (half_up_ ? sizeof(bf16) : sizeof(float));
    if (params_offloaded_) {
      out = unit_params_.data() + sg.first;
    } else if (offload_copies_) {
      slot = copies_.acquire(up_bytes);
      if (half_up_)
        half = static_cast<bf16*>(copies_.buffer(slot));
      else
        out = static_cast<float*>(copies_.buffer(slot));
    } else {
      out = params_for_update(sg.unit).data() + sg.first;
    }
    const Clock::time_point t0 = Clock::now();
    offload::adamw_unit_slice(layout_, sg.unit, update_begin(sg.unit) + sg.first,
                              {st.master, c}, {g, c}, {st.m, c}, {st.v, c},
                              offload::ParamCopy{out, half}, adam, step, isa_);
    times_.adam_s += since(t0);
    if (slot >= 0) {
      void* dst = half_up_ ? static_cast<void*>(params_.half_for_update(sg.unit).data() + sg.first)
                          : static_cast<void*>(params_for_update(sg.unit).data() + sg.first);
      copies_.up(slot, dst, up_bytes, sg.unit);
      copies_.land_ready();
    }
    // The unit's last sub-group: its new parameter shard goes to its home.
    const bool last = &sg == &sgs_all.back() || (&sg + 1)->unit != sg.unit;
    if (params_offloaded_ && last) store_->write_params(sg.unit, unit_params_.data());
  });
}

OwnedSlice OffloadStore::checkout(int u) {
  if (checkouts_.empty()) checkouts_.resize(static_cast<size_t>(units_));
  Checkout& c = checkouts_[static_cast<size_t>(u)];
  const UnitPartition& p = c_.part.unit(u);
  const size_t count = static_cast<size_t>(p.owned);
  if (!c.active) {  // page it in once; later owned(u) calls see the same memory
    c.master.assign(static_cast<size_t>(p.shard), 0.0f);  // padding beyond `owned` stays zero
    if (!trainable(u)) {  // frozen: the parameters alone, from where they are
      if (params_offloaded_)
        store_->read_params(u, c.master.data());
      else if (half_up_)
        std::copy(frozen_host_[static_cast<size_t>(u)].begin(), frozen_host_[static_cast<size_t>(u)].end(),
                  c.master.begin());
      else if (bf16_master_)
        detail::to_host_widened(c_.mem, c.master.data(), params_.owned_half(u), count);
      else
        c_.mem.to_host(c.master.data(), params_.owned(u), count * sizeof(float));
    } else if (state_offloaded_) {
      c.m.assign(count, 0.0f);
      c.v.assign(count, 0.0f);
      store_->read_unit(u, c.master.data(), c.m.data(), c.v.data());
    } else if (params_offloaded_) {  // only the parameters are on NVMe (stage 3: moments are shards)
      store_->read_params(u, c.master.data());
    } else {  // a space the host cannot read: copies of the owned parameters and moments
      c.m.assign(count, 0.0f);
      c.v.assign(count, 0.0f);
      if (bf16_master_)  // the bf16 parameters widened (exact): the checkpoint's fp32 master
        detail::to_host_widened(c_.mem, c.master.data(), params_.owned_half(u), count);
      else
        c_.mem.to_host(c.master.data(), params_.owned(u), count * sizeof(float));
      c_.mem.to_host(c.m.data(), update_.owned_m(u), count * sizeof(float));
      c_.mem.to_host(c.v.data(), update_.owned_v(u), count * sizeof(float));
    }
    c.active = true;
  }
  OwnedSlice s;
  s.begin = p.begin;
  s.count = p.owned;
  s.params = {c.master.data(), count};
  if (!trainable(u)) return s;  // no moments
  if (state_offloaded_ || !c.m.empty()) {
    s.m = {c.m.data(), count};
    s.v = {c.v.data(), count};
  } else {
    s.m = {update_.owned_m(u), count};  // (params offloaded: stage 3)
    s.v = {update_.owned_v(u), count};
  }
  return s;
}

// Writes every checked-out unit back (a checkpoint load may have changed it): master, m,
// v to the store, and the master into the compute parameters (fp32 on CPU: a copy).
void OffloadStore::flush_checkout() {
  const bool any = std::any_of(checkouts_.begin(), checkouts_.end(),
                               [](const Checkout& c) { return c.active; });
  if (!any) return;
  copies_.land_all();  // a copy up still in flight would land over what is written below
  for (int u = 0; u < static_cast<int>(checkouts_.size()); ++u) {
    Checkout& c = checkouts_[static_cast<size_t>(u)];
    if (!c.active) continue;
    c.active = false;
    const UnitPartition& p = c_.part.unit(u);
    if (!trainable(u)) {  // frozen: the parameters back where checkout read them
      if (params_offloaded_) {
        store_->write_params(u, c.master.data());
      } else if (half_up_) {  // the fp32 values kept, their bf16 rounding up once (as at start)
        std::copy(c.master.begin(), c.master.begin() + p.owned, frozen_host_[static_cast<size_t>(u)].begin());
        detail::from_host_rounded(c_.mem, params_.owned_half(u), {c.master.data(), static_cast<size_t>(p.owned)});
      } else if (bf16_master_) {
        detail::from_host_rounded(c_.mem, params_.owned_half(u), {c.master.data(), static_cast<size_t>(p.owned)});
      } else {
        c_.mem.from_host(params_.owned(u), c.master.data(), static_cast<size_t>(p.owned) * sizeof(float));
      }
    } else if (state_offloaded_) {
      store_->write_unit(u, c.master.data(), c.m.data(), c.v.data());
    }
    if (!trainable(u)) {
      // (written back above)
    } else if (params_offloaded_) {
      store_->write_params(u, c.master.data());
    } else if (!state_offloaded_) {  // copies of a space the host cannot read
      const size_t bytes = static_cast<size_t>(p.owned) * sizeof(float);
      if (bf16_master_)  // rounded to nearest even (exact for values a bf16 run saved)
        detail::from_host_rounded(c_.mem, params_.owned_half(u),
                                  {c.master.data(), static_cast<size_t>(p.owned)});
      else
        c_.mem.from_host(params_.owned(u), c.master.data(), bytes);
      c_.mem.from_host(update_.owned_m(u), c.m.data(), bytes);
      c_.mem.from_host(update_.owned_v(u), c.v.data(), bytes);
    } else if (half_up_) {  // the bf16 compute copy, rounded as the AdamW's copy up
      detail::from_host_rounded(c_.mem, params_.half_for_update(u).data(),
                                {c.master.data(), static_cast<size_t>(p.owned)});
    } else {  // the compute parameters, wherever mem is
      std::span<float> dst = params_for_update(u);
      c_.mem.from_host(dst.data(), c.master.data(), dst.size_bytes());
    }
    std::vector<float>().swap(c.master);
    std::vector<float>().swap(c.m);
    std::vector<float>().swap(c.v);
  }
}

}  // namespace zt::zero::detail
