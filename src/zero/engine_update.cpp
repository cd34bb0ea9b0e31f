// The update's state (engine_update.hpp): gradients, moments, the bf16-true work buffer.
#include "engine_update.hpp"

namespace zt::zero::detail {

Update::Update(const EngineContext& ctx, const BufferPlan& plan, const std::vector<uint8_t>& frozen)
    : c_(ctx), frozen_(frozen) {
  const int stage = c_.opt.stage;
  for (const UnitBuffers& b : plan.units) {
    const auto n_of = [](int64_t count) { return static_cast<size_t>(count); };
    if (stage <= 1) full_grads_.emplace_back(c_.mem, n_of(b.full_grads), "gradients");
    if (stage >= 2) grad_shard_.emplace_back(c_.mem, n_of(b.grad_shard), "gradient shards");
    m_.emplace_back(c_.mem, n_of(b.moments), "AdamW m");
    v_.emplace_back(c_.mem, n_of(b.moments), "AdamW v");
  }
  if (plan.update_wide > 0)
    wide_ = Buf<float>(c_.mem, static_cast<size_t>(plan.update_wide), "bf16-true AdamW buffer");
}

float* Update::full_grads(int u) { return full_grads_[static_cast<size_t>(u)].data(); }
float* Update::grad_shard(int u) { return grad_shard_[static_cast<size_t>(u)].data(); }

float* Update::owned_grads(int u) {
  return c_.opt.stage <= 1 ? full_grads(u) + c_.part.unit(u).begin : grad_shard(u);
}

// Stage 0 updates the whole unit on every rank; stages 1-3 only the owned elements.
std::span<float> Update::grads(int u) {
  const UnitPartition& p = c_.part.unit(u);
  if (c_.opt.stage == 0) return {full_grads(u), static_cast<size_t>(p.numel)};
  return {owned_grads(u), static_cast<size_t>(p.owned)};
}

bool Update::grads_finite(int u) {
  return c_.mem.all_finite(owned_grads(u), static_cast<size_t>(c_.part.unit(u).owned));
}

void Update::add_sum_squares() {
  for (int u = 0; u < c_.part.num_units(); ++u)
    if (trainable(u)) c_.mem.sum_squares_add(owned_grads(u), static_cast<size_t>(c_.part.unit(u).owned));
}

// When world takes the space's buffers (NCCL; the staged path) the sums stay in the
// space and the all-reduce runs there: on the device, NCCL on its stream after the
// compute that made the sum of squares (order_after), then one host read of both.
// Otherwise over the host communicator. The bytes are the same either way (two doubles,
// counted as world's).
void Update::all_reduce_sums(double sums[2]) {
  if (!c_.groups.world_takes_space_memory()) {
    sums[0] = c_.mem.sum_squares_take();
    c_.groups.host().all_reduce(sums, sums, 2, DType::kF64, comm::ReduceOp::kSum);
    return;
  }
  // Not in memory(): 16 bytes, like the staging buffers.
  if (sums_.empty()) sums_ = Buf<double>(c_.mem, 2, "the step's sums");
  c_.mem.sum_squares_store(sums_.data());
  c_.mem.from_host(sums_.data() + 1, &sums[1], sizeof(double));
  c_.groups.world().all_reduce(sums_.data(), sums_.data(), 2, DType::kF64, comm::ReduceOp::kSum);
  c_.mem.to_host(sums, sums_.data(), 2 * sizeof(double));
}

void Update::scale_grads(float c) {
  for (int u = 0; u < c_.part.num_units(); ++u) {
    if (!trainable(u)) continue;
    const std::span<float> g = grads(u);
    c_.mem.scale(g.data(), g.size(), c);
  }
}

void Update::zero_grads() {
  for (auto& g : full_grads_) if (!g.empty()) c_.mem.zero(g.data(), g.size());  // (frozen: empty)
  for (auto& g : grad_shard_) if (!g.empty()) c_.mem.zero(g.data(), g.size());
}

int64_t Update::moment_offset(int u) const {
  return c_.opt.stage == 0 ? c_.part.unit(u).begin : 0;  // stage 0 keeps whole moments
}

std::span<float> Update::m(int u) {
  const UnitPartition& p = c_.part.unit(u);
  return {m_[static_cast<size_t>(u)].data(), static_cast<size_t>(c_.opt.stage == 0 ? p.numel : p.owned)};
}

std::span<float> Update::v(int u) {
  const UnitPartition& p = c_.part.unit(u);
  return {v_[static_cast<size_t>(u)].data(), static_cast<size_t>(c_.opt.stage == 0 ? p.numel : p.owned)};
}

float* Update::owned_m(int u) { return m_[static_cast<size_t>(u)].data() + moment_offset(u); }
float* Update::owned_v(int u) { return v_[static_cast<size_t>(u)].data() + moment_offset(u); }

size_t Update::grad_bytes() const { return bytes_of(full_grads_) + bytes_of(grad_shard_); }
size_t Update::moment_bytes() const { return bytes_of(m_) + bytes_of(v_); }

}  // namespace zt::zero::detail
