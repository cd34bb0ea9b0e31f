// The parameter store (engine_params.hpp).
#include "engine_params.hpp"

#include <algorithm>

namespace zt::zero::detail {

namespace {

template <class T>
T* at(std::vector<Buf<T>>& v, int u) {
  return v.empty() ? nullptr : v[static_cast<size_t>(u)].data();
}

}  // namespace

ParamStore::ParamStore(const EngineContext& ctx, const model::ParamLayout& layout,
                       const model::InitOptions& init, bool bf16_weights, bool bf16_master)
    : c_(ctx), bf16_weights_(bf16_weights), bf16_master_(bf16_master) {
  Space& mem = c_.mem;
  std::vector<float> init_buf;  // host: one unit's initial values, copied into mem
  for (int u = 0; u < c_.part.num_units(); ++u) {
    const UnitPartition& p = c_.part.unit(u);
    if (c_.opt.stage <= 2) {
      init_buf.assign(static_cast<size_t>(p.numel), 0.0f);
      model::init_unit_slice<float>(layout, u, init, 0, std::span<float>(init_buf));
      if (bf16_weights_) compute_.emplace_back(mem, static_cast<size_t>(p.padded), "bf16 parameters");
      if (bf16_master_) {  // the parameters are the bf16 rounding of the fp32 initial values
        from_host_rounded(mem, compute_.back().data(), init_buf);
      } else {
        full_.emplace_back(mem, static_cast<size_t>(p.padded), "parameters");
        mem.from_host(full_.back().data(), init_buf.data(), init_buf.size() * sizeof(float));
      }
    } else {
      init_buf.assign(static_cast<size_t>(p.owned), 0.0f);
      // A shard wholly in the padding (owned 0: a small unit over many ranks, or qgZ's
      // block alignment) starts past the unit's end: its (empty) slice starts at the end.
      model::init_unit_slice<float>(layout, u, init, std::min(p.begin, p.numel),
                                    std::span<float>(init_buf));
      if (bf16_master_) {
        half_.emplace_back(mem, static_cast<size_t>(p.shard), "parameter shards");
        from_host_rounded(mem, half_.back().data(), init_buf);
      } else {
        shard_.emplace_back(mem, static_cast<size_t>(p.shard), "parameter shards");
        mem.from_host(shard_.back().data(), init_buf.data(), init_buf.size() * sizeof(float));
      }
    }
  }
}

float* ParamStore::full(int u) { return at(full_, u); }
float* ParamStore::shard(int u) { return at(shard_, u); }
bf16* ParamStore::compute(int u) { return at(compute_, u); }
bf16* ParamStore::half(int u) { return at(half_, u); }

float* ParamStore::owned(int u) {
  return c_.opt.stage == 3 ? shard(u) : full(u) + c_.part.unit(u).begin;
}

bf16* ParamStore::owned_half(int u) {
  return c_.opt.stage == 3 ? half(u) : compute(u) + c_.part.unit(u).begin;
}

std::span<bf16> ParamStore::half_for_update(int u) {
  const UnitPartition& p = c_.part.unit(u);
  if (c_.opt.stage == 0) return {compute(u), static_cast<size_t>(p.numel)};
  return {owned_half(u), static_cast<size_t>(p.owned)};
}

const void* ParamStore::replicated(int u) const {
  const size_t i = static_cast<size_t>(u);
  return bf16_weights_ ? static_cast<const void*>(compute_[i].data()) : full_[i].data();
}

void ParamStore::cast_compute() {
  if (bf16_master_ || full_.empty()) return;  // compute_ are the parameters / come up in bf16
  for (size_t i = 0; i < compute_.size(); ++i)
    c_.mem.to_bf16(full_[i].data(), full_[i].size(), compute_[i].data());
}

void ParamStore::add_half_shards(const BufferPlan& plan) {
  for (int u = 0; u < c_.part.num_units(); ++u) {
    const size_t n = static_cast<size_t>(plan.units[static_cast<size_t>(u)].param_half);
    half_.emplace_back(c_.mem, n, "bf16 parameter shards");
    c_.mem.to_bf16(shard(u), n, half_.back().data());
  }
}

void ParamStore::drop_shard(int u) { shard_[static_cast<size_t>(u)].reset(); }

void ParamStore::drop_fp32() {
  shard_.clear();
  full_.clear();
}

size_t ParamStore::replicated_bytes() const { return bytes_of(full_) + bytes_of(compute_); }
size_t ParamStore::shard_bytes() const { return bytes_of(shard_) + bytes_of(half_); }

}  // namespace zt::zero::detail
